package main

import (
	"context"
	"fmt"
)

// runGenerate implements `npuchat generate`. Not written yet: its issue owns it.
func runGenerate(ctx context.Context, env *Env, args []string) int {
	fmt.Fprintln(env.Stderr, "npuchat generate: not available in this build yet")
	return 2
}
