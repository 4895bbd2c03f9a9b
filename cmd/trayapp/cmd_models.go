package main

import (
	"context"
	"fmt"
)

// runModels implements `npuchat models`. Not written yet: its issue owns it.
func runModels(ctx context.Context, env *Env, args []string) int {
	fmt.Fprintln(env.Stderr, "npuchat models: not available in this build yet")
	return 2
}
