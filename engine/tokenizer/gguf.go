package tokenizer

import (
	"fmt"
	"math"
	"reflect"
	"strings"

	"golang.org/x/text/unicode/norm"
)

// GGUF token types (llama.cpp's llama_token_type).
const (
	ggufNormal      = 1
	ggufUnknown     = 2
	ggufControl     = 3
	ggufUserDefined = 4
	ggufUnused      = 5
	ggufByte        = 6
)

// FromGGUF builds the tokenizer stored in a GGUF file's metadata, given as
// the key/value map a GGUF reader returns ("tokenizer.ggml.tokens" and so
// on). Only byte-level BPE ("gpt2") vocabularies are supported. Values may
// have any Go integer type; lists may be typed slices or []any.
//
// Control tokens become special added tokens and user-defined tokens
// added tokens, so that text is split at them as llama.cpp does; the
// pre-tokenizer comes from "tokenizer.ggml.pre" (qwen2, llama3 and its
// aliases, gpt2/default). For "qwen2" the text is NFC-normalized, as by
// the Hugging Face tokenizer the GGUF was converted from.
func FromGGUF(md map[string]any) (*Tokenizer, error) {
	model, err := mdString(md, "tokenizer.ggml.model")
	if err != nil {
		return nil, fmt.Errorf("gguf tokenizer: %w", err)
	}
	if model != "gpt2" {
		return nil, fmt.Errorf("gguf tokenizer: model %q is not supported; only byte-level BPE (\"gpt2\") is", model)
	}
	tokens, err := mdStrings(md, "tokenizer.ggml.tokens")
	if err != nil {
		return nil, fmt.Errorf("gguf tokenizer: %w", err)
	}
	var types []int64
	if _, ok := md["tokenizer.ggml.token_type"]; ok {
		if types, err = mdInts(md, "tokenizer.ggml.token_type"); err != nil {
			return nil, fmt.Errorf("gguf tokenizer: %w", err)
		}
		if len(types) != len(tokens) {
			return nil, fmt.Errorf("gguf tokenizer: %d token types for %d tokens", len(types), len(tokens))
		}
	}
	mergeList, err := mdStrings(md, "tokenizer.ggml.merges")
	if err != nil {
		return nil, fmt.Errorf("gguf tokenizer: %w", err)
	}
	pre := "default"
	if _, ok := md["tokenizer.ggml.pre"]; ok {
		if pre, err = mdString(md, "tokenizer.ggml.pre"); err != nil {
			return nil, fmt.Errorf("gguf tokenizer: %w", err)
		}
	}
	var pattern string
	var nrm normalizer
	switch pre {
	case "qwen2":
		pattern, nrm = qwenPattern, norm.NFC.String
	case "llama3", "llama-bpe", "llama-v3", "smaug-bpe":
		pattern = llama3Pattern
	case "gpt2", "default", "gpt-2":
		pattern = gpt2Pattern
	default:
		return nil, fmt.Errorf("gguf tokenizer: pre-tokenizer %q is not supported (supported: qwen2, llama3, llama-bpe, smaug-bpe, gpt2, default)", pre)
	}
	vocab := make(map[string]int, len(tokens))
	var added []*AddedToken
	for id, tok := range tokens {
		typ := int64(ggufNormal)
		if types != nil {
			typ = types[id]
		}
		switch typ {
		case ggufControl:
			added = append(added, &AddedToken{ID: id, Content: tok, Special: true})
		case ggufUserDefined:
			added = append(added, &AddedToken{ID: id, Content: tok})
		}
		if _, dup := vocab[tok]; !dup {
			vocab[tok] = id
		}
	}
	merges := make([][2]string, 0, len(mergeList))
	for i, m := range mergeList {
		l, r, ok := strings.Cut(m, " ")
		if !ok {
			return nil, fmt.Errorf("gguf tokenizer: merge %d %q has no space between its two parts", i, m)
		}
		merges = append(merges, [2]string{l, r})
	}
	var pt preTokenizer
	if digits := fastPattern(pattern); digits > 0 {
		pt = eachPiece(func(p string) ([]string, error) { return splitQwen(p, digits, nil), nil })
	} else {
		re, err := compilePattern(pattern)
		if err != nil {
			return nil, fmt.Errorf("gguf tokenizer: %w", err)
		}
		pt = eachPiece(func(p string) ([]string, error) { return regexSplit(re, p, isolated, false) })
	}
	t, err := build(buildSpec{
		vocab: vocab, merges: merges, added: added,
		norm: nrm, pre: pt, byteLevel: true, dec: decoderSpec{byteLevel: true},
		unk: -1,
	})
	if err != nil {
		return nil, fmt.Errorf("gguf tokenizer: %w", err)
	}
	return t, nil
}

// ConfigFromGGUF reads the special tokens of a GGUF tokenizer: BOS, EOS,
// EOT, padding and unknown ids (-1 where absent), whether BOS is added,
// and tokenizer.chat_template.
func ConfigFromGGUF(md map[string]any) (c Config, err error) {
	c = Config{BOS: -1, Pad: -1, Unk: -1}
	get := func(key string) (int, error) {
		if _, ok := md[key]; !ok {
			return -1, nil
		}
		v, err := mdInt(md, key)
		return int(v), err
	}
	if c.BOS, err = get("tokenizer.ggml.bos_token_id"); err != nil {
		return c, err
	}
	for _, k := range []string{"tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id"} {
		id, err := get(k)
		if err != nil {
			return c, err
		}
		if id >= 0 && !containsInt(c.EOS, id) {
			c.EOS = append(c.EOS, id)
		}
	}
	if c.Pad, err = get("tokenizer.ggml.padding_token_id"); err != nil {
		return c, err
	}
	if c.Unk, err = get("tokenizer.ggml.unknown_token_id"); err != nil {
		return c, err
	}
	if v, ok := md["tokenizer.ggml.add_bos_token"]; ok {
		b, ok := v.(bool)
		if !ok {
			return c, fmt.Errorf("gguf tokenizer: tokenizer.ggml.add_bos_token is %T, want bool", v)
		}
		c.AddBOS = b
	}
	if v, ok := md["tokenizer.chat_template"]; ok {
		s, ok := v.(string)
		if !ok {
			return c, fmt.Errorf("gguf tokenizer: tokenizer.chat_template is %T, want string", v)
		}
		c.ChatTemplate = s
	}
	return c, nil
}

func containsInt(l []int, x int) bool {
	for _, y := range l {
		if y == x {
			return true
		}
	}
	return false
}

func mdString(md map[string]any, key string) (string, error) {
	v, ok := md[key]
	if !ok {
		return "", fmt.Errorf("metadata has no %s", key)
	}
	s, ok := v.(string)
	if !ok {
		return "", fmt.Errorf("%s is %T, want a string", key, v)
	}
	return s, nil
}

func mdStrings(md map[string]any, key string) ([]string, error) {
	v, ok := md[key]
	if !ok {
		return nil, fmt.Errorf("metadata has no %s", key)
	}
	switch l := v.(type) {
	case []string:
		return l, nil
	case []any:
		out := make([]string, len(l))
		for i, x := range l {
			s, ok := x.(string)
			if !ok {
				return nil, fmt.Errorf("%s[%d] is %T, want a string", key, i, x)
			}
			out[i] = s
		}
		return out, nil
	}
	return nil, fmt.Errorf("%s is %T, want a list of strings", key, v)
}

func mdInt(md map[string]any, key string) (int64, error) {
	v, err := toInt(md[key])
	if err != nil {
		return 0, fmt.Errorf("%s: %w", key, err)
	}
	return v, nil
}

func mdInts(md map[string]any, key string) ([]int64, error) {
	rv := reflect.ValueOf(md[key])
	if rv.Kind() != reflect.Slice {
		return nil, fmt.Errorf("%s is %T, want a list of integers", key, md[key])
	}
	out := make([]int64, rv.Len())
	for i := range out {
		v, err := toInt(rv.Index(i).Interface())
		if err != nil {
			return nil, fmt.Errorf("%s[%d]: %w", key, i, err)
		}
		out[i] = v
	}
	return out, nil
}

// toInt accepts any Go integer type, as GGUF readers keep the file's type.
func toInt(v any) (int64, error) {
	switch x := v.(type) {
	case int:
		return int64(x), nil
	case int8:
		return int64(x), nil
	case int16:
		return int64(x), nil
	case int32:
		return int64(x), nil
	case int64:
		return x, nil
	case uint:
		if uint64(x) > math.MaxInt64 {
			return 0, fmt.Errorf("%d is too large", x)
		}
		return int64(x), nil
	case uint8:
		return int64(x), nil
	case uint16:
		return int64(x), nil
	case uint32:
		return int64(x), nil
	case uint64:
		if x > math.MaxInt64 {
			return 0, fmt.Errorf("%d is too large", x)
		}
		return int64(x), nil
	}
	return 0, fmt.Errorf("%v (%T) is not an integer", v, v)
}
