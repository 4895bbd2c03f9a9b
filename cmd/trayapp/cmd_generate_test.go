package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/npuchat/npuchat/engine/simd"
	"github.com/npuchat/npuchat/engine/testmodel"
)

func runCmd(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	// the command sees no environment but the test CPU ceiling
	// (scripts/test-ceilings runs these tests as smaller CPUs)
	getenv := func(k string) string {
		if k == simd.EnvCeiling {
			return os.Getenv(k)
		}
		return ""
	}
	env := &Env{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb, Getenv: getenv}
	code = run(context.Background(), env, args)
	return code, out.String(), errb.String()
}

func TestGenerate(t *testing.T) {
	w, err := testmodel.Random(11, testmodel.MiniCPM5Small())
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	model := filepath.Join(dir, "m.gguf")
	if err := testmodel.WriteGGUF(model, w, testmodel.Q8_0); err != nil {
		t.Fatal(err)
	}
	dump := filepath.Join(dir, "logits.bin")
	code, out, errs := runCmd(t, "generate", "--model", model, "--prompt-tokens", "5,6,7", "--max-tokens", "4",
		"--json", "--dump-logits", dump, "--threads", "2")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var res struct {
		Tokens      []int   `json:"tokens"`
		Text        *string `json:"text"`
		PrefillTokS float64 `json:"prefill_tok_s"`
		DecodeTokS  float64 `json:"decode_tok_s"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("output %q: %v", out, err)
	}
	if res.Text == nil || res.PrefillTokS <= 0 {
		t.Errorf("result %+v", res)
	}
	steps := len(res.Tokens)
	if steps < 4 { // stopped at EOS: one more row chose it
		steps++
	}
	st, err := os.Stat(dump)
	if err != nil || st.Size() != int64(steps*512*4) {
		t.Errorf("logits dump: %v, size %d, want %d rows of 512 float32", err, st.Size(), steps)
	}
	// Greedy is deterministic.
	_, out2, _ := runCmd(t, "generate", "--model", model, "--prompt-tokens", "5,6,7", "--max-tokens", "4", "--json")
	var res2 struct{ Tokens []int }
	json.Unmarshal([]byte(out2), &res2)
	if len(res.Tokens) == 0 || len(res2.Tokens) != len(res.Tokens) || res2.Tokens[0] != res.Tokens[0] {
		t.Errorf("greedy runs differ: %v vs %v", res.Tokens, res2.Tokens)
	}
}

func TestGenerateErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.gguf")
	os.WriteFile(bad, []byte("not a model"), 0o644)
	cases := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"generate", "--prompt-tokens", "1"}, 2, "--model is required"},
		{[]string{"generate", "--model", bad}, 2, "exactly one"},
		{[]string{"generate", "--model", bad, "--prompt-tokens", "1,x"}, 2, "not a token id"},
		{[]string{"generate", "--model", bad, "--prompt-tokens", "1"}, 1, "wrong magic"},
		{[]string{"generate", "--model", filepath.Join(dir, "missing"), "--prompt-tokens", "1"}, 1, "no such file"},
	}
	for _, c := range cases {
		code, _, errs := runCmd(t, c.args...)
		if code != c.code || !strings.Contains(errs, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", c.args, code, errs, c.code, c.want)
		}
	}
}

// TestGeneratePrompt: --prompt tokenizes with the model's own tokenizer,
// from GGUF metadata or from the folder's tokenizer.json, and the same
// weights in both formats give the same answer.
func TestGeneratePrompt(t *testing.T) {
	dir := t.TempDir()
	w, _ := testmodel.Random(1, testmodel.Qwen3Small())
	gguf, hf := filepath.Join(dir, "q.gguf"), filepath.Join(dir, "hf")
	if err := testmodel.WriteGGUF(gguf, w, testmodel.F32); err != nil {
		t.Fatal(err)
	}
	if err := testmodel.WriteHF(hf, w, testmodel.HFOptions{DType: testmodel.F32}); err != nil {
		t.Fatal(err)
	}
	var outs [2]struct {
		Tokens []int
		Text   string
	}
	for i, model := range []string{gguf, hf} {
		code, out, errs := runCmd(t, "generate", "--model", model, "--quantize", "none", "--prompt", "hello world, the cat", "--max-tokens", "6", "--json")
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", model, code, errs)
		}
		if err := json.Unmarshal([]byte(out), &outs[i]); err != nil || len(outs[i].Tokens) == 0 || outs[i].Text == "" {
			t.Fatalf("%s: %s", model, out)
		}
	}
	if fmt.Sprint(outs[0]) != fmt.Sprint(outs[1]) {
		t.Fatalf("gguf %+v, hf %+v", outs[0], outs[1])
	}
}

// TestGenerateAnswersAsTheServer: `npuchat generate --prompt` and
// /v1/completions on `npuchat serve` run one generation path, so a
// greedy answer is the same text, token for token.
func TestGenerateAnswersAsTheServer(t *testing.T) {
	w, _ := testmodel.Random(4, testmodel.Qwen3Small())
	dir := filepath.Join(t.TempDir(), "tiny")
	if err := testmodel.WriteHF(dir, w, testmodel.HFOptions{}); err != nil {
		t.Fatal(err)
	}
	const prompt = "the cat sat on"
	code, out, errs := runCmd(t, "generate", "--model", dir, "--prompt", prompt, "--max-tokens", "8", "--json")
	if code != 0 {
		t.Fatalf("generate: %d %s", code, errs)
	}
	var gen struct {
		Tokens     []int
		Text       string
		StopReason string `json:"stop_reason"`
	}
	if err := json.Unmarshal([]byte(out), &gen); err != nil || len(gen.Tokens) == 0 {
		t.Fatalf("generate: %s", out)
	}
	url := serveInProcess(t, "--model", dir, "--name", "tiny", "--engine", "cpu")
	resp, err := http.Post(url+"/v1/completions", "application/json",
		strings.NewReader(fmt.Sprintf(`{"model":"tiny","prompt":%q,"max_tokens":8,"temperature":0}`, prompt)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var api struct {
		Choices []struct {
			Text         string
			FinishReason string `json:"finish_reason"`
		}
		Usage struct {
			CompletionTokens int `json:"completion_tokens"`
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&api); err != nil || len(api.Choices) != 1 {
		t.Fatalf("%d %v %+v", resp.StatusCode, err, api)
	}
	if api.Choices[0].Text != gen.Text || api.Usage.CompletionTokens != len(gen.Tokens) {
		t.Fatalf("generate said %q (%d tokens, %s), the server %q (%d tokens, %s)",
			gen.Text, len(gen.Tokens), gen.StopReason, api.Choices[0].Text, api.Usage.CompletionTokens, api.Choices[0].FinishReason)
	}
	if want := map[string]string{"eos": "stop", "length": "length"}[gen.StopReason]; want != api.Choices[0].FinishReason {
		t.Fatalf("stop reason %s, finish_reason %s", gen.StopReason, api.Choices[0].FinishReason)
	}
}

// TestGenerateSpeculative: generate --speculative auto gives the tokens
// and, byte for byte, the logits (--dump-logits) of --speculative off,
// and reports the guesses; a bad mode is a usage error.
func TestGenerateSpeculative(t *testing.T) {
	w, err := testmodel.Random(11, testmodel.MiniCPM5Small())
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	model := filepath.Join(dir, "m.gguf")
	if err := testmodel.WriteGGUF(model, w, testmodel.Q8_0); err != nil {
		t.Fatal(err)
	}
	type result struct {
		Tokens        []int `json:"tokens"`
		DraftN        int   `json:"draft_n"`
		DraftAccepted int   `json:"draft_n_accepted"`
	}
	gen := func(mode string) (result, []byte) {
		t.Helper()
		dump := filepath.Join(dir, mode+".bin")
		code, out, errs := runCmd(t, "generate", "--model", model, "--prompt-tokens", "5,6,7,8,9,5,6,7,8,9,5,6", "--max-tokens", "64",
			"--json", "--dump-logits", dump, "--threads", "1", "--speculative", mode)
		if code != 0 {
			t.Fatalf("--speculative %s: exit %d: %s", mode, code, errs)
		}
		var r result
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatalf("output %q: %v", out, err)
		}
		b, err := os.ReadFile(dump)
		if err != nil {
			t.Fatal(err)
		}
		return r, b
	}
	off, offLogits := gen("off")
	auto, autoLogits := gen("auto")
	if fmt.Sprint(auto.Tokens) != fmt.Sprint(off.Tokens) || !bytes.Equal(autoLogits, offLogits) {
		t.Errorf("auto: %v, off: %v (logits equal: %v)", auto.Tokens, off.Tokens, bytes.Equal(autoLogits, offLogits))
	}
	if off.DraftN != 0 || auto.DraftN == 0 || auto.DraftAccepted > auto.DraftN {
		t.Errorf("guesses: off %+v, auto %+v", off, auto)
	}
	if code, _, errs := runCmd(t, "generate", "--model", model, "--prompt-tokens", "5", "--speculative", "yes"); code != 2 || !strings.Contains(errs, "auto or off") {
		t.Errorf("--speculative yes: exit %d, %q", code, errs)
	}
}
