package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"time"

	"github.com/npuchat/npuchat/config"
	"github.com/npuchat/npuchat/models"
	"github.com/npuchat/npuchat/models/hub"
	"github.com/npuchat/npuchat/service/install"
)

// runInstall implements `npuchat install [flags] [MODEL]`: download a
// catalog model from Hugging Face and install it into FastFlowLM's
// folders (or NPU Chat's own without FastFlowLM); with --verify, re-hash
// an installed model instead.
func runInstall(ctx context.Context, env *Env, args []string) int {
	fs := flag.NewFlagSet("install", flag.ContinueOnError)
	fs.SetOutput(env.Stderr)
	flmRoot := fs.String("flm-root", "", "use the FastFlowLM in `DIR` (flm, model_list.json, xclbins/, models/) instead of finding it")
	noSystem := fs.Bool("no-system", false, "do not register in FastFlowLM's own model_list.json or copy kernels to its folder, even when writable")
	source := fs.String("source", models.SourceNPU, "npu (the FastFlowLM port) or original (the original safetensors, for the in-process engine)")
	verify := fs.Bool("verify", false, "re-hash the installed files against the hashes recorded at install (offline)")
	asJSON := fs.Bool("json", false, "print the result as JSON")
	fs.Usage = func() {
		fmt.Fprintln(env.Stderr, "Usage: npuchat install [flags] [MODEL]   (default model: "+config.DefaultModel+")")
		fs.PrintDefaults()
	}
	rest, err := parseInterspersed(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		return 2
	}
	if len(rest) > 1 {
		fs.Usage()
		return 2
	}
	name := ""
	if len(rest) == 1 {
		name = rest[0]
	}
	in, code := newInstaller(env, *flmRoot)
	if in == nil {
		return code
	}
	if name == "" {
		name = in.Config.Model
	}
	if *verify {
		return verifyModel(ctx, env, in, name, *asJSON)
	}
	// The install in the same words as the tray and the page: a Tracker
	// turns the installer's events into the install's status, and
	// install.Status.Words says it.
	bar := newProgressBar(env.Stderr)
	tr := install.NewTracker(name, time.Now())
	in.Progress = func(e models.Event) {
		step := tr.Event(e)
		bar.show(step, tr.Status().Words())
	}
	res, err := in.Install(ctx, name, models.InstallOptions{Source: *source, NoSystem: *noSystem})
	if err != nil && ctx.Err() != nil {
		err = fmt.Errorf("%w (%v)", context.Canceled, err)
	}
	st := tr.End(res, err, time.Now())
	bar.finish()
	if err != nil {
		w := st.Words()
		if st.State == install.StateCancelled {
			fmt.Fprintf(env.Stderr, "npuchat install: interrupted. %s Run the same command again to resume.\n", w.Line)
			return 1
		}
		fmt.Fprintf(env.Stderr, "npuchat install: %s\n  %s\n%s\n", w.Problem, w.Detail, w.Line)
		return 1
	}
	if *asJSON {
		return printJSON(env, res)
	}
	m := res.Manifest
	switch {
	case len(res.Downloaded) == 0 && len(res.Changed) == 0:
		fmt.Fprintf(env.Stdout, "%s is already installed in %s; nothing to do\n", res.Model.Name, m.Dir)
	default:
		fmt.Fprintf(env.Stdout, "installed %s in %s (%d files downloaded, %s)\n", res.Model.Name, m.Dir, len(res.Downloaded), hub.HumanBytes(m.TotalSize()))
	}
	for _, l := range m.Lists {
		fmt.Fprintf(env.Stdout, "registered as %s in %s\n", res.Model.FLMTag(), l)
	}
	for _, d := range m.XclbinDirs {
		fmt.Fprintf(env.Stdout, "kernels in %s\n", d)
	}
	for _, n := range res.Notes {
		fmt.Fprintf(env.Stdout, "note: %s\n", n)
	}
	return 0
}

func verifyModel(ctx context.Context, env *Env, in *models.Installer, name string, asJSON bool) int {
	reps, err := in.Verify(ctx, name)
	if err != nil {
		fmt.Fprintf(env.Stderr, "npuchat install --verify: %v\n", err)
		return 1
	}
	ok := true
	for _, r := range reps {
		ok = ok && r.OK
	}
	if asJSON {
		printJSON(env, reps)
	} else {
		for _, r := range reps {
			for _, f := range r.Files {
				if f.OK {
					fmt.Fprintf(env.Stdout, "ok      %s\n", f.Path)
				} else {
					fmt.Fprintf(env.Stdout, "FAILED  %s: %s\n", f.Path, f.Problem)
				}
			}
			verdict := "verified"
			if !r.OK {
				verdict = "DAMAGED: run npuchat install " + r.Model + " to repair it"
			}
			fmt.Fprintf(env.Stdout, "%s (%s) in %s: %s\n", r.Model, r.Source, r.Dir, verdict)
		}
	}
	if !ok {
		return 1
	}
	return 0
}

// newInstaller loads the configuration and builds the installer; on
// failure it prints why and returns the exit code.
func newInstaller(env *Env, flmRoot string) (*models.Installer, int) {
	cfg, err := config.Load(env.Getenv, runtime.GOOS)
	if err != nil {
		fmt.Fprintf(env.Stderr, "npuchat: %v\n", err)
		return nil, 1
	}
	in, err := models.NewInstaller(cfg, models.Options{FLMRoot: flmRoot, Getenv: env.Getenv})
	if err != nil {
		fmt.Fprintf(env.Stderr, "npuchat: %v\n", err)
		return nil, 1
	}
	return in, 0
}

// parseInterspersed parses flags that may come before or after the
// positional arguments ("install minicpm5:2b --flm-root X").
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var rest []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			return rest, nil
		}
		if args[0] == "--" {
			return append(rest, args[1:]...), nil
		}
		rest = append(rest, args[0])
		args = args[1:]
	}
}

func printJSON(env *Env, v any) int {
	enc := json.NewEncoder(env.Stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		fmt.Fprintf(env.Stderr, "npuchat: %v\n", err)
		return 1
	}
	return 0
}

// progressBar shows an install's words as it goes: on a terminal one
// redrawn line while bytes move and a kept line at each step; otherwise
// (logs, tests) a line at each step only.
type progressBar struct {
	w        io.Writer
	terminal bool
	drawn    bool
	last     time.Time
	said     string // the last kept line
}

func newProgressBar(w io.Writer) *progressBar {
	b := &progressBar{w: w}
	if f, ok := w.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			b.terminal = true
		}
	}
	return b
}

// show takes the install's words after one of the installer's events;
// step says the event was a step (a phase, a file done), not bytes.
func (b *progressBar) show(step bool, w install.Words) {
	if step {
		if w.Line != b.said {
			b.clear()
			fmt.Fprintln(b.w, w.Line)
			b.said = w.Line
		}
		return
	}
	if !b.terminal || time.Since(b.last) < 100*time.Millisecond {
		return
	}
	b.last = time.Now()
	line := w.Line
	if w.File != "" {
		line += "  " + w.File
	}
	fmt.Fprint(b.w, "\r"+line+"\x1b[K")
	b.drawn = true
}

func (b *progressBar) clear() {
	if b.drawn {
		fmt.Fprint(b.w, "\r\x1b[K")
		b.drawn = false
	}
}

func (b *progressBar) finish() { b.clear() }
