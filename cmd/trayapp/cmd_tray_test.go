package main

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/npuchat/npuchat/instance"
)

func TestHasDisplay(t *testing.T) {
	cases := []struct {
		goos string
		env  map[string]string
		want bool
	}{
		{"linux", nil, false},
		{"linux", map[string]string{"DISPLAY": ":0"}, true},
		{"linux", map[string]string{"WAYLAND_DISPLAY": "wayland-0"}, true},
		{"freebsd", map[string]string{"DISPLAY": ""}, false},
		{"windows", nil, true},
	}
	for _, c := range cases {
		if got := hasDisplay(c.goos, func(k string) string { return c.env[k] }); got != c.want {
			t.Errorf("%s %v: %v, want %v", c.goos, c.env, got, c.want)
		}
	}
}

// TestNoCommandWithoutADisplayServes: `npuchat --addr ...` on a server
// takes serve's flags and serves.
func TestNoCommandWithoutADisplayServes(t *testing.T) {
	url := serveInProcessArgs(t, []string{"--addr", "127.0.0.1:0", "--engine", "cpu"})
	var st struct{ State, Model string }
	getJSON(t, url+"/api/status", &st)
	if st.Model != "minicpm5:2b" {
		t.Fatalf("status %+v", st)
	}
}

func TestDefaultFlagErrors(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--engine", "gpu"}, `--engine "gpu" is not one of`},
		{[]string{"--bogus"}, "flag provided but not defined: -bogus"},
		{[]string{"--hidden", "extra"}, `unknown command "extra"`},
	}
	for _, c := range cases {
		var out, errb bytes.Buffer
		code := run(context.Background(), &Env{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb, Getenv: func(string) string { return "" }, GOOS: "linux"}, c.args)
		if code != 2 || !strings.Contains(errb.String(), c.want) {
			t.Errorf("%v: exit %d, %q; want 2 and %q", c.args, code, errb.String(), c.want)
		}
	}
}

// TestSecondLaunch: a second launch asks the running NPU Chat to open
// the chat, except at login (--hidden), where it opens nothing; flags it
// cannot apply to the running one are named, not silently dropped.
func TestSecondLaunch(t *testing.T) {
	runDir := t.TempDir()
	env := map[string]string{"XDG_RUNTIME_DIR": runDir, "DISPLAY": ":0", "HOME": t.TempDir()}
	dir, err := instance.DefaultDir("linux", func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	first, err := instance.Acquire(instance.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	var mu sync.Mutex
	var requests []string
	go first.Serve(context.Background(), func(_ context.Context, req string) error {
		mu.Lock()
		defer mu.Unlock()
		requests = append(requests, req)
		return nil
	})
	launch := func(args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		code := run(context.Background(), &Env{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb,
			Getenv: func(k string) string { return env[k] }, GOOS: "linux"}, args)
		return code, out.String(), errb.String()
	}
	got := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(requests)
	}

	code, out, errs := launch("--hidden")
	if code != 0 || len(got()) != 0 || !strings.Contains(out, "already running") {
		t.Fatalf("at login: exit %d, requests %q, out %q, err %q; want 0, none", code, got(), out, errs)
	}
	code, out, errs = launch()
	if code != 0 || !slices.Equal(got(), []string{instance.OpenChat}) || errs != "" {
		t.Fatalf("plain: exit %d, requests %q, out %q, err %q", code, got(), out, errs)
	}
	code, _, errs = launch("--model", "/models/other.gguf", "--engine", "cpu")
	if code != 0 || len(got()) != 2 || !strings.Contains(errs, "--model") || !strings.Contains(errs, "--engine") || !strings.Contains(errs, "not applied") {
		t.Fatalf("with flags: exit %d, requests %q, err %q; want the flags named", code, got(), errs)
	}
}
