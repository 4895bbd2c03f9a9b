package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/npuchat/npuchat/models/hub"

	"github.com/npuchat/npuchat/models/hub/hubtest"
	"github.com/npuchat/npuchat/service/install"
	"github.com/npuchat/npuchat/service/install/installtest"
)

// cli runs npuchat in process with its own environment.
type cli struct {
	t   *testing.T
	env map[string]string
}

func (c cli) run(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	e := &Env{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb, Getenv: func(k string) string { return c.env[k] }}
	code := run(context.Background(), e, args)
	return code, out.String(), errb.String()
}

func TestInstallModelsUninstallCLI(t *testing.T) {
	fake := hubtest.New(installtest.Repo, "main", installtest.StubFiles())
	defer fake.Close()
	base := t.TempDir()
	root := filepath.Join(base, "flm")
	os.MkdirAll(filepath.Join(root, "xclbins", "Llama-3.2-1B-NPU2"), 0o755)
	os.WriteFile(filepath.Join(root, "flm"), []byte("#!/bin/sh\nif [ \"$1\" = version ] && [ \"$2\" = --json ]; then echo '{\"version\": \"0.9.45\"}'; else exit 3; fi\n"), 0o755)
	sys, err := os.ReadFile("../../models/flm/testdata/flm_v0.9.45.input.json")
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(root, "model_list.json"), sys, 0o644)
	c := cli{t, map[string]string{
		"HOME": filepath.Join(base, "home"), "NPUCHAT_DATA": filepath.Join(base, "data"),
		"NPUCHAT_CONFIG": filepath.Join(base, "settings.json"), "HF_ENDPOINT": fake.URL(),
	}}

	code, out, _ := c.run("models", "--flm-root", root)
	if code != 0 || !strings.Contains(out, "FastFlowLM: "+filepath.Join(root, "flm")+" (0.9.45)") || !regexpLine(out, `minicpm5:2b\s+no`) {
		t.Fatalf("models before install: %d\n%s", code, out)
	}

	// Default model, flags after the positional argument too.
	code, out, errs := c.run("install", "--flm-root", root)
	if code != 0 {
		t.Fatalf("install: %d\n%s\n%s", code, out, errs)
	}
	dir := filepath.Join(root, "models", "MiniCPM5-2B-NPU2")
	for _, want := range []string{"installed minicpm5:2b in " + dir, "registered as minicpm5:2b in " + filepath.Join(root, "model_list.json"), "kernels in " + filepath.Join(root, "xclbins", "MiniCPM5-2B-NPU2")} {
		if !strings.Contains(out, want) {
			t.Errorf("install output lacks %q:\n%s", want, out)
		}
	}
	if !regexp.MustCompile(`(?m)^All \d+ files downloaded \(\d+\.\d kB\)\. Setting them up…$`).MatchString(errs) {
		t.Errorf("no progress lines on stderr:\n%s", errs)
	}
	code, out, _ = c.run("install", "minicpm5:2b", "--flm-root", root)
	if code != 0 || !strings.Contains(out, "already installed") {
		t.Errorf("second install: %d\n%s", code, out)
	}
	code, out, _ = c.run("install", "--verify", "--flm-root", root, "MiniCPM5-2B-NPU2")
	if code != 0 || !strings.Contains(out, "verified") || !strings.Contains(out, "ok      model.q4nx") {
		t.Errorf("verify: %d\n%s", code, out)
	}

	code, out, _ = c.run("models", "--json", "--flm-root", root)
	var st struct {
		FLM struct {
			Found   bool
			Version string
		}
		Models []struct {
			Model     string
			Installed bool
			Installs  []struct {
				Dir        string
				Size       int64
				Verified   string
				Registered []string
			}
		}
	}
	if err := json.Unmarshal([]byte(out), &st); err != nil || code != 0 {
		t.Fatalf("models --json: %d %v\n%s", code, err, out)
	}
	if !st.FLM.Found || st.FLM.Version != "0.9.45" || !st.Models[0].Installed || st.Models[0].Installs[0].Dir != dir || st.Models[0].Installs[0].Verified != "yes" || len(st.Models[0].Installs[0].Registered) != 2 || st.Models[0].Installs[0].Size < 100_000 {
		t.Errorf("models --json: %+v", st)
	}

	// Damage a file: verify fails with exit 1 and says how to repair.
	p := filepath.Join(dir, "model.q4nx")
	b, _ := os.ReadFile(p)
	b[5] ^= 0xff
	os.WriteFile(p, b, 0o644)
	code, out, _ = c.run("install", "--verify", "--flm-root", root)
	if code != 1 || !strings.Contains(out, "FAILED  model.q4nx") || !strings.Contains(out, "run npuchat install minicpm5:2b") {
		t.Errorf("verify of a damaged file: %d\n%s", code, out)
	}

	code, out, _ = c.run("uninstall", "minicpm5:2b", "--flm-root", root)
	if code != 0 || !strings.Contains(out, "uninstalled minicpm5:2b") {
		t.Errorf("uninstall: %d\n%s", code, out)
	}
	if _, err := os.Stat(dir); err == nil {
		t.Error("model folder left behind")
	}
	if _, err := os.Stat(filepath.Join(root, "xclbins", "Llama-3.2-1B-NPU2")); err != nil {
		t.Error("uninstall removed another model's kernels")
	}
	code, out, _ = c.run("models", "--flm-root", root)
	if code != 0 || !regexpLine(out, `minicpm5:2b\s+no`) {
		t.Errorf("models after uninstall: %d\n%s", code, out)
	}
}

func TestCLIErrors(t *testing.T) {
	base := t.TempDir()
	c := cli{t, map[string]string{"HOME": base, "NPUCHAT_DATA": filepath.Join(base, "data"), "NPUCHAT_CONFIG": filepath.Join(base, "s.json"), "HF_ENDPOINT": "http://127.0.0.1:1"}}
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"install", "llama9:70b"}, 1, "unknown model"},
		{[]string{"install", "a", "b"}, 2, "Usage"},
		{[]string{"install", "--bogus"}, 2, "flag provided but not defined"},
		{[]string{"uninstall"}, 2, "Usage"},
		{[]string{"install", "--verify", "minicpm5:2b"}, 1, "run npuchat install minicpm5:2b"},
		{[]string{"install", "--source", "gguf", "minicpm5:2b"}, 1, "source"},
	} {
		code, out, errs := c.run(tc.args...)
		if code != tc.code || !strings.Contains(out+errs, tc.want) {
			t.Errorf("%v: exit %d, output %q %q; want exit %d and %q", tc.args, code, out, errs, tc.code, tc.want)
		}
	}
}

// TestInstallWordsAsTheTrayAndPage: the command line says an install
// in install.Status.Words, the words the tray shows and the page gets
// in the status: a failed install prints its sentence, its whole
// detail and what was kept, exactly as Words has them.
func TestInstallWordsAsTheTrayAndPage(t *testing.T) {
	base := t.TempDir()
	c := cli{t, installtest.Env(nil, base)} // a hub nothing answers for
	code, out, errs := c.run("install")
	if code != 1 {
		t.Fatalf("install from an unreachable hub: exit %d\n%s\n%s", code, out, errs)
	}
	// The same failure as the runner words it (the detail names the
	// address; its network error is whatever the system says).
	lines := strings.Split(strings.TrimSpace(errs), "\n")
	last := lines[len(lines)-3:]
	st := install.Status{Model: "minicpm5:2b", State: install.StateFailed,
		Failure: &install.Failure{Sentence: strings.TrimPrefix(last[0], "npuchat install: "), Detail: strings.TrimPrefix(last[1], "  ")}}
	w := st.Words()
	want := install.Explain("minicpm5:2b", &hub.UnreachableError{Endpoint: "http://127.0.0.1:1", Err: errors.New("x")})
	if w.Problem != want.Sentence || !strings.Contains(w.Detail, "127.0.0.1:1") || last[2] != w.Line {
		t.Fatalf("stderr:\n%s\nwant the sentence %q, a detail, and %q", errs, want.Sentence, w.Line)
	}
	// Every kind of status: the bar prints Words' line, unchanged.
	for name, st := range installtest.Statuses() {
		var b bytes.Buffer
		bar := newProgressBar(&b)
		bar.show(true, st.Words())
		if got := strings.TrimSuffix(b.String(), "\n"); got != st.Words().Line {
			t.Errorf("%s: the command line says %q, Words %q", name, got, st.Words().Line)
		}
	}
}

func regexpLine(s, pattern string) bool { return regexp.MustCompile(`(?m)^` + pattern).MatchString(s) }

// TestInstallFastFlowLMModelCLI: `npuchat install <tag>` installs one of
// FastFlowLM's own models (its v0.9.45 list) from the fake hub into
// FastFlowLM's folder, registered under its tag; `npuchat models` lists
// it; without FastFlowLM, a model only the NPU runs is refused before
// any download, in words.
func TestInstallFastFlowLMModelCLI(t *testing.T) {
	fake := hubtest.New("FastFlowLM/Qwen3-0.6B-NPU2", "v0.9.22-faster-q4-1", installtest.StubFiles()[:4])
	defer fake.Close()
	base := t.TempDir()
	root := filepath.Join(base, "flm")
	os.MkdirAll(filepath.Join(root, "xclbins", "Qwen3-0.6B-NPU2"), 0o755)
	os.WriteFile(filepath.Join(root, "flm"), []byte("#!/bin/sh\nif [ \"$1\" = version ] && [ \"$2\" = --json ]; then echo '{\"version\": \"0.9.45\"}'; else exit 3; fi\n"), 0o755)
	sys, err := os.ReadFile("../../models/flm/testdata/flm_v0.9.45.input.json")
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(root, "model_list.json"), sys, 0o644)
	c := cli{t, map[string]string{
		"HOME": filepath.Join(base, "home"), "NPUCHAT_DATA": filepath.Join(base, "data"),
		"NPUCHAT_CONFIG": filepath.Join(base, "settings.json"), "HF_ENDPOINT": fake.URL(), "PATH": filepath.Join(base, "no-bin"),
	}}
	code, out, errs := c.run("install", "qwen3:0.6b", "--flm-root", root)
	dir := filepath.Join(root, "models", "Qwen3-0.6B-NPU2")
	if code != 0 || !strings.Contains(out, "installed qwen3:0.6b in "+dir) || !strings.Contains(out, "registered as qwen3:0.6b in "+filepath.Join(root, "model_list.json")) {
		t.Fatalf("install qwen3:0.6b: %d\n%s\n%s", code, out, errs)
	}
	if after, _ := os.ReadFile(filepath.Join(root, "model_list.json")); !bytes.Equal(after, sys) {
		t.Error("FastFlowLM's list changed, though it listed qwen3:0.6b already")
	}
	if code, out, _ = c.run("models", "--flm-root", root); code != 0 || !regexpLine(out, `qwen3:0.6b\s+yes`) {
		t.Errorf("models after the install: %d\n%s", code, out)
	}
	// No FastFlowLM (no --flm-root, nothing on PATH): refused, in words.
	code, _, errs = c.run("install", "llama3.2:1b")
	if code == 0 || !strings.Contains(errs, "llama3.2:1b runs on the NPU only, and FastFlowLM is not installed on this computer") || strings.Contains(errs, "`") {
		t.Errorf("install llama3.2:1b without FastFlowLM: %d\n%s", code, errs)
	}
	for _, r := range fake.Requests() {
		if strings.Contains(r.Path, "Llama") {
			t.Errorf("the refused install asked the hub for %s", r.Path)
		}
	}
}
