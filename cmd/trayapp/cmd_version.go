package main

import (
	"context"
	"fmt"
	"runtime"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

// runVersion implements `npuchat version`.
func runVersion(ctx context.Context, env *Env, args []string) int {
	fmt.Fprintf(env.Stdout, "npuchat %s (%s/%s, %s)\n", version, runtime.GOOS, runtime.GOARCH, runtime.Version())
	return 0
}
