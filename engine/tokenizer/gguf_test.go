package tokenizer

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// ggufMetadataFromJSON builds, from a tokenizer.json, the tokenizer
// metadata a GGUF converter writes: tokens by id, int32 token types
// (control for special added tokens, user-defined for the others) and
// "a b" merges, typed as a GGUF reader returns them.
func ggufMetadataFromJSON(t *testing.T, path, pre string) map[string]any {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var j jsonTokenizer
	if err := json.Unmarshal(data, &j); err != nil {
		t.Fatal(err)
	}
	var vocab map[string]int
	if err := json.Unmarshal(j.Model.Vocab, &vocab); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, id := range vocab {
		n = max(n, id+1)
	}
	for _, a := range j.AddedTokens {
		n = max(n, a.ID+1)
	}
	tokens := make([]string, n)
	types := make([]int32, n)
	for tok, id := range vocab {
		tokens[id], types[id] = tok, ggufNormal
	}
	for _, a := range j.AddedTokens {
		tokens[a.ID], types[a.ID] = a.Content, ggufUserDefined
		if a.Special {
			types[a.ID] = ggufControl
		}
	}
	merges := make([]string, len(j.Model.Merges))
	for i, m := range j.Model.Merges {
		merges[i] = m[0] + " " + m[1]
	}
	return map[string]any{
		"tokenizer.ggml.model":      "gpt2",
		"tokenizer.ggml.pre":        pre,
		"tokenizer.ggml.tokens":     tokens,
		"tokenizer.ggml.token_type": types,
		"tokenizer.ggml.merges":     merges,
	}
}

// qwen3GGUFMetadata is the Qwen3 tokenizer as GGUF metadata, with the
// special-token keys and some unrelated ones.
func qwen3GGUFMetadata(t *testing.T) map[string]any {
	t.Helper()
	qwen3(t) // fails with the setup message when the file is missing
	md := ggufMetadataFromJSON(t, filepath.Join(qwen3Models, "tokenizer.json"), "qwen2")
	for k, v := range map[string]any{
		"tokenizer.ggml.bos_token_id":      uint32(151643),
		"tokenizer.ggml.eos_token_id":      uint32(151645),
		"tokenizer.ggml.padding_token_id":  int64(151643),
		"tokenizer.ggml.add_bos_token":     false,
		"tokenizer.ggml.eot_token_id":      uint64(151645), // same as EOS: listed once
		"tokenizer.ggml.unknown_token_id":  int8(-1),
		"tokenizer.chat_template":          "{{ messages }}",
		"general.architecture":             "qwen3",
		"qwen3.context_length":             uint32(40960),
		"tokenizer.ggml.token_type_count":  uint32(1),
		"tokenizer.ggml.unused_other_keys": []any{"ignored"},
	} {
		md[k] = v
	}
	return md
}

// The GGUF path, on the same vocabulary, agrees with the tokenizer.json
// path on every golden case, both ways.
func TestGGUFMatchesJSON(t *testing.T) {
	md := qwen3GGUFMetadata(t)
	gg, err := FromGGUF(md)
	if err != nil {
		t.Fatal(err)
	}
	g := loadGolden(t)
	checkEncode(t, "gguf Encode", g.Encode, gg.Encode)
	checkEncode(t, "gguf EncodeOrdinary", g.Ordin, gg.EncodeOrdinary)
	for _, c := range g.Decode {
		got, err := gg.Decode(c.IDs)
		if err != nil || got != c.Text {
			t.Errorf("gguf Decode(%v) = %q, %v; want %q", c.IDs, got, err, c.Text)
		}
	}
	c, err := ConfigFromGGUF(md)
	if err != nil {
		t.Fatal(err)
	}
	if c.BOS != 151643 || !slices.Equal(c.EOS, []int{151645}) || c.Pad != 151643 || c.Unk != -1 || c.AddBOS || c.ChatTemplate != "{{ messages }}" {
		t.Errorf("ConfigFromGGUF = %+v", c)
	}
}

// []any lists (as some readers return) work like typed ones.
func TestGGUFUntypedLists(t *testing.T) {
	md := tinyGGUF()
	toks := md["tokenizer.ggml.tokens"].([]string)
	anyToks := make([]any, len(toks))
	for i, s := range toks {
		anyToks[i] = s
	}
	types := md["tokenizer.ggml.token_type"].([]int32)
	anyTypes := make([]any, len(types))
	for i, v := range types {
		anyTypes[i] = uint8(v)
	}
	md["tokenizer.ggml.tokens"], md["tokenizer.ggml.token_type"] = anyToks, anyTypes
	tok, err := FromGGUF(md)
	if err != nil {
		t.Fatal(err)
	}
	if got := tok.Encode("hello<|end|>"); !slices.Equal(got, []int{260, 261}) {
		t.Errorf("Encode = %v, want [260 261] (hello, <|end|>)", got)
	}
}

// tinyGGUF is a gpt2-style vocabulary: the 256 byte characters, merges
// making "hello", and one control token.
func tinyGGUF() map[string]any {
	table := byteToRune()
	var toks []string
	for b := 0; b < 256; b++ {
		toks = append(toks, string(table[b]))
	}
	toks = append(toks, "he", "ll", "hell", "llo", "hello", "<|end|>")
	types := make([]int32, len(toks))
	for i := range types {
		types[i] = ggufNormal
	}
	types[len(types)-1] = ggufControl
	return map[string]any{
		"tokenizer.ggml.model":      "gpt2",
		"tokenizer.ggml.pre":        "qwen2",
		"tokenizer.ggml.tokens":     toks,
		"tokenizer.ggml.token_type": types,
		"tokenizer.ggml.merges":     []string{"h e", "l l", "he ll", "ll o", "hell o"},
	}
}

func TestGGUFErrors(t *testing.T) {
	tests := []struct {
		name string
		edit func(map[string]any)
		want string
	}{
		{"no model", func(m map[string]any) { delete(m, "tokenizer.ggml.model") }, "no tokenizer.ggml.model"},
		{"llama model", func(m map[string]any) { m["tokenizer.ggml.model"] = "llama" }, `model "llama" is not supported`},
		{"tokens not strings", func(m map[string]any) { m["tokenizer.ggml.tokens"] = []int{1} }, "want a list of strings"},
		{"types length", func(m map[string]any) { m["tokenizer.ggml.token_type"] = []int32{1} }, "token types for"},
		{"type not int", func(m map[string]any) { m["tokenizer.ggml.token_type"] = []any{"x"} }, "is not an integer"},
		{"bad merge", func(m map[string]any) { m["tokenizer.ggml.merges"] = []string{"hello"} }, "no space"},
		{"merge unknown", func(m map[string]any) { m["tokenizer.ggml.merges"] = []string{"q z"} }, "not in the vocabulary"},
		{"unknown pre", func(m map[string]any) { m["tokenizer.ggml.pre"] = "deepseek-llm" }, `pre-tokenizer "deepseek-llm" is not supported`},
		{"pre not string", func(m map[string]any) { m["tokenizer.ggml.pre"] = 3 }, "want a string"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			md := tinyGGUF()
			tc.edit(md)
			_, err := FromGGUF(md)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want it to contain %q", err, tc.want)
			}
		})
	}
	if _, err := ConfigFromGGUF(map[string]any{"tokenizer.ggml.bos_token_id": "1"}); err == nil {
		t.Error("ConfigFromGGUF accepted a string id")
	}
}
