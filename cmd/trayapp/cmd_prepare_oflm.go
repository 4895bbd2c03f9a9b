package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"

	"github.com/npuchat/npuchat/app"
	"github.com/npuchat/npuchat/models/hub"
)

// runPrepareOFLM implements `npuchat prepare-oflm`: convert the
// installed MiniCPM5-2B FastFlowLM pack into the llama-family container
// oflm's open kernels read, in oflm's models folder (app.PrepareOFLM),
// printing its progress.
func runPrepareOFLM(ctx context.Context, env *Env, args []string) int {
	fs := flag.NewFlagSet("prepare-oflm", flag.ContinueOnError)
	fs.SetOutput(env.Stderr)
	var flags app.Flags
	fs.StringVar(&flags.FLMRoot, "flm-root", "", "use the FastFlowLM in `DIR` (where minicpm5:2b's pack was installed) instead of finding it")
	fs.StringVar(&flags.OFLM, "oflm", "", "the oflm `FILE` to prepare for instead of finding it on PATH or where its packages install it")
	fs.Usage = func() {
		fmt.Fprintln(env.Stderr, "Usage: npuchat prepare-oflm [--flm-root DIR] [--oflm FILE]")
		fmt.Fprintln(env.Stderr, "Prepares minicpm5:2b (installed with `npuchat install`) for the NPU through oflm (OpenFlowLM-Next).")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fs.Usage()
		return 2
	}
	opts := appOptions(env, flags, "")
	opts.Logger = slog.New(slog.DiscardHandler)
	a, err := app.New(ctx, opts)
	if err != nil {
		fmt.Fprintln(env.Stderr, "npuchat prepare-oflm:", err)
		return 2
	}
	defer a.Shutdown(context.Background())
	shown := int64(-1)
	res, dir, err := a.PrepareOFLM(ctx, func(done, total int64) {
		if total <= 0 {
			return
		}
		if pct := done * 100 / total; pct/10 != shown/10 || done == total {
			shown = pct
			fmt.Fprintf(env.Stderr, "model.q4nx: %d%% (%s of %s)\n", pct, hub.HumanBytes(done), hub.HumanBytes(total))
		}
	})
	if err != nil {
		fmt.Fprintln(env.Stderr, "npuchat prepare-oflm:", err)
		return 1
	}
	if res.UpToDate {
		fmt.Fprintf(env.Stdout, "minicpm5:2b is already prepared for oflm in %s; nothing to do\n", dir)
	} else {
		fmt.Fprintf(env.Stdout, "prepared minicpm5:2b for oflm in %s (%d files)\n", dir, len(res.Files))
	}
	fmt.Fprintln(env.Stdout, "`npuchat serve --engine npu` (or auto) now serves it on the NPU through oflm.")
	return 0
}
