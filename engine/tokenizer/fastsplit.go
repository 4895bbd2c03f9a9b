package tokenizer

import (
	"unicode"
	"unicode/utf8"
)

// splitQwen cuts s exactly as the regex qwenPattern (maxDigits 1) or
// llama3Pattern (maxDigits 3) with the Isolated behavior, without a regex
// engine: it is several times faster than regexp2 on the same pattern.
// The alternatives, tried in order at each position, are
//
//  1. (?i:'s|'t|'re|'ve|'m|'ll|'d)
//  2. [^\r\n\p{L}\p{N}]?\p{L}+
//  3. \p{N} (or \p{N}{1,3})
//  4. ' ?[^\s\p{L}\p{N}]+[\r\n]*'
//  5. \s*[\r\n]+
//  6. \s+(?!\S)
//  7. \s+
//
// Tests compare it with regexp2 on the golden and fuzzed inputs.
func splitQwen(s string, maxDigits int, out []string) []string {
	for i := 0; i < len(s); {
		n := qwenMatch(s[i:], maxDigits)
		out = append(out, s[i:i+n])
		i += n
	}
	return out
}

type runeClass uint8

const (
	classOther runeClass = iota // not a letter, number or space: "punctuation"
	classLetter
	classNumber
	classSpace
	classNewline // \r or \n (also a space)
)

func classify(r rune) runeClass {
	switch {
	case r == '\r' || r == '\n':
		return classNewline
	case r < utf8.RuneSelf:
		switch {
		case 'a' <= r && r <= 'z', 'A' <= r && r <= 'Z':
			return classLetter
		case '0' <= r && r <= '9':
			return classNumber
		case r == ' ' || ('\t' <= r && r <= '\r'):
			return classSpace
		}
		return classOther
	case unicode.IsLetter(r):
		return classLetter
	case unicode.IsNumber(r):
		return classNumber
	case unicode.IsSpace(r): // \s in .NET and Oniguruma: \t-\r, U+0085 and \p{Z}
		return classSpace
	}
	return classOther
}

// at returns the rune at s[i:], its class and size; class is classOther
// with size 0 at the end of s.
func at(s string, i int) (rune, runeClass, int) {
	if i >= len(s) {
		return 0, classOther, 0
	}
	if c := s[i]; c < utf8.RuneSelf {
		return rune(c), classify(rune(c)), 1
	}
	r, n := utf8.DecodeRuneInString(s[i:])
	return r, classify(r), n
}

func isSpaceClass(c runeClass) bool { return c == classSpace || c == classNewline }

// qwenMatch returns the length of the match at the start of s (len > 0).
func qwenMatch(s string, maxDigits int) int {
	r0, c0, n0 := at(s, 0)
	// 1. contractions
	if r0 == '\'' && len(s) > 1 {
		if n := contraction(s[1:]); n > 0 {
			return 1 + n
		}
	}
	// 2. [^\r\n\p{L}\p{N}]?\p{L}+
	if c0 == classLetter {
		return letters(s, 0)
	}
	if c0 != classNewline && c0 != classNumber {
		if _, c1, _ := at(s, n0); c1 == classLetter {
			return letters(s, n0)
		}
	}
	// 3. \p{N}{1,maxDigits}
	if c0 == classNumber {
		i := n0
		for k := 1; k < maxDigits; k++ {
			_, c, n := at(s, i)
			if c != classNumber {
				break
			}
			i += n
		}
		return i
	}
	// 4. ' ?[^\s\p{L}\p{N}]+[\r\n]*'
	start := 0
	if r0 == ' ' {
		start = 1
	}
	if _, c, _ := at(s, start); c == classOther && start < len(s) {
		i := start
		for {
			_, c, n := at(s, i)
			if c != classOther || n == 0 {
				break
			}
			i += n
		}
		for i < len(s) && (s[i] == '\r' || s[i] == '\n') {
			i++
		}
		return i
	}
	// 5-7 need whitespace at the start.
	if !isSpaceClass(c0) {
		return n0 // unreachable: every rune is a letter, number, space or other
	}
	end, lastNL, lastStart := 0, -1, 0 // end of the whitespace run, end of its last \r or \n, start of its last rune
	for end < len(s) {
		_, c, n := at(s, end)
		if !isSpaceClass(c) {
			break
		}
		lastStart = end
		end += n
		if c == classNewline {
			lastNL = end
		}
	}
	if lastNL > 0 { // 5. \s*[\r\n]+
		return lastNL
	}
	if end == len(s) { // 6. \s+(?!\S) at the end of the text
		return end
	}
	if lastStart > 0 { // 6. leave the last space for the next word
		return lastStart
	}
	return end // 7. \s+
}

// contraction matches s|t|re|ve|m|ll|d in any case at the start of s.
func contraction(s string) int {
	lower := func(i int) byte {
		if i >= len(s) {
			return 0
		}
		c := s[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		return c
	}
	switch lower(0) {
	case 's', 't', 'm', 'd':
		return 1
	case 'r', 'v':
		if lower(1) == 'e' {
			return 2
		}
	case 'l':
		if lower(1) == 'l' {
			return 2
		}
	}
	return 0
}

// letters returns the end of the run of letters starting at i.
func letters(s string, i int) int {
	for {
		_, c, n := at(s, i)
		if c != classLetter {
			return i
		}
		i += n
	}
}
