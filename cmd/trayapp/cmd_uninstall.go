package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
)

// runUninstall implements `npuchat uninstall MODEL`: remove the files,
// kernels and model_list.json entries the install put in place, and
// nothing else.
func runUninstall(ctx context.Context, env *Env, args []string) int {
	fs := flag.NewFlagSet("uninstall", flag.ContinueOnError)
	fs.SetOutput(env.Stderr)
	flmRoot := fs.String("flm-root", "", "use the FastFlowLM in `DIR` instead of finding it")
	rest, err := parseInterspersed(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		return 2
	}
	if len(rest) != 1 {
		fmt.Fprintln(env.Stderr, "Usage: npuchat uninstall [--flm-root DIR] MODEL")
		return 2
	}
	in, code := newInstaller(env, *flmRoot)
	if in == nil {
		return code
	}
	res, err := in.Uninstall(ctx, rest[0])
	if res != nil {
		for _, p := range res.Changed {
			fmt.Fprintf(env.Stdout, "removed or updated %s\n", p)
		}
		for _, n := range res.Notes {
			fmt.Fprintf(env.Stdout, "note: %s\n", n)
		}
	}
	if err != nil {
		fmt.Fprintf(env.Stderr, "npuchat uninstall: %v\n", err)
		return 1
	}
	if len(res.Changed) > 0 {
		fmt.Fprintf(env.Stdout, "uninstalled %s\n", res.Model.Name)
	}
	return 0
}
