package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"runtime"
	"time"

	"github.com/npuchat/npuchat/npu/check"
	"github.com/npuchat/npuchat/npu/oflm"
	"github.com/npuchat/npuchat/npu/xrt"
)

// xrtProbeChild is the hidden first argument that makes `npuchat check`
// the child of an XRT probe: it loads XRT in this process and prints the
// result as JSON, so that a crash or hang of XRT cannot take the parent down.
const xrtProbeChild = "--xrt-probe-child"

// runCheck implements `npuchat check`: it says whether the NPU can run a
// model and what to fix. Exit code 0: ready; 1: not ready; 2: the check
// itself could not run (bad flags, unreadable recorded tree).
func runCheck(ctx context.Context, env *Env, args []string) int {
	if len(args) > 0 && args[0] == xrtProbeChild {
		return xrt.RunChild(ctx, args[1:], env.Stdout)
	}
	fs := flag.NewFlagSet("check", flag.ContinueOnError)
	fs.SetOutput(env.Stderr)
	fs.Usage = func() {
		fmt.Fprintln(env.Stderr, "Usage: npuchat check [--json] [--sysroot DIR | --record DIR] [--no-xrt] [--model-bytes N]")
		fmt.Fprintln(env.Stderr, "\nChecks the AMD NPU, its driver, firmware, permissions, limits and the XRT runtime.")
		fmt.Fprintln(env.Stderr, "Exit status: 0 ready, 1 not ready, 2 error.")
		fmt.Fprintln(env.Stderr)
		fs.PrintDefaults()
	}
	asJSON := fs.Bool("json", false, "print the report as JSON (fields: ready, os, summary, npu, checks[].{id,title,group,status,found,need,fix})")
	sysroot := fs.String("sysroot", "", "check a tree recorded with --record instead of this machine")
	record := fs.String("record", "", "also save what the checks read into this new folder, to attach to a bug report")
	noXRT := fs.Bool("no-xrt", false, "do not load the XRT runtime (L14 then only looks for it on disk; L16 and W5 are skipped)")
	modelBytes := fs.Int64("model-bytes", 0, "size of the model to run, for the memlock check (0: FastFlowLM's 100 MiB minimum)")
	probeTimeout := fs.Duration("xrt-timeout", 30*time.Second, "how long the XRT probe may take before it counts as hung")
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(env.Stderr, "npuchat check: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	if *sysroot != "" && *record != "" {
		fmt.Fprintln(env.Stderr, "npuchat check: --sysroot and --record exclude each other (--record reads this machine)")
		return 2
	}
	opts := check.Options{Root: *sysroot, ModelBytes: *modelBytes, Getenv: env.Getenv}
	if !*noXRT && *sysroot == "" {
		if exe, err := os.Executable(); err == nil {
			opts.XRT = xrt.ChildProber{Command: []string{exe, "check", xrtProbeChild}, Timeout: *probeTimeout}
		} else {
			fmt.Fprintf(env.Stderr, "npuchat check: cannot find own executable (%v); XRT is not loaded\n", err)
		}
	}
	var report *check.Report
	var err error
	if *record != "" {
		report, err = check.Record(ctx, *record, opts)
	} else {
		report, err = check.Run(ctx, opts)
	}
	if err != nil {
		fmt.Fprintf(env.Stderr, "npuchat check: %v\n", err)
		return 2
	}
	report.Routes = routes(ctx, env, opts, report)
	if *asJSON {
		err = check.WriteJSON(env.Stdout, report)
	} else {
		err = check.WriteText(env.Stdout, report)
	}
	if err != nil {
		fmt.Fprintf(env.Stderr, "npuchat check: %v\n", err)
		return 2
	}
	if *record != "" {
		fmt.Fprintf(env.Stderr, "\nRecorded what the checks read into %s (no other files). Attach it to a bug report:\n  tar czf npucheck.tgz -C %s .\n", *record, *record)
	}
	if !report.Ready {
		return 1
	}
	return 0
}

// routes are the NPU routes lines of the report: oflm for MiniCPM5-2B
// (its readiness for a 2 GB model, its registry entry's size) and
// FastFlowLM for its own models; flm and oflm are found as serve finds
// them.
func routes(ctx context.Context, env *Env, opts check.Options, rep *check.Report) []check.Route {
	o := opts
	o.ModelBytes = 2e9
	loc := oflm.Locator{GOOS: runtime.GOOS, LookPath: oflm.LookPathIn(env.Getenv("PATH"), runtime.GOOS)}
	_, _, oflmRoute := oflm.Probe(ctx, loc, "", o)
	exe := ""
	if in, _ := newInstaller(env, ""); in != nil {
		if l := in.Layout(ctx); l != nil {
			exe = l.Exe
		}
	}
	return []check.Route{oflmRoute, check.FLMRoute(exe, rep)}
}
