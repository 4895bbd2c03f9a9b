package tokenizer

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Tokenizer encodes text to token ids and decodes ids to text. It is safe
// for concurrent use. Build one with [Load], [FromJSON] or [FromGGUF].
type Tokenizer struct {
	model *bpe
	norm  normalizer   // nil: none
	pre   preTokenizer // nil: the whole text is one piece

	added     []*AddedToken
	addedByID map[int]*AddedToken
	raw       *addedMatcher // added tokens matched before normalization
	normed    *addedMatcher // added tokens matched after it

	tokens []string // id -> token as stored in the vocabulary ("" for gaps)
	known  []bool   // id -> the vocabulary has this id
	pieces [][]byte // id -> the bytes the id decodes to
	// stripLeading is how many leading spaces the decoder removes from
	// the start of the output (Metaspace prefix, or a final Strip step).
	stripLeading int
}

// Encode returns the ids of text with added and special tokens recognised
// where they occur ("<|im_start|>" is one id), as Hugging Face tokenizers
// do by default. Use it for prompts built by a chat template. It adds no
// BOS token: see [Config.AddBOS].
func (t *Tokenizer) Encode(text string) []int { return t.encode(text, true) }

// EncodeOrdinary returns the ids of text with special tokens treated as
// plain text, so that a user who types "<|im_end|>" cannot end a turn.
// Added tokens that are not special (such as "<think>") are still matched,
// as with Hugging Face's split_special_tokens.
func (t *Tokenizer) EncodeOrdinary(text string) []int { return t.encode(text, false) }

// EncodeLiteral encodes text as Encode does, except inside the literal
// byte ranges (sorted, non-overlapping [start, end) pairs), where special
// tokens are plain text as with EncodeOrdinary. A chat prompt marks the
// text that came from messages literal, so that only the template's own
// markers are control tokens (see package chat's EncodeMessages).
func (t *Tokenizer) EncodeLiteral(text string, literal [][2]int) []int {
	if !utf8.ValidString(text) {
		// Replacing invalid bytes would move the ranges: refuse the
		// shortcut and treat all of it as ordinary text.
		return t.encode(text, false)
	}
	return t.encodeRanges(text, true, literal)
}

func (t *Tokenizer) encode(text string, special bool) []int {
	if !utf8.ValidString(text) {
		// Hugging Face only ever sees valid text; bytes that are not UTF-8
		// are encoded as U+FFFD, one per maximal invalid subpart.
		text, _ = decodeLossy([]byte(text), true)
	}
	return t.encodeRanges(text, special, nil)
}

func (t *Tokenizer) encodeRanges(text string, special bool, literal [][2]int) []int {
	ids := make([]int, 0, len(text)/3+1)
	for _, seg := range t.raw.split(text, special, literal...) {
		if seg.tok != nil {
			ids = append(ids, seg.tok.ID)
			continue
		}
		s := seg.text
		if t.norm != nil {
			s = t.norm(s)
		}
		// Normalizing moves offsets: a piece that holds literal text has
		// no special tokens matched after normalization.
		special2 := special && !overlaps(literal, seg.start, seg.start+len(seg.text))
		for _, seg2 := range t.normed.split(s, special2) {
			if seg2.tok != nil {
				ids = append(ids, seg2.tok.ID)
				continue
			}
			ids = t.encodeText(seg2.text, ids)
		}
	}
	return ids
}

func (t *Tokenizer) encodeText(s string, ids []int) []int {
	if s == "" {
		return ids
	}
	if t.pre == nil {
		return t.model.word(s, ids)
	}
	pieces, err := t.pre([]string{s})
	if err != nil {
		// regexp2 fails only on a match timeout, and none is set; should it
		// ever fail, the text is still encoded, as one piece.
		pieces = []string{s}
	}
	for _, p := range pieces {
		ids = t.model.word(p, ids)
	}
	return ids
}

// Decode returns the text of ids. Bytes that do not form valid UTF-8
// become U+FFFD, as in Hugging Face's decode. Special tokens are included.
func (t *Tokenizer) Decode(ids []int) (string, error) {
	var b []byte
	for _, id := range ids {
		p, err := t.TokenBytes(id)
		if err != nil {
			return "", err
		}
		b = append(b, p...)
	}
	s, _ := decodeLossy(b, true)
	return t.trimDecoded(s), nil
}

// trimDecoded removes the leading spaces the decoder strips from the start
// of a text.
func (t *Tokenizer) trimDecoded(s string) string {
	for i := 0; i < t.stripLeading && strings.HasPrefix(s, " "); i++ {
		s = s[1:]
	}
	return s
}

// TokenBytes returns the bytes id decodes to; a byte-level token can be
// part of a UTF-8 character.
func (t *Tokenizer) TokenBytes(id int) ([]byte, error) {
	if id < 0 || id >= len(t.pieces) || !t.known[id] {
		return nil, fmt.Errorf("token id %d is not in the vocabulary (ids 0..%d)", id, len(t.pieces)-1)
	}
	return t.pieces[id], nil
}

// Token returns id's entry in the vocabulary as stored ("Ġhello" in a
// byte-level vocabulary), and false when there is none.
func (t *Tokenizer) Token(id int) (string, bool) {
	if id < 0 || id >= len(t.tokens) || !t.known[id] {
		return "", false
	}
	return t.tokens[id], true
}

// ID returns the id of a vocabulary entry or added token, as stored.
func (t *Tokenizer) ID(token string) (int, bool) {
	for _, a := range t.added {
		if a.Content == token {
			return a.ID, true
		}
	}
	id, ok := t.model.vocab[token]
	return id, ok
}

// Size is one more than the largest id: the rows an embedding needs.
func (t *Tokenizer) Size() int { return len(t.pieces) }

// IsSpecial reports whether id is a special added token (<|im_end|>).
func (t *Tokenizer) IsSpecial(id int) bool {
	a, ok := t.addedByID[id]
	return ok && a.Special
}

// AddedTokens returns the added tokens, in id order.
func (t *Tokenizer) AddedTokens() []AddedToken {
	out := make([]AddedToken, len(t.added))
	for i, a := range t.added {
		out[i] = *a
	}
	return out
}
