package main

import (
	"context"
	"fmt"
)

// runCheck implements `npuchat check`. Not written yet: its issue owns it.
func runCheck(ctx context.Context, env *Env, args []string) int {
	fmt.Fprintln(env.Stderr, "npuchat check: not available in this build yet")
	return 2
}
