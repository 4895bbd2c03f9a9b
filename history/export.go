package history

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// Export is a conversation with its messages, as JSON export writes it.
type Export struct {
	Conversation
	Messages []Message `json:"messages"`
}

// Load returns a conversation with its messages.
func (s *Store) Load(ctx context.Context, id int64) (*Export, error) {
	c, err := s.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	msgs, err := s.Messages(ctx, id)
	if err != nil {
		return nil, err
	}
	return &Export{Conversation: *c, Messages: msgs}, nil
}

// WriteJSON writes the export as indented JSON.
func (e *Export) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(e)
}

// WriteMarkdown writes the conversation as a Markdown document: the
// title, the system prompt, then each message under its speaker's name.
// Message text is written as it is (it is Markdown already); a cut
// answer is marked.
func (e *Export) WriteMarkdown(w io.Writer) error {
	var b strings.Builder
	title := e.Title
	if title == "" {
		title = "Chat"
	}
	fmt.Fprintf(&b, "# %s\n\n", title)
	fmt.Fprintf(&b, "_Exported from NPU Chat; started %s._\n\n", e.CreatedAt.Format("2006-01-02 15:04 MST"))
	if e.SystemPrompt != "" {
		fmt.Fprintf(&b, "**System prompt:**\n\n%s\n\n", quote(e.SystemPrompt))
	}
	for _, m := range e.Messages {
		who := "You"
		if m.Role == "assistant" {
			who = "Assistant"
			if m.Stats != nil && m.Stats.Model != "" {
				who += " (" + m.Stats.Model + ")"
			}
		}
		fmt.Fprintf(&b, "## %s\n\n%s\n\n", who, strings.TrimRight(m.Content, "\n"))
		if m.Cut {
			fmt.Fprintf(&b, "_(answer cut: %s)_\n\n", m.CutReason)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// quote makes text a Markdown block quote.
func quote(s string) string {
	return "> " + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n> ")
}
