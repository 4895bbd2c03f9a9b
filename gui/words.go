package gui

import (
	"strings"

	"github.com/npuchat/npuchat/errtext"
)

// errorWords splits an error as the service or the system wrote it (a
// Go error chain, "load m on npu: FastFlowLM: ERT_CMD_STATE_TIMEOUT on
// the first token") into what a window shows: a short human sentence,
// its most specific part ("ERT_CMD_STATE_TIMEOUT on the first token."),
// and the whole text for a folded Details ("" when the sentence already
// says all of it). It reads a chain as the chat page does (package
// errtext, as app.js's firstSentence does), so the tray and the page say a
// failure in the same words.
func errorWords(s string) (sentence, detail string) {
	s = strings.Join(strings.Fields(s), " ")
	if s == "" {
		return "", ""
	}
	sentence = errtext.Sentence(errtext.LastPart(s))
	if strings.TrimSuffix(sentence, ".") != strings.TrimSuffix(errtext.Sentence(s), ".") {
		detail = s
	}
	return sentence, detail
}
