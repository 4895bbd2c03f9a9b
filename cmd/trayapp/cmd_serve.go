package main

import (
	"context"
	"fmt"
)

// runServe implements `npuchat serve`.
func runServe(ctx context.Context, env *Env, args []string) int {
	fmt.Fprintln(env.Stderr, "npuchat serve: not available in this build yet")
	return 2
}

// runDefault runs the tray app, or serve when there is no display.
func runDefault(ctx context.Context, env *Env) int {
	return runServe(ctx, env, nil)
}
