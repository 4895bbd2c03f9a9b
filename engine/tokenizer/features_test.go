package tokenizer

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// tinyJSON writes a small byte-level tokenizer.json: the 256 byte
// characters (ids 0..255), merges for "hello" and " hello" (ids 256..),
// and the given extra parts.
func tinyJSON(t testing.TB, pairMerges bool, extra map[string]any) []byte {
	t.Helper()
	table := byteToRune()
	vocab := map[string]int{}
	for b := 0; b < 256; b++ {
		vocab[string(table[b])] = b
	}
	for i, s := range []string{"he", "ll", "hell", "llo", "hello", "Ġhello"} {
		vocab[s] = 256 + i
	}
	merges := [][2]string{{"h", "e"}, {"l", "l"}, {"he", "ll"}, {"ll", "o"}, {"hell", "o"}, {"Ġ", "hello"}}
	var ms []any
	for _, m := range merges {
		if pairMerges {
			ms = append(ms, []string{m[0], m[1]})
		} else {
			ms = append(ms, m[0]+" "+m[1])
		}
	}
	doc := map[string]any{
		"version":       "1.0",
		"added_tokens":  []any{},
		"normalizer":    nil,
		"pre_tokenizer": map[string]any{"type": "ByteLevel", "add_prefix_space": false, "use_regex": true},
		"decoder":       map[string]any{"type": "ByteLevel"},
		"model":         map[string]any{"type": "BPE", "vocab": vocab, "merges": ms},
	}
	for k, v := range extra {
		doc[k] = v
	}
	data, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func mustJSON(t *testing.T, data []byte) *Tokenizer {
	t.Helper()
	tok, err := FromJSON(data)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func TestMergeForms(t *testing.T) {
	a := mustJSON(t, tinyJSON(t, false, nil))
	b := mustJSON(t, tinyJSON(t, true, nil))
	for _, s := range []string{"hello", "hello hello", "hellohello", "he llo"} {
		if x, y := a.Encode(s), b.Encode(s); !slices.Equal(x, y) {
			t.Errorf("%q: \"a b\" merges give %v, [a, b] merges %v", s, x, y)
		}
	}
	if got := a.Encode("hello hello"); !slices.Equal(got, []int{260, 261}) {
		t.Errorf("Encode = %v, want [260 261]", got)
	}
}

func TestByteLevelOptions(t *testing.T) {
	tests := []struct {
		name string
		pre  map[string]any
		in   string
		want []int
	}{
		// With use_regex, " hello" is one word and merges to Ġhello.
		{"regex", map[string]any{"type": "ByteLevel", "use_regex": true}, "hello hello", []int{260, 261}},
		// Without, the whole text is one word: merges still apply across it.
		{"no regex", map[string]any{"type": "ByteLevel", "use_regex": false}, "hi hello", []int{'h', 'i', 261}},
		// add_prefix_space puts a space before a text that has none.
		{"prefix space", map[string]any{"type": "ByteLevel", "add_prefix_space": true, "use_regex": true}, "hello", []int{261}},
		{"prefix space kept", map[string]any{"type": "ByteLevel", "add_prefix_space": true, "use_regex": true}, " hello", []int{261}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tok := mustJSON(t, tinyJSON(t, false, map[string]any{"pre_tokenizer": tc.pre}))
			if got := tok.Encode(tc.in); !slices.Equal(got, tc.want) {
				t.Errorf("Encode(%q) = %v, want %v", tc.in, got, tc.want)
			}
		})
	}
}

func TestNormalizers(t *testing.T) {
	tests := []struct {
		name string
		norm any
		in   string
		want string // decoded
	}{
		{"null", nil, "e\u0301", "e\u0301"},
		{"NFC", map[string]any{"type": "NFC"}, "e\u0301", "\u00e9"},
		{"NFKC", map[string]any{"type": "NFKC"}, "\ufb01", "fi"},
		{"sequence", map[string]any{"type": "Sequence", "normalizers": []any{
			map[string]any{"type": "NFD"}, map[string]any{"type": "Lowercase"},
			map[string]any{"type": "Replace", "pattern": map[string]any{"String": "x"}, "content": "y"},
		}}, "\u00c9X", "e\u0301y"},
		{"prepend", map[string]any{"type": "Prepend", "prepend": "> "}, "hi", "> hi"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tok := mustJSON(t, tinyJSON(t, false, map[string]any{"normalizer": tc.norm}))
			got, err := tok.Decode(tok.Encode(tc.in))
			if err != nil || got != tc.want {
				t.Errorf("round trip of %q = %q, %v; want %q", tc.in, got, err, tc.want)
			}
		})
	}
}

// Added-token options, with the results the Rust library gives.
func TestAddedTokenOptions(t *testing.T) {
	added := []any{
		map[string]any{"id": 300, "content": "<s>", "special": true},
		map[string]any{"id": 301, "content": "[L]", "lstrip": true},
		map[string]any{"id": 302, "content": "[R]", "rstrip": true},
		map[string]any{"id": 303, "content": "hel", "single_word": true},
		map[string]any{"id": 304, "content": "<s>x", "special": true},  // longer match wins
		map[string]any{"id": 305, "content": "ß", "normalized": true},  // matched after lowercasing
		map[string]any{"id": 306, "content": "QQ", "normalized": true}, // its content is normalized too: matches "qq" and "QQ"
	}
	tok := mustJSON(t, tinyJSON(t, false, map[string]any{
		"added_tokens": added,
		"normalizer":   map[string]any{"type": "Lowercase"},
	}))
	tests := []struct {
		in       string
		want     []int
		ordinary []int // EncodeOrdinary, when it differs
	}{
		{in: "a<s>b", want: []int{'a', 300, 'b'}, ordinary: []int{'a', '<', 's', '>', 'b'}},
		{in: "<s>x", want: []int{304}, ordinary: []int{'<', 's', '>', 'x'}},
		{in: "a  [L]b", want: []int{'a', 301, 'b'}},
		{in: "a[R]  b", want: []int{'a', 302, 'b'}},
		{in: "a [R] b", want: []int{'a', ' ', 302, 'b'}}, // rstrip only: the space before stays
		{in: "hel hello", want: []int{303, 261}},
		{in: "shel", want: []int{'s', 256, 'l'}}, // not a whole word: plain BPE
		{in: "SS ß", want: []int{'s', 's', ' ', 305}},
		{in: "aQQ qq", want: []int{'a', 306, ' ', 306}},
	}
	for _, tc := range tests {
		want := tc.want
		if got := tok.Encode(tc.in); !slices.Equal(got, want) {
			t.Errorf("Encode(%q) = %v, want %v", tc.in, got, want)
		}
		ord := tc.ordinary
		if ord == nil {
			ord = want
		}
		if got := tok.EncodeOrdinary(tc.in); !slices.Equal(got, ord) {
			t.Errorf("EncodeOrdinary(%q) = %v, want %v", tc.in, got, ord)
		}
	}
	if !tok.IsSpecial(300) || tok.IsSpecial(301) || tok.IsSpecial(65) {
		t.Error("IsSpecial is wrong")
	}
}

// A SentencePiece-style BPE (no byte level) with byte fallback: unknown
// characters become <0xAB> tokens and decode back.
func TestByteFallback(t *testing.T) {
	vocab := map[string]int{"<unk>": 0, "▁": 1, "h": 2, "i": 3, "▁h": 4, "▁hi": 5}
	for b := 0; b < 256; b++ {
		vocab[fmt.Sprintf("<0x%02X>", b)] = 6 + b
	}
	doc := map[string]any{
		"normalizer": map[string]any{"type": "Sequence", "normalizers": []any{
			map[string]any{"type": "Prepend", "prepend": "▁"},
			map[string]any{"type": "Replace", "pattern": map[string]any{"String": " "}, "content": "▁"},
		}},
		"pre_tokenizer": nil,
		"decoder": map[string]any{"type": "Sequence", "decoders": []any{
			map[string]any{"type": "Replace", "pattern": map[string]any{"String": "▁"}, "content": " "},
			map[string]any{"type": "ByteFallback"},
			map[string]any{"type": "Fuse"},
			map[string]any{"type": "Strip", "content": " ", "start": 1, "stop": 0},
		}},
		"model": map[string]any{"type": "BPE", "vocab": vocab, "merges": []string{"▁ h", "▁h i"},
			"byte_fallback": true, "unk_token": "<unk>", "fuse_unk": true},
	}
	data, _ := json.Marshal(doc)
	tok := mustJSON(t, data)
	ids := tok.Encode("hi é")
	// ▁hi, ▁, then é as the bytes C3 A9.
	want := []int{5, 1, 6 + 0xC3, 6 + 0xA9}
	if !slices.Equal(ids, want) {
		t.Errorf("Encode = %v, want %v", ids, want)
	}
	if got, _ := tok.Decode(ids); got != "hi é" {
		t.Errorf("Decode = %q, want %q", got, "hi é")
	}
	s := NewStream(tok, nil)
	if got, _ := feed(s, ids); got != "hi é" {
		t.Errorf("stream = %q", got)
	}
}

func TestLoadErrors(t *testing.T) {
	tests := []struct {
		name string
		data string
		want string
	}{
		{"not json", "{", "parse tokenizer.json"},
		{"unigram", `{"model":{"type":"Unigram","vocab":[]}}`, `model type "Unigram" is not supported`},
		{"no vocab", `{"model":{"type":"BPE"}}`, "no vocab"},
		{"bad merge", `{"model":{"type":"BPE","vocab":{"a":0},"merges":["ab"]}}`, "no space"},
		{"merge of three", `{"model":{"type":"BPE","vocab":{"a":0},"merges":[["a","b","c"]]}}`, "has 3 parts"},
		{"unknown merge part", `{"model":{"type":"BPE","vocab":{"a":0},"merges":["a b"]}}`, `"b" is not in the vocabulary`},
		{"normalizer", `{"normalizer":{"type":"BertNormalizer"},"model":{"type":"BPE","vocab":{}}}`, `normalizer "BertNormalizer" is not supported`},
		{"pre-tokenizer", `{"pre_tokenizer":{"type":"Metaspace"},"model":{"type":"BPE","vocab":{}}}`, `pre-tokenizer "Metaspace" is not supported`},
		{"bad regex", `{"pre_tokenizer":{"type":"Split","pattern":{"Regex":"("}},"model":{"type":"BPE","vocab":{}}}`, "compile pattern"},
		{"decoder", `{"decoder":{"type":"WordPiece"},"model":{"type":"BPE","vocab":{}}}`, `decoder "WordPiece" is not supported`},
		{"unk missing", `{"model":{"type":"BPE","vocab":{},"unk_token":"<unk>"}}`, "unk_token"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := FromJSON([]byte(tc.data))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want it to contain %q", err, tc.want)
			}
		})
	}
	if _, err := Load(filepath.Join(t.TempDir(), "none")); err == nil || !strings.Contains(err.Error(), "load tokenizer") {
		t.Errorf("Load of a missing file: %v", err)
	}
}

// Load accepts the folder as well as the file.
func TestLoadFolder(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "tokenizer.json"), tinyJSON(t, true, nil), 0o644); err != nil {
		t.Fatal(err)
	}
	tok, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := tok.Encode("hello"); !slices.Equal(got, []int{260}) {
		t.Errorf("Encode = %v", got)
	}
}

// ignore_merges: a word that is itself in the vocabulary is one token,
// even when no merges lead to it.
func TestIgnoreMerges(t *testing.T) {
	for _, ignore := range []bool{false, true} {
		var doc map[string]any
		if err := json.Unmarshal(tinyJSON(t, false, nil), &doc); err != nil {
			t.Fatal(err)
		}
		model := doc["model"].(map[string]any)
		model["vocab"].(map[string]any)["xyz"] = 400
		model["ignore_merges"] = ignore
		data, _ := json.Marshal(doc)
		tok := mustJSON(t, data)
		want := []int{'x', 'y', 'z'}
		if ignore {
			want = []int{400}
		}
		if got := tok.Encode("xyz"); !slices.Equal(got, want) {
			t.Errorf("ignore_merges %v: Encode = %v, want %v", ignore, got, want)
		}
	}
}

// FuzzFromJSON: any tokenizer.json either loads or gives an error, never
// a panic, and a loaded one encodes and decodes without panicking.
func FuzzFromJSON(f *testing.F) {
	f.Add(string(tinyJSON(f, false, nil)), "hello")
	f.Add(`{"model":{"type":"BPE","vocab":{"a":0,"b":1,"ab":2},"merges":["a b"]},"added_tokens":[{"id":3,"content":"<x>","lstrip":true,"rstrip":true}]}`, "ab <x> ba")
	f.Add(`{"model":{"type":"BPE","vocab":{"a":0},"merges":[]},"pre_tokenizer":{"type":"Split","pattern":{"String":"a"},"behavior":"MergedWithNext","invert":true}}`, "aaba")
	f.Add(`{"model":{"type":"BPE","vocab":{"a":99999999999}}}`, "a")
	f.Fuzz(func(t *testing.T, doc, text string) {
		tok, err := FromJSON([]byte(doc))
		if err != nil {
			return
		}
		ids := tok.Encode(text)
		if _, err := tok.Decode(ids); err != nil {
			t.Fatalf("Decode of Encode(%q) = %v: %v", text, ids, err)
		}
		s := NewStream(tok, []string{"a"})
		feed(s, ids)
	})
}
