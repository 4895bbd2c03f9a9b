package tokenizer

import (
	"fmt"
	"strings"
	"unicode"

	"github.com/dlclark/regexp2"
	"golang.org/x/text/unicode/norm"
)

// normalizer rewrites text before pre-tokenization.
type normalizer func(string) string

// preTokenizer splits text into pieces that BPE encodes one by one.
type preTokenizer func(pieces []string) ([]string, error)

// Patterns the pre-tokenizers use. qwenPattern is Qwen2/Qwen3's (and
// MiniCPM5's), gpt2Pattern is what ByteLevel uses with use_regex,
// llama3Pattern Llama 3's.
const (
	qwenPattern   = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	gpt2Pattern   = `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`
	llama3Pattern = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
)

// compilePattern compiles a tokenizer.json regex with the options that
// make it behave as under Oniguruma (see the package doc).
func compilePattern(p string) (*regexp2.Regexp, error) {
	re, err := regexp2.Compile(p, regexp2.None)
	if err != nil {
		return nil, fmt.Errorf("compile pattern %q: %w", p, err)
	}
	return re, nil
}

// splitBehavior says what happens to the parts a Split pattern matches.
type splitBehavior int

const (
	isolated splitBehavior = iota
	removed
	mergedWithPrevious
	mergedWithNext
	contiguous
)

func parseBehavior(s string) (splitBehavior, error) {
	switch strings.ToLower(s) {
	case "isolated", "":
		return isolated, nil
	case "removed":
		return removed, nil
	case "mergedwithprevious":
		return mergedWithPrevious, nil
	case "mergedwithnext":
		return mergedWithNext, nil
	case "contiguous":
		return contiguous, nil
	}
	return 0, fmt.Errorf("unknown split behavior %q", s)
}

type span struct {
	start, end int // rune offsets
	match      bool
}

// regexSplit cuts one piece at the pattern's matches.
func regexSplit(re *regexp2.Regexp, piece string, b splitBehavior, invert bool) ([]string, error) {
	if piece == "" {
		return nil, nil
	}
	runes := []rune(piece)
	var spans []span
	prev := 0
	m, err := re.FindRunesMatch(runes)
	for ; m != nil && err == nil; m, err = re.FindNextMatch(m) {
		s, e := m.Index, m.Index+m.Length
		if s > prev {
			spans = append(spans, span{prev, s, false})
		}
		spans = append(spans, span{s, e, true})
		prev = e
	}
	if err != nil {
		return nil, fmt.Errorf("pre-tokenize: %w", err)
	}
	if prev < len(runes) {
		spans = append(spans, span{prev, len(runes), false})
	}
	return applyBehavior(runes, spans, b, invert), nil
}

// stringSplit cuts one piece at each occurrence of a literal string.
func stringSplit(lit, piece string, b splitBehavior, invert bool) []string {
	if piece == "" {
		return nil
	}
	runes := []rune(piece)
	var spans []span
	if lit == "" {
		spans = []span{{0, len(runes), false}}
	} else {
		l := []rune(lit)
		prev := 0
		for i := 0; i+len(l) <= len(runes); {
			if string(runes[i:i+len(l)]) == lit {
				if i > prev {
					spans = append(spans, span{prev, i, false})
				}
				spans = append(spans, span{i, i + len(l), true})
				i += len(l)
				prev = i
				continue
			}
			i++
		}
		if prev < len(runes) {
			spans = append(spans, span{prev, len(runes), false})
		}
	}
	return applyBehavior(runes, spans, b, invert)
}

func applyBehavior(runes []rune, spans []span, b splitBehavior, invert bool) []string {
	if invert {
		for i := range spans {
			spans[i].match = !spans[i].match
		}
	}
	var out []span
	switch b {
	case isolated:
		out = spans
	case removed:
		for _, s := range spans {
			if !s.match {
				out = append(out, s)
			}
		}
	case mergedWithPrevious:
		prevMatch := false
		for _, s := range spans {
			if s.match && !prevMatch && len(out) > 0 {
				out[len(out)-1].end = s.end
			} else {
				out = append(out, s)
			}
			prevMatch = s.match
		}
	case mergedWithNext:
		prevMatch := false
		for _, s := range spans {
			if len(out) > 0 && prevMatch && !s.match {
				out[len(out)-1].end = s.end
			} else {
				out = append(out, s)
			}
			prevMatch = s.match
		}
	case contiguous:
		prevMatch := false
		for _, s := range spans {
			if len(out) > 0 && s.match && prevMatch {
				out[len(out)-1].end = s.end
			} else {
				out = append(out, s)
			}
			prevMatch = s.match
		}
	}
	res := make([]string, 0, len(out))
	for _, s := range out {
		if s.end > s.start {
			res = append(res, string(runes[s.start:s.end]))
		}
	}
	return res
}

// normalizerFor builds the normalizer a tokenizer.json describes; nil
// config means none.
func normalizerFor(c *jsonNormalizer) (normalizer, error) {
	if c == nil {
		return nil, nil
	}
	switch c.Type {
	case "NFC":
		return norm.NFC.String, nil
	case "NFD":
		return norm.NFD.String, nil
	case "NFKC":
		return norm.NFKC.String, nil
	case "NFKD":
		return norm.NFKD.String, nil
	case "Lowercase":
		return strings.ToLower, nil
	case "Prepend":
		p := c.Prepend
		return func(s string) string {
			if s == "" {
				return s
			}
			return p + s
		}, nil
	case "Replace":
		if c.Pattern.Regex != nil {
			re, err := compilePattern(*c.Pattern.Regex)
			if err != nil {
				return nil, fmt.Errorf("normalizer Replace: %w", err)
			}
			content := c.Content
			return func(s string) string {
				out, err := re.Replace(s, content, -1, -1)
				if err != nil {
					return s
				}
				return out
			}, nil
		}
		if c.Pattern.String == nil {
			return nil, fmt.Errorf("normalizer Replace has no pattern")
		}
		old, content := *c.Pattern.String, c.Content
		return func(s string) string { return strings.ReplaceAll(s, old, content) }, nil
	case "Strip":
		left, right := c.StripLeft, c.StripRight
		return func(s string) string {
			if left {
				s = strings.TrimLeftFunc(s, unicode.IsSpace)
			}
			if right {
				s = strings.TrimRightFunc(s, unicode.IsSpace)
			}
			return s
		}, nil
	case "Sequence":
		var fs []normalizer
		for i := range c.Normalizers {
			f, err := normalizerFor(&c.Normalizers[i])
			if err != nil {
				return nil, err
			}
			if f != nil {
				fs = append(fs, f)
			}
		}
		return func(s string) string {
			for _, f := range fs {
				s = f(s)
			}
			return s
		}, nil
	}
	return nil, fmt.Errorf("normalizer %q is not supported (supported: NFC, NFD, NFKC, NFKD, Lowercase, Prepend, Replace, Strip, Sequence)", c.Type)
}

// preTokenizerFor builds the pre-tokenizer a tokenizer.json describes. It
// also reports whether the pieces come out byte-level encoded (a ByteLevel
// step is present), in which case BPE starts from bytes.
func preTokenizerFor(c *jsonPreTokenizer) (pre preTokenizer, byteLevel bool, err error) {
	if c == nil {
		return nil, false, nil
	}
	switch c.Type {
	case "Sequence":
		var steps []preTokenizer
		for i := range c.PreTokenizers {
			p, bl, err := preTokenizerFor(&c.PreTokenizers[i])
			if err != nil {
				return nil, false, err
			}
			byteLevel = byteLevel || bl
			if p != nil {
				steps = append(steps, p)
			}
		}
		return func(pieces []string) ([]string, error) {
			var err error
			for _, p := range steps {
				if pieces, err = p(pieces); err != nil {
					return nil, err
				}
			}
			return pieces, nil
		}, byteLevel, nil
	case "Split":
		b, err := parseBehavior(c.Behavior)
		if err != nil {
			return nil, false, fmt.Errorf("pre-tokenizer Split: %w", err)
		}
		invert := c.Invert
		if c.Pattern.Regex != nil {
			if digits := fastPattern(*c.Pattern.Regex); digits > 0 && b == isolated && !invert {
				return eachPiece(func(p string) ([]string, error) { return splitQwen(p, digits, nil), nil }), false, nil
			}
			if digits := fastPattern(*c.Pattern.Regex); digits > 0 && b == isolated && !invert {
				return eachPiece(func(p string) ([]string, error) { return splitQwen(p, digits, nil), nil }), false, nil
			}
			re, err := compilePattern(*c.Pattern.Regex)
			if err != nil {
				return nil, false, fmt.Errorf("pre-tokenizer Split: %w", err)
			}
			return eachPiece(func(p string) ([]string, error) { return regexSplit(re, p, b, invert) }), false, nil
		}
		if c.Pattern.String == nil {
			return nil, false, fmt.Errorf("pre-tokenizer Split has no pattern")
		}
		lit := *c.Pattern.String
		return eachPiece(func(p string) ([]string, error) { return stringSplit(lit, p, b, invert), nil }), false, nil
	case "ByteLevel":
		useRegex := c.UseRegex == nil || *c.UseRegex
		prefix := c.AddPrefixSpace
		var re *regexp2.Regexp
		if useRegex {
			if re, err = compilePattern(gpt2Pattern); err != nil {
				return nil, false, err
			}
		}
		return eachPiece(func(p string) ([]string, error) {
			if prefix && !strings.HasPrefix(p, " ") {
				p = " " + p
			}
			if re == nil {
				return []string{p}, nil
			}
			return regexSplit(re, p, isolated, false)
		}), true, nil
	case "Digits":
		individual := c.IndividualDigits
		return eachPiece(func(p string) ([]string, error) { return splitDigits(p, individual), nil }), false, nil
	}
	return nil, false, fmt.Errorf("pre-tokenizer %q is not supported (supported: Sequence, Split, ByteLevel, Digits)", c.Type)
}

func eachPiece(f func(string) ([]string, error)) preTokenizer {
	return func(pieces []string) ([]string, error) {
		out := make([]string, 0, len(pieces)*4)
		for _, p := range pieces {
			ps, err := f(p)
			if err != nil {
				return nil, err
			}
			out = append(out, ps...)
		}
		return out, nil
	}
}

// splitDigits isolates runs of digits (or each digit) from the rest.
func splitDigits(p string, individual bool) []string {
	var out []string
	start := 0
	prevDigit := false
	first := true
	for i, r := range p {
		d := unicode.IsDigit(r)
		if !first && (d != prevDigit || (d && individual)) {
			out = append(out, p[start:i])
			start = i
		}
		prevDigit, first = d, false
	}
	if start < len(p) {
		out = append(out, p[start:])
	}
	return out
}

// fastPattern reports whether [splitQwen] implements pattern, and with how
// many digits per number: 1 for Qwen's pattern, 3 for Llama 3's, 0 for
// any other pattern (which regexp2 runs).
func fastPattern(pattern string) int {
	switch pattern {
	case qwenPattern:
		return 1
	case llama3Pattern:
		return 3
	}
	return 0
}
