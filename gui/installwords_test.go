package gui

import (
	"strings"
	"testing"

	"github.com/npuchat/npuchat/service/install"
	"github.com/npuchat/npuchat/service/install/installtest"
)

// TestTrayInstallWordsAreTheStatusWords: for every kind of status the
// setup window and the menu say install.Status.Words and nothing else,
// the words the page and npuchat install show for the same status
// (tests/page and cmd/trayapp check those); a failure's detail is not
// in the line (it is folded under Details).
func TestTrayInstallWordsAreTheStatusWords(t *testing.T) {
	for name, st := range installtest.Statuses() {
		w := st.Words()
		var want []string
		for _, s := range []string{w.Title, w.Problem, w.Line, w.File} {
			if s != "" {
				want = append(want, s)
			}
		}
		if got := installText(st); got != strings.Join(want, "\n") {
			t.Errorf("%s: the setup window says\n%s\nthe words are\n%s", name, got, strings.Join(want, "\n"))
		}
		line := installLine(st)
		if !strings.HasPrefix(line, strings.TrimSuffix(w.Title, "…")) || (w.Problem != "" && !strings.HasSuffix(line, w.Problem)) ||
			(st.State == install.StateRunning && !strings.HasSuffix(line, w.Line)) {
			t.Errorf("%s: the menu says %q; the words are %+v", name, line, w)
		}
		if w.Detail != "" && strings.Contains(installText(st)+line, w.Detail) {
			t.Errorf("%s: the detail is in the tray's line", name)
		}
	}
}
