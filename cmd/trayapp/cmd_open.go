package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/npuchat/npuchat/instance"
)

// runOpen asks the running NPU Chat (the tray app, this user's one
// instance) to open the chat page in the browser through a fresh
// one-time link, as a second launch does: the way back in after the
// link `serve` printed, or the one the tray opened, was used. When NPU
// Chat is not running it says how to start it.
func runOpen(ctx context.Context, env *Env, args []string) int {
	if len(args) > 0 {
		fmt.Fprintln(env.Stderr, "npuchat open: takes no arguments (it opens the chat of the running NPU Chat)")
		return 2
	}
	dir, err := instance.DefaultDir(env.GOOS, env.Getenv)
	if err != nil {
		fmt.Fprintln(env.Stderr, "npuchat open:", err)
		return 1
	}
	// Holding the lock means no NPU Chat runs: let it go at once.
	switch inst, err := instance.Acquire(instance.Options{Dir: dir}); {
	case err == nil:
		inst.Close()
		fmt.Fprintln(env.Stderr, "npuchat open: NPU Chat is not running; start it (npuchat, the tray app), which opens the chat, or run `npuchat serve`, which prints a one-time link to it")
		return 1
	case !errors.Is(err, instance.ErrRunning):
		fmt.Fprintln(env.Stderr, "npuchat open:", err)
		return 1
	}
	if err := instance.Notify(ctx, dir, nil, instance.OpenChat); err != nil {
		fmt.Fprintln(env.Stderr, "npuchat open:", err)
		return 1
	}
	fmt.Fprintln(env.Stdout, "The chat is opening in your browser (a fresh one-time link).")
	return 0
}
