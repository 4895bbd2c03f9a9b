package main

import (
	"context"
	"fmt"
)

// runBench implements `npuchat bench`. Not written yet: its issue owns it.
func runBench(ctx context.Context, env *Env, args []string) int {
	fmt.Fprintln(env.Stderr, "npuchat bench: not available in this build yet")
	return 2
}
