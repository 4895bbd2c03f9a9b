package web

import (
	"strings"
	"testing"
)

// TestExportFileNameComesFromTheTitle: the export is saved under the
// chat's title made safe, the id only when nothing of the title is left.
func TestExportFileNameComesFromTheTitle(t *testing.T) {
	long := strings.Repeat("é", 120)
	for _, c := range []struct {
		title, want string
	}{
		{"Tiles for the kitchen", "Tiles for the kitchen.md"},
		{"a/b\\c:d*e?f\"g<h>i|j", "a b c d e f g h i j.md"},
		{"line one\nline\ttwo\x00\x07", "line one line two.md"},
		{"../../etc/passwd", "etc passwd.md"},
		{"  ...hidden. ", "hidden.md"},
		{"CON", "npuchat-conversation-44.md"},
		{"nul.txt", "npuchat-conversation-44.md"},
		{"Com1", "npuchat-conversation-44.md"},
		{"CONsole games", "CONsole games.md"},
		{"", "npuchat-conversation-44.md"},
		{"/// ..", "npuchat-conversation-44.md"},
		{"日本語のチャット", "日本語のチャット.md"},
		{long, strings.Repeat("é", maxFileNameRunes) + ".md"},
	} {
		if got := exportFileName(c.title, 44, "md"); got != c.want {
			t.Errorf("exportFileName(%q) = %q, want %q", c.title, got, c.want)
		}
	}
}
