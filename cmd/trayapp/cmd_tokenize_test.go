package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/npuchat/npuchat/engine/testmodel"
)

// MiniCPM5-shaped tokenizer fixture: "hi"=4, " hi"=6, <|im_start|>=0,
// <|im_end|>=130073.
const tinyModel = "../../engine/tokenizer/testdata/minicpm5"

func runTok(t *testing.T, stdin string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errb bytes.Buffer
	env := &Env{Stdin: strings.NewReader(stdin), Stdout: &out, Stderr: &errb, Getenv: func(string) string { return "" }}
	code = runTokenize(context.Background(), env, args)
	return out.String(), errb.String(), code
}

func TestTokenizeCommand(t *testing.T) {
	gguf := filepath.Join(t.TempDir(), "m.gguf")
	if err := os.WriteFile(gguf, []byte("GGUF\x03\x00\x00\x00"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		stdin   string
		args    []string
		want    string
		code    int
		errPart string
	}{
		{name: "plain", stdin: "hi hi", args: []string{"--model", tinyModel}, want: "4 6\n"},
		{name: "file path", stdin: "hi", args: []string{"--model", tinyModel + "/tokenizer.json"}, want: "4\n"},
		{name: "json", stdin: "hi hi", args: []string{"--model", tinyModel, "--json"}, want: `{"ids":[4,6]}` + "\n"},
		{name: "empty json", stdin: "", args: []string{"--model", tinyModel, "--json"}, want: `{"ids":[]}` + "\n"},
		// As plain text, <|im_start|> is BPE-encoded; this tiny vocabulary has
		// only "i" (3) of its characters.
		{name: "special off by default", stdin: "<|im_start|>hi", args: []string{"--model", tinyModel, "--json"}, want: `{"ids":[3,4]}` + "\n"},
		{name: "special on", stdin: "<|im_start|>hi<|im_end|>", args: []string{"--model", tinyModel, "--special", "--json"}, want: `{"ids":[0,4,130073]}` + "\n"},
		{name: "jsonl", stdin: "\"hi\"\n\" hi\"\n\"\"\n", args: []string{"--model", tinyModel, "--jsonl"}, want: "{\"ids\":[4]}\n{\"ids\":[6]}\n{\"ids\":[]}\n"},
		{name: "jsonl bad line", stdin: "\"hi\"\nhi\n", args: []string{"--model", tinyModel, "--jsonl"}, want: "{\"ids\":[4]}\n", code: 1, errPart: "line 2: not a JSON string"},
		{name: "decode spaces", stdin: "4 6\n", args: []string{"--model", tinyModel, "--decode"}, want: "hi hi"},
		{name: "decode commas", stdin: "0,4, 6,130073", args: []string{"--model", tinyModel, "--decode"}, want: "<|im_start|>hi hi<|im_end|>"},
		{name: "decode json", stdin: "[4, 6]", args: []string{"--model", tinyModel, "--decode"}, want: "hi hi"},
		{name: "decode bad id", stdin: "4 x", args: []string{"--model", tinyModel, "--decode"}, code: 1, errPart: `"x" is not a token id`},
		{name: "decode unknown id", stdin: "99", args: []string{"--model", tinyModel, "--decode"}, code: 1, errPart: "not in the vocabulary"},
		{name: "no model", stdin: "x", args: nil, code: 2, errPart: "--model PATH is required"},
		{name: "missing model", stdin: "x", args: []string{"--model", "/nonexistent/x"}, code: 1, errPart: "no such file"},
		{name: "truncated gguf", stdin: "x", args: []string{"--model", gguf}, code: 1, errPart: "m.gguf"},
		{name: "two modes", stdin: "x", args: []string{"--model", tinyModel, "--json", "--decode"}, code: 2, errPart: "only one of"},
		{name: "argument", stdin: "x", args: []string{"--model", tinyModel, "text"}, code: 2, errPart: "read from standard input"},
		{name: "help", args: []string{"-h"}, code: 0, errPart: "Usage: npuchat tokenize"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, errOut, code := runTok(t, tc.stdin, tc.args...)
			if code != tc.code || out != tc.want || (tc.errPart != "" && !strings.Contains(errOut, tc.errPart)) {
				t.Errorf("exit %d, stdout %q, stderr %q; want exit %d, stdout %q, stderr containing %q", code, out, errOut, tc.code, tc.want, tc.errPart)
			}
		})
	}
}

// TestTokenizeGGUF: the tokenizer embedded in a GGUF file gives the same
// ids as the same vocabulary's tokenizer.json.
func TestTokenizeGGUF(t *testing.T) {
	w, err := testmodel.Random(1, testmodel.Qwen3Small())
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	ggufPath, hfDir := filepath.Join(dir, "m.gguf"), filepath.Join(dir, "hf")
	if err := testmodel.WriteGGUF(ggufPath, w, testmodel.Q8_0); err != nil {
		t.Fatal(err)
	}
	if err := testmodel.WriteHF(hfDir, w, testmodel.HFOptions{}); err != nil {
		t.Fatal(err)
	}
	text := "the quick brown fox, <|im_end|> and 123 more words"
	fromGGUF, errOut, code := runTok(t, text, "--model", ggufPath, "--special", "--json")
	if code != 0 {
		t.Fatalf("gguf: exit %d: %s", code, errOut)
	}
	fromJSON, _, _ := runTok(t, text, "--model", hfDir, "--special", "--json")
	if fromGGUF != fromJSON || len(fromGGUF) < 20 {
		t.Fatalf("gguf %s, tokenizer.json %s", fromGGUF, fromJSON)
	}
}
