package tokenizer

import (
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"
)

// AddedToken is a token matched in the text before any other step: the
// control tokens of a chat format (<|im_start|>) and other tokens a model
// adds to its vocabulary (<think>). The fields mean what they mean in
// tokenizer.json.
type AddedToken struct {
	ID      int
	Content string
	// Special tokens are left out by EncodeOrdinary and skipped when a
	// stream hides special tokens.
	Special bool
	// Normalized tokens are matched in the normalized text, the others in
	// the text as given.
	Normalized bool
	// LStrip and RStrip make the token swallow the whitespace on its left
	// or right; SingleWord makes it match only as a whole word.
	LStrip, RStrip, SingleWord bool

	match string // the text searched for: Content, normalized when Normalized
}

// addedMatcher finds added tokens in text, longest first at the leftmost
// position, as the Rust library's leftmost-longest Aho-Corasick does.
type addedMatcher struct {
	byFirst [256][]*AddedToken // candidates by first byte, longest first
	empty   bool
}

func newAddedMatcher(toks []*AddedToken) *addedMatcher {
	m := &addedMatcher{empty: true}
	for _, t := range toks {
		if t.match == "" {
			continue
		}
		m.byFirst[t.match[0]] = append(m.byFirst[t.match[0]], t)
		m.empty = false
	}
	for _, l := range m.byFirst {
		sort.SliceStable(l, func(i, j int) bool { return len(l[i].match) > len(l[j].match) })
	}
	return m
}

// segment is a piece of the input: either an added token or text; start
// is where the piece begins in the text split.
type segment struct {
	text  string
	tok   *AddedToken
	start int
}

// split cuts text at added tokens. special=false skips special tokens;
// so does a special token whose text overlaps one of the literal byte
// ranges (sorted [start, end) pairs): text a user wrote, in a prompt.
func (m *addedMatcher) split(text string, special bool, literal ...[2]int) []segment {
	if m == nil || m.empty {
		return []segment{{text: text}}
	}
	var out []segment
	start := 0 // start of pending text
	for i := 0; i < len(text); {
		cands := m.byFirst[text[i]]
		if cands == nil {
			i++
			continue
		}
		var hit *AddedToken
		for _, t := range cands {
			if t.Special && (!special || overlaps(literal, i, i+len(t.match))) {
				continue
			}
			if strings.HasPrefix(text[i:], t.match) && (!t.SingleWord || wholeWord(text, i, i+len(t.match))) {
				hit = t
				break
			}
		}
		if hit == nil {
			i++
			continue
		}
		ms, me := i, i+len(hit.match)
		if hit.LStrip {
			for ms > start {
				r, size := utf8.DecodeLastRuneInString(text[start:ms])
				if !unicode.IsSpace(r) {
					break
				}
				ms -= size
			}
		}
		if hit.RStrip {
			for me < len(text) {
				r, size := utf8.DecodeRuneInString(text[me:])
				if !unicode.IsSpace(r) {
					break
				}
				me += size
			}
		}
		if ms > start {
			out = append(out, segment{text: text[start:ms], start: start})
		}
		out = append(out, segment{tok: hit, start: ms})
		start, i = me, me
	}
	if start < len(text) {
		out = append(out, segment{text: text[start:], start: start})
	}
	return out
}

// overlaps reports whether [s, e) overlaps a range of ranges (sorted).
func overlaps(ranges [][2]int, s, e int) bool {
	for _, r := range ranges {
		if r[0] >= e {
			return false
		}
		if r[1] > s {
			return true
		}
	}
	return false
}

// wholeWord reports whether text[s:e] is not glued to word characters.
func wholeWord(text string, s, e int) bool {
	if s > 0 {
		r, _ := utf8.DecodeLastRuneInString(text[:s])
		if isWordRune(r) {
			return false
		}
	}
	if e < len(text) {
		r, _ := utf8.DecodeRuneInString(text[e:])
		if isWordRune(r) {
			return false
		}
	}
	return true
}

// isWordRune is Rust's char::is_alphanumeric or '_', near enough: letters
// and numbers.
func isWordRune(r rune) bool { return r == '_' || unicode.IsLetter(r) || unicode.IsNumber(r) }
