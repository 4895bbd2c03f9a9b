package main

import (
	"context"
	"fmt"
)

// runTokenize implements `npuchat tokenize`. Not written yet: its issue owns it.
func runTokenize(ctx context.Context, env *Env, args []string) int {
	fmt.Fprintln(env.Stderr, "npuchat tokenize: not available in this build yet")
	return 2
}
