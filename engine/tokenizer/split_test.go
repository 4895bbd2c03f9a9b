package tokenizer

import (
	"slices"
	"testing"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// The hand-written splitter must cut exactly where regexp2 cuts with the
// same pattern: on every golden text, and on fuzzed ones.
func TestSplitQwenMatchesRegexp(t *testing.T) {
	g := loadGolden(t)
	for _, p := range []struct {
		pattern string
		digits  int
	}{{qwenPattern, 1}, {llama3Pattern, 3}} {
		re, err := compilePattern(p.pattern)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range g.Encode {
			s := norm.NFC.String(c.Text)
			want, err := regexSplit(re, s, isolated, false)
			if err != nil {
				t.Fatal(err)
			}
			if got := splitQwen(s, p.digits, nil); !slices.Equal(got, want) {
				t.Errorf("digits %d, %q:\n got %q\nwant %q", p.digits, s, got, want)
			}
		}
	}
}

func FuzzSplitQwen(f *testing.F) {
	for _, s := range []string{"Hello world", "a  b\r\n\r\n c", "'S'll 'RE", " ?!\n", "123456 x", "\t\u00a0\u3000x", "日本語 ok", "e\u0301"} {
		f.Add(s)
	}
	re, err := compilePattern(qwenPattern)
	if err != nil {
		f.Fatal(err)
	}
	re3, err := compilePattern(llama3Pattern)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !utf8.ValidString(s) {
			return // Encode replaces invalid bytes before splitting
		}
		want, _ := regexSplit(re, s, isolated, false)
		if got := splitQwen(s, 1, nil); !slices.Equal(got, want) {
			t.Errorf("%q:\n got %q\nwant %q", s, got, want)
		}
		want, _ = regexSplit(re3, s, isolated, false)
		if got := splitQwen(s, 3, nil); !slices.Equal(got, want) {
			t.Errorf("llama3 %q:\n got %q\nwant %q", s, got, want)
		}
	})
}

// classify must agree with regexp2's \p{L}, \p{N} and \s on every rune.
func TestClassifyMatchesRegexp(t *testing.T) {
	classes := []struct {
		pattern string
		is      func(runeClass) bool
	}{
		{`\p{L}`, func(c runeClass) bool { return c == classLetter }},
		{`\p{N}`, func(c runeClass) bool { return c == classNumber }},
		{`\s`, isSpaceClass},
	}
	var all []rune
	for r := rune(0); r <= utf8.MaxRune; r++ {
		if utf8.ValidRune(r) {
			all = append(all, r)
		}
	}
	for _, c := range classes {
		re, err := compilePattern(c.pattern)
		if err != nil {
			t.Fatal(err)
		}
		in := make([]bool, len(all))
		m, err := re.FindRunesMatch(all)
		for ; m != nil && err == nil; m, err = re.FindNextMatch(m) {
			in[m.Index] = true
		}
		if err != nil {
			t.Fatal(err)
		}
		bad := 0
		for i, r := range all {
			if got := c.is(classify(r)); got != in[i] {
				if bad < 5 {
					t.Errorf("%s: classify(%U) says %v, regexp2 %v", c.pattern, r, got, in[i])
				}
				bad++
			}
		}
		if bad > 0 {
			t.Errorf("%s: %d runes differ", c.pattern, bad)
		}
	}
}
