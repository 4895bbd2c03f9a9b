package pages

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/npuchat/npuchat/errtext"

	"github.com/npuchat/npuchat/history"
)

// Page is what the server knows when it renders the page.
type Page struct {
	Version string
	// Conversations are listed newest first.
	Conversations []history.Conversation
	// Current is the open conversation, nil for a new chat.
	Current *history.Export
	// HistoryProblem is shown as a banner when the history cannot be
	// used or had to be moved aside.
	HistoryProblem string
	// Model is the model the page talks to.
	Model string
	// Open is the conversation in the page's address (/c/{id}) that the
	// server left for the script to load: with an API key the server
	// renders no history, and the script fetches it with the key.
	Open int64
	// Missing is the conversation in the address that is not in the
	// history (/c/99999): the page says so instead of a blank chat.
	Missing int64
}

func convHref(id int64) string { return "/c/" + strconv.FormatInt(id, 10) }

func currentID(p Page) string {
	switch {
	case p.Current != nil:
		return strconv.FormatInt(p.Current.ID, 10)
	case p.Open != 0:
		return strconv.FormatInt(p.Open, 10)
	}
	return ""
}

func isCurrent(p Page, id int64) bool { return p.Current != nil && p.Current.ID == id }

// windowTitle is the page's title: the open chat's, then NPU Chat (as
// app.js's setTitle keeps it).
func windowTitle(p Page) string {
	if p.Current == nil || p.Current.Title == "" {
		return "NPU Chat"
	}
	return p.Current.Title + " – NPU Chat"
}

func titleOf(c history.Conversation) string {
	if c.Title == "" {
		return "New chat"
	}
	return c.Title
}

func boolAttr(b bool) string {
	if b {
		return "true"
	}
	return "false"
}

// statsLine is the line under an answer: speed, how many of its tokens
// were guessed ahead (speculative decoding, when it guessed), first
// token, engine, context, cache.
func statsLine(m history.Message) string {
	st := m.Stats
	if st == nil || st.Engine == "" {
		return "" // no engine answered (yet)
	}
	s := ""
	if st.TokensPerSecond > 0 {
		s += fmt.Sprintf("%.1f tok/s · ", st.TokensPerSecond)
	}
	if st.DraftTokens > 0 {
		s += guessedText(st.DraftAccepted, st.CompletionTokens) + " · "
	}
	if st.TTFTMillis > 0 {
		s += fmt.Sprintf("first token %d ms · ", st.TTFTMillis)
	}
	s += EngineName(st.Engine)
	if st.ContextLength > 0 {
		s += fmt.Sprintf(" · context %d / %d", st.PromptTokens+st.CompletionTokens, st.ContextLength)
	}
	if st.CachedTokens > 0 {
		s += fmt.Sprintf(" · prompt from cache: %s of %s tokens", thousands(st.CachedTokens), thousands(st.PromptTokens))
	}
	return s
}

// guessedText says how many of an answer's tokens were guessed ahead
// and kept (speculative decoding), as app.js's statsText.
func guessedText(accepted, tokens int) string {
	return fmt.Sprintf("%s of %s tokens guessed", thousands(accepted), thousands(tokens))
}

// omittedLine says how many of the chat's oldest messages the model did
// not see ("" when it saw them all), as app.js's omittedText.
func omittedLine(m history.Message) string {
	if m.Stats == nil || m.Stats.OmittedMessages <= 0 {
		return ""
	}
	if m.Stats.OmittedMessages == 1 {
		return "The model did not see the oldest message"
	}
	return fmt.Sprintf("The model did not see the %s oldest messages", thousands(m.Stats.OmittedMessages))
}

// thousands writes n with commas between groups of three digits.
func thousands(n int) string {
	s := fmt.Sprint(n)
	if n < 0 {
		return "-" + thousands(-n)
	}
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// fallbackLine says why the answer did not come from the preferred
// engine ("" when it did).
func fallbackLine(m history.Message) string {
	if m.Stats == nil || m.Stats.Fallback == "" {
		return ""
	}
	return "Answered on the " + EngineName(m.Stats.Engine) + " instead of the NPU: " + errtext.Sentence(errtext.LastPart(withoutCommand(m.Stats.Fallback)))
}

// runCommand is advice to run an npuchat command in a server's message,
// which the page leaves out (it has the NPU check and Install itself),
// as app.js's cleanDetail does.
var runCommand = regexp.MustCompile("(?i)[;,]?\\s*(run|try) [`']?npuchat [^.;)]*")

// withoutCommand is s without advice to run an npuchat command.
func withoutCommand(s string) string { return strings.TrimSpace(runCommand.ReplaceAllString(s, "")) }

// EngineName names a backend kind for people.
func EngineName(kind string) string {
	switch kind {
	case "npu":
		return "NPU (FastFlowLM)"
	case "oflm":
		return "NPU (oflm)"
	case "cpu":
		return "CPU (in-process engine)"
	case "remote":
		return "remote server"
	case "":
		return "unknown engine"
	}
	return kind
}

func roleName(role string) string {
	if role == "user" {
		return "You"
	}
	return "Assistant"
}

func cutText(m history.Message) string {
	switch m.CutReason {
	case history.CutStopped:
		return "Stopped before the end"
	case history.CutFailed:
		return "Cut short by an error"
	case history.CutSwitchedOff:
		return "Cut short: the model was switched off"
	default:
		return "Interrupted (the server stopped)"
	}
}

// versionIndex is m's place among its versions (0 for the first).
func versionIndex(m history.Message) int {
	return max(0, slices.Index(m.Versions, m.ID))
}

// versionAt is the id of the version step places after m (before it
// when negative), or 0 when there is none.
func versionAt(m history.Message, step int) int64 {
	i := versionIndex(m) + step
	if i < 0 || i >= len(m.Versions) {
		return 0
	}
	return m.Versions[i]
}

// lengthLine marks an answer that ended at its length limit (max
// tokens or the context), "" for one that ended by itself.
func lengthLine(m history.Message) string {
	if m.Role != "assistant" || m.Stats == nil || m.Stats.FinishReason != "length" {
		return ""
	}
	return fmt.Sprintf("Stopped at the length limit (%d tokens): raise Max tokens in Chat settings for a longer answer", m.Stats.CompletionTokens)
}
