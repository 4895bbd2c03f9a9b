package pages

import (
	"fmt"
	"strconv"

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

// statsLine is the line under an answer: speed, first token, engine,
// fallback, context.
func statsLine(m history.Message) string {
	st := m.Stats
	if st == nil {
		return ""
	}
	s := ""
	if st.TokensPerSecond > 0 {
		s += fmt.Sprintf("%.1f tok/s · ", st.TokensPerSecond)
	}
	if st.TTFTMillis > 0 {
		s += fmt.Sprintf("first token %d ms · ", st.TTFTMillis)
	}
	s += EngineName(st.Engine)
	if st.ContextLength > 0 {
		s += fmt.Sprintf(" · context %d / %d", st.PromptTokens+st.CompletionTokens, st.ContextLength)
	}
	return s
}

// EngineName names a backend kind for people.
func EngineName(kind string) string {
	switch kind {
	case "npu":
		return "NPU (FastFlowLM)"
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
	default:
		return "Interrupted (the server stopped)"
	}
}
