package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/npuchat/npuchat/instance"
)

// `npuchat open` asks the running instance to open the chat (the request
// a second launch sends), and says how to start NPU Chat when none runs.
func TestOpenAsksTheRunningInstance(t *testing.T) {
	run1 := t.TempDir()
	env := func(out, errb *bytes.Buffer) *Env {
		return &Env{Stdin: strings.NewReader(""), Stdout: out, Stderr: errb, GOOS: "linux",
			Getenv: func(k string) string {
				if k == "XDG_RUNTIME_DIR" {
					return run1
				}
				return ""
			}}
	}
	var out, errb bytes.Buffer
	if code := run(context.Background(), env(&out, &errb), []string{"open"}); code != 1 || !strings.Contains(errb.String(), "NPU Chat is not running") {
		t.Fatalf("nothing running: exit %d, stderr %q", code, errb.String())
	}

	dir, err := instance.DefaultDir("linux", func(string) string { return run1 })
	if err != nil {
		t.Fatal(err)
	}
	inst, err := instance.Acquire(instance.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer inst.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got := make(chan string, 1)
	go inst.Serve(ctx, func(_ context.Context, req string) error {
		got <- req
		return nil
	})
	out.Reset()
	errb.Reset()
	if code := run(context.Background(), env(&out, &errb), []string{"open"}); code != 0 || !strings.Contains(out.String(), "opening in your browser") {
		t.Fatalf("running: exit %d, stdout %q, stderr %q", code, out.String(), errb.String())
	}
	// The instance replies after its handler returns, and open reports
	// success only on that reply: the request is in got by now.
	select {
	case req := <-got:
		if req != instance.OpenChat {
			t.Errorf("the instance was asked %q, want %q", req, instance.OpenChat)
		}
	default:
		t.Fatal("open reported success but the running instance was asked nothing")
	}
}
