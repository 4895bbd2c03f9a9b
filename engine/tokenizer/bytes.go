package tokenizer

import (
	"strings"
	"unicode/utf8"
)

// byteToRune is GPT-2's bytes_to_unicode table: every byte gets a
// printable character, so that a byte-level vocabulary can be stored as
// text. Printable Latin-1 bytes map to themselves, the others to U+0100 on.
func byteToRune() [256]rune {
	var t [256]rune
	n := rune(0)
	for b := 0; b < 256; b++ {
		if (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF) {
			t[b] = rune(b)
		} else {
			t[b] = 256 + n
			n++
		}
	}
	return t
}

// runeToByte inverts [byteToRune].
func runeToByte() map[rune]byte {
	m := make(map[rune]byte, 256)
	for b, r := range byteToRune() {
		m[r] = byte(b)
	}
	return m
}

// byteLevelString writes s's bytes as byte-level characters ("Ġhello").
func byteLevelString(s string, table *[256]rune) string {
	var sb strings.Builder
	sb.Grow(len(s) * 2)
	for i := 0; i < len(s); i++ {
		sb.WriteRune(table[s[i]])
	}
	return sb.String()
}

// decodeLossy converts b to text the way Rust's String::from_utf8_lossy and
// the WHATWG TextDecoder do: each maximal invalid subpart becomes one
// U+FFFD. When final is false and b ends in the start of a character that
// later bytes could complete, those bytes are not decoded; rest is their
// offset (len(b) when everything was decoded).
func decodeLossy(b []byte, final bool) (text string, rest int) {
	if utf8.Valid(b) {
		return string(b), len(b)
	}
	var sb strings.Builder
	sb.Grow(len(b) + 8)
	i := 0
	for i < len(b) {
		r, size := utf8.DecodeRune(b[i:])
		if r != utf8.RuneError || size > 1 {
			sb.WriteRune(r)
			i += size
			continue
		}
		n, cut := validPrefix(b[i:])
		if cut && !final && i+n == len(b) {
			return sb.String(), i
		}
		if n == 0 {
			n = 1
		}
		sb.WriteRune(utf8.RuneError)
		i += n
	}
	return sb.String(), len(b)
}

// validPrefix reports how many bytes at the start of b are a valid but
// incomplete UTF-8 sequence (the "maximal subpart" of Unicode §3.9), and
// whether the sequence was cut by the end of b rather than by a bad byte.
func validPrefix(b []byte) (n int, cutByEnd bool) {
	c := b[0]
	var need int
	lo, hi := byte(0x80), byte(0xBF)
	switch {
	case c >= 0xC2 && c <= 0xDF:
		need = 1
	case c == 0xE0:
		need, lo = 2, 0xA0
	case c >= 0xE1 && c <= 0xEC, c == 0xEE, c == 0xEF:
		need = 2
	case c == 0xED:
		need, hi = 2, 0x9F
	case c == 0xF0:
		need, lo = 3, 0x90
	case c >= 0xF1 && c <= 0xF3:
		need = 3
	case c == 0xF4:
		need, hi = 3, 0x8F
	default:
		return 0, false
	}
	n = 1
	for k := 0; k < need; k++ {
		if n >= len(b) {
			return n, true
		}
		x := b[n]
		if x < lo || x > hi {
			return n, false
		}
		lo, hi = 0x80, 0xBF
		n++
	}
	return n, false // complete sequence; the caller only asks about invalid ones
}
