package tokenizer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/npuchat/npuchat/safefile"
)

// Load reads a Hugging Face tokenizer.json, given as the file or as the
// folder that holds it.
func Load(path string) (*Tokenizer, error) {
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		path = filepath.Join(path, "tokenizer.json")
	}
	data, err := safefile.ReadFile(path, maxTokenizerJSONBytes)
	if err != nil {
		return nil, fmt.Errorf("load tokenizer: %w", err)
	}
	t, err := FromJSON(data)
	if err != nil {
		return nil, fmt.Errorf("load tokenizer %s: %w", path, err)
	}
	return t, nil
}

// The parts of tokenizer.json this package reads.
type jsonTokenizer struct {
	AddedTokens   []jsonAddedToken  `json:"added_tokens"`
	Normalizer    *jsonNormalizer   `json:"normalizer"`
	PreTokenizer  *jsonPreTokenizer `json:"pre_tokenizer"`
	Model         jsonModel         `json:"model"`
	Decoder       *jsonDecoder      `json:"decoder"`
	PostProcessor json.RawMessage   `json:"post_processor"`
}

type jsonAddedToken struct {
	ID         int    `json:"id"`
	Content    string `json:"content"`
	SingleWord bool   `json:"single_word"`
	LStrip     bool   `json:"lstrip"`
	RStrip     bool   `json:"rstrip"`
	Normalized bool   `json:"normalized"`
	Special    bool   `json:"special"`
}

type jsonPattern struct {
	Regex  *string `json:"Regex"`
	String *string `json:"String"`
}

type jsonNormalizer struct {
	Type        string           `json:"type"`
	Normalizers []jsonNormalizer `json:"normalizers"`
	Prepend     string           `json:"prepend"`
	Pattern     jsonPattern      `json:"pattern"`
	Content     string           `json:"content"`
	StripLeft   bool             `json:"strip_left"`
	StripRight  bool             `json:"strip_right"`
}

type jsonPreTokenizer struct {
	Type             string             `json:"type"`
	PreTokenizers    []jsonPreTokenizer `json:"pretokenizers"`
	Pattern          jsonPattern        `json:"pattern"`
	Behavior         string             `json:"behavior"`
	Invert           bool               `json:"invert"`
	AddPrefixSpace   bool               `json:"add_prefix_space"`
	UseRegex         *bool              `json:"use_regex"`
	IndividualDigits bool               `json:"individual_digits"`
}

type jsonModel struct {
	Type                    string          `json:"type"`
	Vocab                   json.RawMessage `json:"vocab"`
	Merges                  []jsonMerge     `json:"merges"`
	UnkToken                *string         `json:"unk_token"`
	ByteFallback            bool            `json:"byte_fallback"`
	FuseUnk                 bool            `json:"fuse_unk"`
	IgnoreMerges            bool            `json:"ignore_merges"`
	ContinuingSubwordPrefix *string         `json:"continuing_subword_prefix"`
	EndOfWordSuffix         *string         `json:"end_of_word_suffix"`
	Dropout                 json.RawMessage `json:"dropout"`
}

type jsonDecoder struct {
	Type           string        `json:"type"`
	Decoders       []jsonDecoder `json:"decoders"`
	Pattern        jsonPattern   `json:"pattern"`
	Content        string        `json:"content"`
	Start          int           `json:"start"`
	Stop           int           `json:"stop"`
	Replacement    string        `json:"replacement"`
	AddPrefixSpace *bool         `json:"add_prefix_space"`
	PrependScheme  string        `json:"prepend_scheme"`
}

// jsonMerge is one merge, written "a b" (older files) or ["a", "b"].
type jsonMerge [2]string

func (m *jsonMerge) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		l, r, ok := strings.Cut(s, " ")
		if !ok {
			return fmt.Errorf("merge %q has no space between its two parts", s)
		}
		*m = jsonMerge{l, r}
		return nil
	}
	var pair []string
	if err := json.Unmarshal(b, &pair); err != nil {
		return fmt.Errorf("merge %s is neither \"a b\" nor [\"a\", \"b\"]", b)
	}
	if len(pair) != 2 {
		return fmt.Errorf("merge %s has %d parts, want 2", b, len(pair))
	}
	*m = jsonMerge{pair[0], pair[1]}
	return nil
}

// FromJSON builds a tokenizer from the contents of a tokenizer.json.
func FromJSON(data []byte) (*Tokenizer, error) {
	var j jsonTokenizer
	if err := json.Unmarshal(data, &j); err != nil {
		return nil, fmt.Errorf("parse tokenizer.json: %w", err)
	}
	if j.Model.Type != "BPE" && j.Model.Type != "" {
		return nil, fmt.Errorf("model type %q is not supported; only BPE is", j.Model.Type)
	}
	if len(j.Model.Vocab) == 0 || string(j.Model.Vocab) == "null" {
		return nil, errors.New("model has no vocab")
	}
	var vocab map[string]int
	if err := json.Unmarshal(j.Model.Vocab, &vocab); err != nil {
		return nil, fmt.Errorf("model vocab: %w", err)
	}
	if s := j.Model.ContinuingSubwordPrefix; s != nil && *s != "" {
		return nil, fmt.Errorf("continuing_subword_prefix %q is not supported", *s)
	}
	if s := j.Model.EndOfWordSuffix; s != nil && *s != "" {
		return nil, fmt.Errorf("end_of_word_suffix %q is not supported", *s)
	}
	norm, err := normalizerFor(j.Normalizer)
	if err != nil {
		return nil, err
	}
	pre, byteLevel, err := preTokenizerFor(j.PreTokenizer)
	if err != nil {
		return nil, err
	}
	dec, err := decoderFor(j.Decoder)
	if err != nil {
		return nil, err
	}
	if dec.byteLevel {
		byteLevel = true // the pieces are bytes even without a ByteLevel pre-tokenizer
	}
	unk := -1
	if j.Model.UnkToken != nil {
		id, ok := vocab[*j.Model.UnkToken]
		if !ok {
			return nil, fmt.Errorf("unk_token %q is not in the vocabulary", *j.Model.UnkToken)
		}
		unk = id
	}
	added := make([]*AddedToken, 0, len(j.AddedTokens))
	for _, a := range j.AddedTokens {
		added = append(added, &AddedToken{ID: a.ID, Content: a.Content, Special: a.Special,
			Normalized: a.Normalized, LStrip: a.LStrip, RStrip: a.RStrip, SingleWord: a.SingleWord})
	}
	merges := make([][2]string, len(j.Model.Merges))
	for i, m := range j.Model.Merges {
		merges[i] = m
	}
	return build(buildSpec{
		vocab: vocab, merges: merges, added: added,
		norm: norm, pre: pre, byteLevel: byteLevel, dec: dec,
		unk: unk, byteFallback: j.Model.ByteFallback, fuseUnk: j.Model.FuseUnk,
		ignoreMerges: j.Model.IgnoreMerges,
	})
}

// buildSpec is everything a Tokenizer is made from, whatever the source.
type buildSpec struct {
	vocab        map[string]int
	merges       [][2]string
	added        []*AddedToken
	norm         normalizer
	pre          preTokenizer
	byteLevel    bool
	dec          decoderSpec
	unk          int
	byteFallback bool
	fuseUnk      bool
	ignoreMerges bool
}

// maxID bounds token ids (16M, a hundred times the largest vocabularies),
// so that a corrupt file cannot make the tables huge.
const maxID = 1 << 24

func build(s buildSpec) (*Tokenizer, error) {
	m := &bpe{
		vocab: s.vocab, merges: newPairTable(len(s.merges)),
		byteLevel: s.byteLevel, unk: s.unk, byteFallback: s.byteFallback,
		fuseUnk: s.fuseUnk, ignoreMerges: s.ignoreMerges,
		cache: newWordCache(cacheWords),
	}
	table := byteToRune()
	m.byteRunes = table
	for b := range m.byteIDs {
		m.byteIDs[b] = -1
		if id, ok := m.vocab[string(table[b])]; ok {
			m.byteIDs[b] = id
		}
	}
	for i, mg := range s.merges {
		if err := m.addMerge(mg[0], mg[1], i); err != nil {
			return nil, err
		}
	}
	size := 0
	for tok, id := range s.vocab {
		if id < 0 || id >= maxID {
			return nil, fmt.Errorf("vocab entry %q has id %d, outside 0..%d", tok, id, maxID-1)
		}
		size = max(size, id+1)
	}
	sort.SliceStable(s.added, func(i, j int) bool { return s.added[i].ID < s.added[j].ID })
	for _, a := range s.added {
		if a.ID < 0 || a.ID >= maxID {
			return nil, fmt.Errorf("added token %q has id %d, outside 0..%d", a.Content, a.ID, maxID-1)
		}
		size = max(size, a.ID+1)
	}
	if s.dec.byteLevel {
		s.dec.runeToByte = runeToByte()
	}
	t := &Tokenizer{
		model: m, norm: s.norm, pre: s.pre,
		added: s.added, addedByID: make(map[int]*AddedToken, len(s.added)),
		tokens: make([]string, size), known: make([]bool, size), pieces: make([][]byte, size),
		stripLeading: s.dec.stripLeading,
	}
	for tok, id := range s.vocab {
		t.tokens[id], t.known[id] = tok, true
		t.pieces[id] = s.dec.tokenBytes(tok)
	}
	var rawToks, normToks []*AddedToken
	for _, a := range s.added {
		t.addedByID[a.ID] = a
		t.tokens[a.ID], t.known[a.ID] = a.Content, true
		t.pieces[a.ID] = []byte(a.Content)
		if a.Normalized && s.norm != nil {
			a.match = s.norm(a.Content) // as the Rust library, which normalizes the content too
			normToks = append(normToks, a)
		} else {
			a.match = a.Content
			rawToks = append(rawToks, a)
		}
	}
	t.raw, t.normed = newAddedMatcher(rawToks), newAddedMatcher(normToks)
	return t, nil
}

// decoderSpec says how one vocabulary entry turns into bytes.
type decoderSpec struct {
	byteLevel    bool              // entries are byte-level text ("Ġ" is a space)
	runeToByte   map[rune]byte     // the byte-level table, inverted
	byteFallback bool              // "<0xAB>" entries are the byte 0xAB
	replace      map[string]string // literal replacements ("▁" -> " "), in order below
	replaceOrder []string
	stripLeading int
}

// byteToken reports whether tok is a byte-fallback token "<0xAB>" and
// which byte it stands for.
func byteToken(tok string) (byte, bool) {
	if len(tok) != 6 || !strings.HasPrefix(tok, "<0x") || tok[5] != '>' {
		return 0, false
	}
	v, err := strconv.ParseUint(tok[3:5], 16, 8)
	return byte(v), err == nil
}

func (d decoderSpec) tokenBytes(tok string) []byte {
	if b, ok := byteToken(tok); ok && d.byteFallback {
		return []byte{b}
	}
	if d.byteLevel {
		if d.runeToByte == nil {
			d.runeToByte = runeToByte()
		}
		out := make([]byte, 0, len(tok))
		for _, r := range tok {
			b, ok := d.runeToByte[r]
			if !ok {
				return []byte(tok) // not byte-level text: as the Rust decoder, keep it as is
			}
			out = append(out, b)
		}
		return out
	}
	for _, old := range d.replaceOrder {
		tok = strings.ReplaceAll(tok, old, d.replace[old])
	}
	return []byte(tok)
}

func decoderFor(c *jsonDecoder) (decoderSpec, error) {
	var d decoderSpec
	if c == nil {
		return d, nil
	}
	var walk func(c *jsonDecoder, afterFuse bool) error
	walk = func(c *jsonDecoder, afterFuse bool) error {
		switch c.Type {
		case "ByteLevel":
			d.byteLevel = true
		case "ByteFallback":
			d.byteFallback = true
		case "Fuse":
		case "Replace":
			if c.Pattern.String == nil {
				return errors.New("decoder Replace with a regex pattern is not supported")
			}
			if d.replace == nil {
				d.replace = map[string]string{}
			}
			d.replace[*c.Pattern.String] = c.Content
			d.replaceOrder = append(d.replaceOrder, *c.Pattern.String)
		case "Strip":
			if c.Content != " " || c.Stop != 0 || !afterFuse {
				return fmt.Errorf("decoder Strip %q start %d stop %d is not supported (only leading spaces after Fuse)", c.Content, c.Start, c.Stop)
			}
			d.stripLeading = c.Start
		case "Metaspace":
			r := c.Replacement
			if r == "" {
				r = "▁"
			}
			if d.replace == nil {
				d.replace = map[string]string{}
			}
			d.replace[r] = " "
			d.replaceOrder = append(d.replaceOrder, r)
			if (c.AddPrefixSpace == nil || *c.AddPrefixSpace) && c.PrependScheme != "never" {
				d.stripLeading = 1
			}
		case "Sequence":
			fused := afterFuse
			for i := range c.Decoders {
				if err := walk(&c.Decoders[i], fused); err != nil {
					return err
				}
				if c.Decoders[i].Type == "Fuse" {
					fused = true
				}
			}
		default:
			return fmt.Errorf("decoder %q is not supported (supported: ByteLevel, ByteFallback, Fuse, Replace, Strip, Metaspace, Sequence)", c.Type)
		}
		return nil
	}
	return d, walk(c, false)
}
