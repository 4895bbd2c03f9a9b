package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/npuchat/npuchat/app"
	"github.com/npuchat/npuchat/npu/xrt"
)

// serverFlags registers the flags `serve` and the tray share on fs.
func serverFlags(fs *flag.FlagSet) *app.Flags {
	f := &app.Flags{}
	fs.StringVar(&f.Addr, "addr", "", "address to listen on (default $NPUCHAT_ADDR or 127.0.0.1:8001)")
	fs.StringVar(&f.Model, "model", "", "model to serve: a catalog name such as minicpm5:2b, or a GGUF file, Hugging Face folder or FastFlowLM model folder")
	fs.StringVar(&f.Name, "name", "", "name to serve a --model file or folder under (default: its base name)")
	fs.StringVar(&f.Engine, "engine", "", "engine: auto, npu (whichever NPU route serves the model), oflm or flm (one NPU route), cpu or remote (default $NPUCHAT_ENGINE or auto)")
	fs.StringVar(&f.RemoteURL, "remote-url", "", "base URL of an OpenAI-compatible server, for --engine remote")
	fs.StringVar(&f.KeepAlive, "keep-alive", "", "how long an idle model stays loaded, e.g. 5m; -1 keeps it loaded")
	fs.StringVar(&f.KVCacheType, "kv-cache-type", "", "how the CPU engine keeps keys and values: f32 (default, llama.cpp-exact), f16 (half the memory) or q8_0 (8-bit, twice f16's tokens)")
	fs.StringVar(&f.Speculative, "speculative", "", "how the CPU engine decodes: auto (guess tokens ahead from the text so far and check them in one step: the same answer) or off (default: the setting, else off)")
	fs.StringVar(&f.Parallel, "parallel", "", "requests the CPU engine answers at once, decoded together: 0 automatic (as many as the KV memory holds, at most 4) or 1 to 16 (default: the setting)")
	fs.StringVar(&f.FLMRoot, "flm-root", "", "FastFlowLM folder to use instead of looking for it (a portable copy)")
	fs.StringVar(&f.OFLM, "oflm", "", "the oflm (OpenFlowLM-Next) executable to run instead of finding it on PATH or where its packages install it")
	return f
}

// appOptions are the app's options for this process; sysroot, when
// set, is a tree `npuchat check --record` wrote, read for the NPU route
// instead of this machine (XRT is then not probed either).
func appOptions(env *Env, flags app.Flags, sysroot string) app.Options {
	opts := app.Options{Getenv: env.Getenv, Flags: flags, Version: version, Stderr: env.Stderr, Executable: env.Executable, NPUSysroot: sysroot}
	if env.Executable != "" && sysroot == "" {
		// The XRT probe runs in a child (this program), so that a
		// crashing XRT cannot take the server down.
		opts.XRT = xrt.ChildProber{Command: []string{env.Executable, "check", xrtProbeChild}}
	}
	return opts
}

// runServe implements `npuchat serve`: the API and the chat page, with no
// tray.
func runServe(ctx context.Context, env *Env, args []string) int {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(env.Stderr)
	flags := serverFlags(fs)
	lazy := fs.Bool("lazy", false, "load the model on the first request instead of at start")
	sysroot := fs.String("sysroot", "", "a tree recorded by `npuchat check --record` stands in for this machine's NPU device, driver and system files (the check, registration and serving of the NPU routes); flm and oflm are still found as usual")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(env.Stderr, "npuchat serve: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	if *sysroot != "" {
		if fi, err := os.Stat(*sysroot); err != nil || !fi.IsDir() {
			fmt.Fprintf(env.Stderr, "npuchat serve: --sysroot %s is not a folder; give one `npuchat check --record DIR` wrote\n", *sysroot)
			return 2
		}
	}
	return serve(ctx, env, *flags, *lazy, *sysroot)
}

// serve runs the app headless until ctx ends (sysroot: see appOptions).
func serve(ctx context.Context, env *Env, flags app.Flags, lazy bool, sysroot string) int {
	a, err := app.New(ctx, appOptions(env, flags, sysroot))
	if err != nil {
		fmt.Fprintln(env.Stderr, "npuchat serve:", err)
		return 2
	}
	ro := app.RunOptions{Model: app.ModelOn, Ready: func(url string) {
		fmt.Fprintf(env.Stdout, "NPU Chat is serving on %s (model %s, engine %s)\n", strings.TrimSuffix(url, "/"), a.Model(), a.Engine())
		fmt.Fprintf(env.Stdout, "Open the chat page with this link (it works once, in one browser): %s\n", a.OpenLink(0))
	}}
	if lazy {
		ro.Model = app.ModelOnRequest
	}
	if err := a.Run(ctx, ro); err != nil {
		fmt.Fprintln(env.Stderr, "npuchat serve:", err)
		return 1
	}
	return 0
}
