package main

import (
	"context"
	"fmt"
)

// runUninstall implements `npuchat uninstall`. Not written yet: its issue owns it.
func runUninstall(ctx context.Context, env *Env, args []string) int {
	fmt.Fprintln(env.Stderr, "npuchat uninstall: not available in this build yet")
	return 2
}
