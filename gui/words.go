package gui

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// errorWords splits an error as the service or the system wrote it (a
// Go error chain, "load m on npu: FastFlowLM: ERT_CMD_STATE_TIMEOUT on
// the first token") into what a window shows: a short human sentence,
// its most specific part ("ERT_CMD_STATE_TIMEOUT on the first token."),
// and the whole text for a folded Details ("" when the sentence already
// says all of it). It reads a chain as the chat page does (web/pages'
// lastPart and app.js's firstSentence), so the tray and the page say a
// failure in the same words.
func errorWords(s string) (sentence, detail string) {
	s = strings.Join(strings.Fields(s), " ")
	if s == "" {
		return "", ""
	}
	sentence = asSentence(lastPart(s))
	if strings.TrimSuffix(sentence, ".") != strings.TrimSuffix(asSentence(s), ".") {
		detail = s
	}
	return sentence, detail
}

// lastPart is the last, most specific part of a chain "a: b: c" (a ": "
// inside brackets belongs to its part; a last part too short to say
// anything keeps the one before it).
func lastPart(s string) string {
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

// asSentence starts s with a capital and ends it with a full stop.
func asSentence(s string) string {
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
