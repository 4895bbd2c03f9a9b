package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
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
