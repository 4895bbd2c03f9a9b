package main

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/npuchat/npuchat/engine/simd"
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
	if code != 0 || !strings.Contains(out, "decode   2 tokens") || !strings.Contains(out, "KV cache f32") {
		t.Errorf("text output (exit %d): %q", code, out)
	}
	// --kv-cache-type: this model's 16-dimension heads keep f16 for
	// q8_0, and the output says so; a bad type is an error
	code, out, _ = runCmd(t, "bench", "--model", model, "--prompt-tokens", "3", "--gen-tokens", "2", "--kv-cache-type", "q8_0", "--json")
	var res benchResult
	if err := json.Unmarshal([]byte(out), &res); code != 0 || err != nil || res.KVType != "f16" || !strings.Contains(res.KVChoice, "q8_0 asked: head dimension 16") {
		t.Errorf("--kv-cache-type q8_0 (exit %d): %q", code, out)
	}
	if code, _, errs := runCmd(t, "bench", "--model", model, "--kv-cache-type", "q4"); code == 0 || !strings.Contains(errs, "f32, f16, q8_0") {
		t.Errorf("--kv-cache-type q4: exit %d, %q", code, errs)
	}
}

// TestBenchSaysTheLevel: bench reports the level that ran and, when it
// is not the one asked for, what replaced it and why, in the JSON and in
// the text; $NPUCHAT_CPU_CEILING comes from the command's environment.
func TestBenchSaysTheLevel(t *testing.T) {
	w, err := testmodel.Random(4, testmodel.MiniCPM5Small())
	if err != nil {
		t.Fatal(err)
	}
	model := filepath.Join(t.TempDir(), "m.gguf")
	if err := testmodel.WriteGGUF(model, w, testmodel.Q4_0); err != nil {
		t.Fatal(err)
	}
	bench := func(getenv map[string]string, args ...string) (string, string) {
		t.Helper()
		var out, errb bytes.Buffer
		env := &Env{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb, Getenv: func(k string) string { return getenv[k] }}
		args = append([]string{"bench", "--model", model, "--prompt-tokens", "3", "--gen-tokens", "2", "--threads", "1", "--cache-dir", "none"}, args...)
		if code := run(context.Background(), env, args); code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, errb.String())
		}
		return out.String(), errb.String()
	}
	out, _ := bench(map[string]string{"NPUCHAT_CPU_CEILING": "none"}, "--simd", "avx2", "--json")
	var res benchResult
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("output %q: %v", out, err)
	}
	if res.SIMD != "none" || !strings.HasPrefix(res.SIMDChoice, "asked avx2, CPU ") || !strings.HasSuffix(res.SIMDChoice, ": running none") {
		t.Errorf("avx2 under the ceiling none: simd %q, %q", res.SIMD, res.SIMDChoice)
	}
	if out, _ = bench(nil, "--simd", "none"); !strings.Contains(out, "SIMD none,") || !strings.Contains(out, "\nsimd     none\n") {
		t.Errorf("text output for none: %q", out)
	}
	if out, _ = bench(map[string]string{"NPUCHAT_SIMD": "avx2", "NPUCHAT_CPU_CEILING": "none"}); !strings.Contains(out, "simd     asked avx2, CPU ") {
		t.Errorf("text output for $NPUCHAT_SIMD avx2 under the ceiling none: %q", out)
	}
	// a level that repacks the Q4_0 weights says whose packer did it
	if !simd.Host().Has(simd.AVX2) {
		t.Skipf("CPU lacks avx2: it %s (the packer's line not checked)", simd.Host().Lacks(simd.AVX2))
	}
	if out, _ = bench(nil, "--simd", "avx2"); !strings.Contains(out, "\nsimd     avx2; weights packed by avx2\n") {
		t.Errorf("text output for avx2: %q", out)
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

// TestBenchReopen: --reopen measures a chat reopened from nothing, from
// memory and from its KV file, and the reopened ones compute only the
// new message.
func TestBenchReopen(t *testing.T) {
	w, err := testmodel.Random(3, testmodel.MiniCPM5Small())
	if err != nil {
		t.Fatal(err)
	}
	model := filepath.Join(t.TempDir(), "m.gguf")
	if err := testmodel.WriteGGUF(model, w, testmodel.Q4_0); err != nil {
		t.Fatal(err)
	}
	code, out, errs := runCmd(t, "bench", "--model", model, "--reopen", "100", "--new-tokens", "7", "--threads", "2", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var res reopenResult
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("output %q: %v", out, err)
	}
	if res.ChatTokens != 100 || res.CachedTokens != 100 || res.FileBytes == 0 || !(res.ColdSeconds > 0 && res.MemSeconds > 0 && res.DiskSeconds >= res.DiskRead && res.WarmSeconds > 0) {
		t.Errorf("result %+v", res)
	}
	// on Linux the faults are counted
	if runtime.GOOS == "linux" && (res.DiskReadFaults < 0 || res.DiskFaults < res.DiskReadFaults) {
		t.Errorf("on Linux: %d faults reading, %d in all", res.DiskReadFaults, res.DiskFaults)
	}
}

// TestBenchChats: --chats visits four chats in turn twice; the first
// round computes each whole, the second computes only each chat's new
// message (its answer and everything before come from the KV cache).
func TestBenchChats(t *testing.T) {
	w, err := testmodel.Random(3, testmodel.MiniCPM5Small())
	if err != nil {
		t.Fatal(err)
	}
	model := filepath.Join(t.TempDir(), "m.gguf")
	if err := testmodel.WriteGGUF(model, w, testmodel.Q4_0); err != nil {
		t.Fatal(err)
	}
	code, out, errs := runCmd(t, "bench", "--model", model, "--chats", "4", "--chat-tokens", "60", "--answer-tokens", "5",
		"--new-tokens", "7", "--threads", "2", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var res chatsResult
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("output %q: %v", out, err)
	}
	if len(res.Visits) != 8 {
		t.Fatalf("%d visits, want 8: %+v", len(res.Visits), res)
	}
	for i, v := range res.Visits {
		want := chatsVisit{Round: 1 + i/4, Chat: i % 4, PromptTokens: 60, PrefilledTokens: 60}
		if v.Round == 2 {
			want.PromptTokens, want.CachedTokens, want.PrefilledTokens = 72, 65, 7
		}
		want.FirstTokenSeconds = v.FirstTokenSeconds
		if v != want || !(v.FirstTokenSeconds > 0) {
			t.Errorf("visit %d: %+v, want %+v", i, v, want)
		}
	}
	code, out, _ = runCmd(t, "bench", "--model", model, "--chats", "2", "--chat-tokens", "20", "--answer-tokens", "2", "--new-tokens", "3")
	if code != 0 || !strings.Contains(out, "prefilled") || strings.Count(out, "\n") != 3+1+4 {
		t.Errorf("table: exit %d\n%s", code, out)
	}
}

// TestBenchParallel: --parallel N decodes N streams together (a step
// computes several), reports each stream and the aggregate, and a
// newcomer's first token; bad counts are usage errors.
func TestBenchParallel(t *testing.T) {
	w, err := testmodel.Random(3, testmodel.MiniCPM5Small())
	if err != nil {
		t.Fatal(err)
	}
	model := filepath.Join(t.TempDir(), "m.gguf")
	if err := testmodel.WriteGGUF(model, w, testmodel.Q4_0); err != nil {
		t.Fatal(err)
	}
	code, out, errs := runCmd(t, "bench", "--model", model, "--parallel", "3", "--prompt-tokens", "20", "--gen-tokens", "24", "--threads", "2", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var r parallelResult
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if r.Parallel != 3 || len(r.Streams) != 3 || r.MostSequences < 2 || r.AggregateTokS <= 0 || r.NewcomerSeconds <= 0 || r.AloneSeconds <= 0 {
		t.Errorf("result %+v", r)
	}
	for i, s := range r.Streams {
		if s.DecodeTokS <= 0 || s.FirstTokenSeconds <= 0 {
			t.Errorf("stream %d: %+v", i, s)
		}
	}
	if r.Speculative != "off" || r.DraftN != 0 {
		t.Errorf("guessed without --speculative: %+v", r)
	}
	// each stream guesses on its own: an answer that copies its prompt
	// is guessed nearly whole
	code, out, errs = runCmd(t, "bench", "--model", model, "--parallel", "2", "--prompt-tokens", "20", "--gen-tokens", "24", "--threads", "2",
		"--speculative", "auto", "--answer", "copy", "--json")
	if err := json.Unmarshal([]byte(out), &r); code != 0 || err != nil {
		t.Fatalf("--speculative auto: exit %d, %v: %s %s", code, err, out, errs)
	}
	if r.Speculative != "auto" || r.Answer != "copy" || r.DraftAccepted < 2*16 || r.DraftAccepted > r.DraftN {
		t.Errorf("--speculative auto --answer copy: %+v", r)
	}
	code, out, _ = runCmd(t, "bench", "--model", model, "--parallel", "2", "--prompt-tokens", "5", "--gen-tokens", "3")
	if code != 0 || !strings.Contains(out, "aggregate decode") || !strings.Contains(out, "newcomer first token") || !strings.Contains(out, "guesses off: 0 of 0 kept") {
		t.Errorf("table (exit %d):\n%s", code, out)
	}
	if code, _, _ := runCmd(t, "bench", "--model", model, "--parallel", "-1"); code != 2 {
		t.Errorf("--parallel -1: exit %d, want 2", code)
	}
}

// TestBenchSpeculative: bench --speculative auto reports the tokens
// guessed and kept: nearly all of an answer that copies the prompt
// (--answer copy), none with off; the text says them beside tok/s; a
// bad setting is a usage error.
func TestBenchSpeculative(t *testing.T) {
	w, err := testmodel.Random(3, testmodel.MiniCPM5Small())
	if err != nil {
		t.Fatal(err)
	}
	model := filepath.Join(t.TempDir(), "m.gguf")
	if err := testmodel.WriteGGUF(model, w, testmodel.Q4_0); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		spec, answer string
		kept         func(r benchResult) bool
	}{
		// of 40 tokens, the first two are not guessed (a guess needs two
		// tokens seen before) and each check computes one token besides
		// its guesses (4 checks: 4, 8, 16 guesses, then the room left)
		{"auto", "copy", func(r benchResult) bool { return r.DraftAccepted >= 30 && r.AcceptRate > 0.8 }},
		{"off", "copy", func(r benchResult) bool { return r.DraftN == 0 && r.DraftAccepted == 0 }},
		{"auto", "greedy", func(r benchResult) bool { return r.DraftAccepted <= r.DraftN }},
	} {
		code, out, errs := runCmd(t, "bench", "--model", model, "--prompt-tokens", "48", "--gen-tokens", "40", "--threads", "1",
			"--speculative", tc.spec, "--answer", tc.answer, "--json")
		if code != 0 {
			t.Fatalf("%s %s: exit %d: %s", tc.spec, tc.answer, code, errs)
		}
		var res benchResult
		if err := json.Unmarshal([]byte(out), &res); err != nil {
			t.Fatalf("output %q: %v", out, err)
		}
		if res.Speculative != tc.spec || res.Answer != tc.answer || res.GenTokens != 40 || !(res.DecodeTokS > 0) || !tc.kept(res) {
			t.Errorf("--speculative %s --answer %s: %+v", tc.spec, tc.answer, res)
		}
	}
	code, out, _ := runCmd(t, "bench", "--model", model, "--prompt-tokens", "8", "--gen-tokens", "8", "--speculative", "auto", "--answer", "copy")
	if code != 0 || !strings.Contains(out, "decode   8 tokens (copy), ") || !strings.Contains(out, "\nguesses  auto: ") {
		t.Errorf("text output (exit %d): %q", code, out)
	}
	for _, bad := range [][]string{{"--speculative", "on"}, {"--answer", "loop"}} {
		if code, _, errs := runCmd(t, append([]string{"bench", "--model", model}, bad...)...); code != 2 || !strings.Contains(errs, "auto or off") {
			t.Errorf("%v: exit %d, %q", bad, code, errs)
		}
	}
}
