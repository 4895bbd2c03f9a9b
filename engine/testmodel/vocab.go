package testmodel

import (
	"sort"
	"strings"
)

// Vocab is a byte-level BPE vocabulary in GPT-2 style: token ids 0..255
// are the 256 bytes (as GPT-2's byte-to-unicode strings), then one token per
// merge, then the special tokens.
type Vocab struct {
	Tokens []string // token text, byte-level encoded
	Types  []int32  // llama_token_type: 1 normal, 3 control
	Merges []string // "left right", in rank order
	BOS    int      // <|im_start|>
	EOS    int      // <|im_end|>
	EOT    int      // <|endoftext|>, also the padding token
}

// Special token texts, as in Qwen's vocabulary.
const (
	TokenEndOfText = "<|endoftext|>"
	TokenIMStart   = "<|im_start|>"
	TokenIMEnd     = "<|im_end|>"
)

// corpus is the text the merges are learnt from.
const corpus = `the quick brown fox jumps over the lazy dog. hello world! hello there.
the model runs on the npu and the cpu. a small test model is a model that tests.
once upon a time there was a tokenizer that merged the most frequent pairs of bytes.
<think> tokens in tokens out; numbers 0123456789 and 2026 and 42. chat with me, please.
`

// byteToUnicode is GPT-2's bytes_to_unicode table: printable bytes map to
// themselves, the rest to code points from 256 up.
func byteToUnicode() [256]rune {
	var t [256]rune
	n := 0
	for b := 0; b < 256; b++ {
		if b >= '!' && b <= '~' || b >= 0xa1 && b <= 0xac || b >= 0xae && b <= 0xff {
			t[b] = rune(b)
		} else {
			t[b] = rune(256 + n)
			n++
		}
	}
	return t
}

// NewVocab builds a vocabulary of exactly size tokens (at least 259): the
// 256 byte tokens, size-259 merges learnt from a fixed English corpus, and
// three special tokens. It is deterministic.
func NewVocab(size int) *Vocab {
	if size < 259 {
		size = 259
	}
	b2u := byteToUnicode()
	v := &Vocab{}
	ids := map[string]int{}
	add := func(s string, typ int32) int {
		ids[s] = len(v.Tokens)
		v.Tokens = append(v.Tokens, s)
		v.Types = append(v.Types, typ)
		return ids[s]
	}
	for b := 0; b < 256; b++ {
		add(string(b2u[b]), 1)
	}
	// Words as the qwen2 pre-tokenizer roughly splits them: a leading
	// space stays with the word. Each word is a sequence of symbols.
	var words [][]string
	for _, line := range strings.Split(corpus, "\n") {
		for i, w := range strings.Fields(line) {
			if i > 0 {
				w = " " + w
			}
			var syms []string
			for _, c := range []byte(w) {
				syms = append(syms, string(b2u[c]))
			}
			words = append(words, syms)
		}
	}
	nMerges := size - 259
	for len(v.Merges) < nMerges {
		counts := map[[2]string]int{}
		for _, w := range words {
			for i := 0; i+1 < len(w); i++ {
				counts[[2]string{w[i], w[i+1]}]++
			}
		}
		var best [2]string
		bestN := 0
		for p, n := range counts {
			if _, dup := ids[p[0]+p[1]]; dup {
				continue
			}
			if n > bestN || n == bestN && (p[0]+" "+p[1]) < (best[0]+" "+best[1]) {
				best, bestN = p, n
			}
		}
		if bestN == 0 {
			// The corpus is exhausted: merge byte pairs in a fixed order.
			best = nextFillerPair(ids, b2u)
		}
		v.Merges = append(v.Merges, best[0]+" "+best[1])
		add(best[0]+best[1], 1)
		for wi, w := range words {
			var out []string
			for i := 0; i < len(w); i++ {
				if i+1 < len(w) && w[i] == best[0] && w[i+1] == best[1] {
					out = append(out, best[0]+best[1])
					i++
				} else {
					out = append(out, w[i])
				}
			}
			words[wi] = out
		}
	}
	v.EOT = add(TokenEndOfText, 3)
	v.BOS = add(TokenIMStart, 3)
	v.EOS = add(TokenIMEnd, 3)
	return v
}

// nextFillerPair returns the first pair of lowercase letters whose merge is
// not yet a token.
func nextFillerPair(ids map[string]int, b2u [256]rune) [2]string {
	letters := "etaoinshrdlucmfwypvbgkjqxz"
	for _, a := range letters {
		for _, b := range letters {
			p := [2]string{string(b2u[a]), string(b2u[b])}
			if _, dup := ids[p[0]+p[1]]; !dup {
				return p
			}
		}
	}
	panic("testmodel: vocabulary too large for filler merges")
}

// Size is the number of tokens.
func (v *Vocab) Size() int { return len(v.Tokens) }

// TokenizerJSON returns a Hugging Face tokenizer.json for the vocabulary
// (BPE model, ByteLevel pre-tokenizer and decoder, the special tokens as
// added tokens), as a JSON-ready value.
func (v *Vocab) TokenizerJSON() map[string]any {
	vocab := map[string]int{}
	for i, t := range v.Tokens {
		if v.Types[i] == 1 {
			vocab[t] = i
		}
	}
	var added []map[string]any
	for i, t := range v.Tokens {
		if v.Types[i] == 3 {
			added = append(added, map[string]any{"id": i, "content": t, "single_word": false,
				"lstrip": false, "rstrip": false, "normalized": false, "special": true})
		}
	}
	sort.Slice(added, func(a, b int) bool { return added[a]["id"].(int) < added[b]["id"].(int) })
	return map[string]any{
		"version":      "1.0",
		"added_tokens": added,
		"normalizer":   map[string]any{"type": "NFC"},
		"pre_tokenizer": map[string]any{"type": "Sequence", "pretokenizers": []any{
			map[string]any{"type": "Split", "pattern": map[string]any{"Regex": qwen2Pattern},
				"behavior": "Isolated", "invert": false},
			map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false},
		}},
		"decoder": map[string]any{"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true},
		"model": map[string]any{"type": "BPE", "dropout": nil, "unk_token": nil,
			"continuing_subword_prefix": "", "end_of_word_suffix": "", "fuse_unk": false,
			"byte_fallback": false, "ignore_merges": false, "vocab": vocab, "merges": v.Merges},
	}
}

// qwen2Pattern is the pre-tokenizer split of Qwen2/Qwen3 tokenizer.json.
const qwen2Pattern = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
