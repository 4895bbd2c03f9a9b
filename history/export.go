package history

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
)

// Export is a conversation with its messages, as JSON export writes it.
type Export struct {
	Conversation
	// Messages are the shown path, first to last.
	Messages []Message `json:"messages"`
	// OtherVersions are the messages of the other versions (earlier
	// answers, questions before an edit and what followed them), oldest
	// first; each names the message it follows (parent_id).
	OtherVersions []Message `json:"other_versions,omitempty"`
}

// Load returns a conversation with its messages, every version.
func (s *Store) Load(ctx context.Context, id int64) (*Export, error) {
	c, err := s.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	t, err := s.tree(ctx, id)
	if err != nil {
		return nil, err
	}
	path := t.path()
	return &Export{Conversation: *c, Messages: path, OtherVersions: t.others(path)}, nil
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
		fmt.Fprintf(&b, "## %s\n\n", who)
		if n := len(m.Versions); n > 1 {
			fmt.Fprintf(&b, "_(version %d of %d; the .json export has every version)_\n\n", slices.Index(m.Versions, m.ID)+1, n)
		}
		if m.Thinking != "" {
			fmt.Fprintf(&b, "<details><summary>Thinking</summary>\n\n%s\n\n</details>\n\n", quote(m.Thinking))
		}
		fmt.Fprintf(&b, "%s\n\n", strings.TrimRight(m.Content, "\n"))
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
