package main

import (
	"context"
	"fmt"
)

// runInstall implements `npuchat install`. Not written yet: its issue owns it.
func runInstall(ctx context.Context, env *Env, args []string) int {
	fmt.Fprintln(env.Stderr, "npuchat install: not available in this build yet")
	return 2
}
