// Package errtext turns a Go error chain ("open x: read y: disk full")
// into words for people: its last, most specific part as a sentence. The
// tray (gui) and the page (web/pages) say errors the same way through
// it, as the page's app.js firstSentence does in the browser.
package errtext

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// LastPart is the last, most specific part of a chain "a: b: c" (a ": "
// inside brackets belongs to its part; a last part too short to say
// anything keeps the one before it).
func LastPart(s string) string {
	var parts []string
	depth, from := 0, 0
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '(' || c == '[':
			depth++
		case (c == ')' || c == ']') && depth > 0:
			depth--
		case c == ':' && i+1 < len(s) && s[i+1] == ' ' && depth == 0:
			parts = append(parts, s[from:i])
			from = i + 2
		}
	}
	parts = append(parts, s[from:])
	last := strings.TrimSpace(parts[len(parts)-1])
	if utf8.RuneCountInString(last) < 12 && len(parts) > 1 {
		last = strings.TrimSpace(parts[len(parts)-2]) + ": " + last
	}
	return last
}

// Sentence starts s with a capital and ends it with a full stop.
func Sentence(s string) string {
	s = strings.TrimSpace(s)
	if s == "" {
		return ""
	}
	r, n := utf8.DecodeRuneInString(s)
	s = string(unicode.ToUpper(r)) + s[n:]
	if !strings.HasSuffix(s, ".") && !strings.HasSuffix(s, "!") && !strings.HasSuffix(s, "?") {
		s += "."
	}
	return s
}
