package main

import (
	"encoding/json"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/npuchat/npuchat/engine/testmodel"
)

func TestBench(t *testing.T) {
	w, err := testmodel.Random(3, testmodel.MiniCPM5Small())
	if err != nil {
		t.Fatal(err)
	}
	model := filepath.Join(t.TempDir(), "m.gguf")
	if err := testmodel.WriteGGUF(model, w, testmodel.Q4_1); err != nil {
		t.Fatal(err)
	}
	for _, exact := range []bool{false, true} {
		args := []string{"bench", "--model", model, "--prompt-tokens", "40", "--gen-tokens", "5", "--threads", "2", "--json"}
		want := "q8"
		if exact {
			args, want = append(args, "--exact"), "f32"
		}
		code, out, errs := runCmd(t, args...)
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errs)
		}
		var res benchResult
		if err := json.Unmarshal([]byte(out), &res); err != nil {
			t.Fatalf("output %q: %v", out, err)
		}
		if res.Format != "gguf" || res.Threads != 2 || res.Activations != want || res.PromptTokens != 40 || res.GenTokens != 5 ||
			!(res.LoadSeconds > 0 && res.PrefillTokS > 0 && res.DecodeTokS > 0 && res.DecodeBytes > 0) {
			t.Errorf("result %+v", res)
		}
		if runtime.GOOS == "linux" && res.PeakRSSMB < 1 {
			t.Errorf("peak RSS %v MB on Linux", res.PeakRSSMB)
		}
	}
	code, out, _ := runCmd(t, "bench", "--model", model, "--prompt-tokens", "3", "--gen-tokens", "2")
	if code != 0 || !strings.Contains(out, "decode   2 tokens") {
		t.Errorf("text output (exit %d): %q", code, out)
	}
}

func TestBenchBadArguments(t *testing.T) {
	cases := [][]string{
		{"bench"},
		{"bench", "--model", "x", "--prompt-tokens", "0"},
		{"bench", "--model", "x", "extra"},
	}
	for _, args := range cases {
		if code, _, errs := runCmd(t, args...); code != 2 || errs == "" {
			t.Errorf("%v: exit %d, stderr %q; want 2 with a message", args, code, errs)
		}
	}
	if code, _, errs := runCmd(t, "bench", "--model", filepath.Join(t.TempDir(), "missing.gguf")); code != 1 || !strings.Contains(errs, "missing.gguf") {
		t.Errorf("missing model: exit %d, stderr %q", code, errs)
	}
}
