package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/npuchat/npuchat/models"
	"github.com/npuchat/npuchat/models/flm"
	"github.com/npuchat/npuchat/models/hub"
)

// runModels implements `npuchat models [--json]`: every catalog model,
// whether and where it is installed, its size, whether its files are as
// verified at install, and which model_list.json files register it.
func runModels(ctx context.Context, env *Env, args []string) int {
	fs := flag.NewFlagSet("models", flag.ContinueOnError)
	fs.SetOutput(env.Stderr)
	flmRoot := fs.String("flm-root", "", "use the FastFlowLM in `DIR` instead of finding it")
	asJSON := fs.Bool("json", false, "print JSON")
	rest, err := parseInterspersed(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		return 2
	}
	if len(rest) > 0 {
		fmt.Fprintln(env.Stderr, "Usage: npuchat models [--json] [--flm-root DIR]")
		return 2
	}
	in, code := newInstaller(env, *flmRoot)
	if in == nil {
		return code
	}
	status, err := in.Status(ctx)
	if err != nil {
		fmt.Fprintf(env.Stderr, "npuchat models: %v\n", err)
		return 1
	}
	layout := in.Layout(ctx)
	if *asJSON {
		return printJSON(env, struct {
			FLM    flmJSON         `json:"flm"`
			Models []models.Status `json:"models"`
		}{flmInfo(layout, in.Probe.GOOS), status})
	}
	if layout.Found() {
		v := layout.Version
		if v == "" {
			v = "version unknown"
		}
		fmt.Fprintf(env.Stdout, "FastFlowLM: %s (%s); models in %s\n\n", layout.Exe, v, layout.ModelsDir)
	} else {
		fmt.Fprintf(env.Stdout, "FastFlowLM: not found; %s\n\n", flm.InstallHint(in.Probe.GOOS))
	}
	tw := tabwriter.NewWriter(env.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "MODEL\tINSTALLED\tSIZE\tVERIFIED\tWHERE\tREGISTERED IN")
	for _, s := range status {
		if len(s.Installs) == 0 {
			fmt.Fprintf(tw, "%s\tno\t-\t-\t-\t-\n", s.Model)
			continue
		}
		for _, is := range s.Installs {
			reg := strings.Join(is.Registered, ", ")
			if reg == "" {
				reg = "-"
			}
			ver := is.Verified
			if len(is.Changed) > 0 {
				ver += " (" + strings.Join(is.Changed, ", ") + ")"
			}
			fmt.Fprintf(tw, "%s\tyes (%s)\t%s\t%s\t%s\t%s\n", s.Model, is.Source, hub.HumanBytes(is.Size), ver, is.Dir, reg)
		}
	}
	tw.Flush()
	return 0
}

type flmJSON struct {
	Found      bool     `json:"found"`
	Exe        string   `json:"exe,omitempty"`
	Version    string   `json:"version,omitempty"`
	ModelsDir  string   `json:"models_dir"`
	XclbinRoot string   `json:"xclbin_root,omitempty"`
	SystemList string   `json:"system_list,omitempty"`
	OwnList    string   `json:"own_list"`
	Hint       string   `json:"hint,omitempty"`
	Notes      []string `json:"notes,omitempty"`
}

func flmInfo(l *flm.Layout, goos string) flmJSON {
	j := flmJSON{Found: l.Found(), Exe: l.Exe, Version: l.Version, ModelsDir: l.ModelsDir, XclbinRoot: l.XclbinRoot, SystemList: l.SystemList, OwnList: l.OwnList, Notes: l.Notes}
	if !l.Found() {
		j.Hint = flm.InstallHint(goos)
	}
	return j
}
