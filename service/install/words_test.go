package install_test

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/npuchat/npuchat/internal/golden"
	"github.com/npuchat/npuchat/service/install"
	"github.com/npuchat/npuchat/service/install/installtest"
)

// TestWordsGolden: every kind of status in words (testdata/words.golden;
// -update rewrites it after a deliberate change of wording).
func TestWordsGolden(t *testing.T) {
	sts := installtest.Statuses()
	names := make([]string, 0, len(sts))
	for n := range sts {
		names = append(names, n)
	}
	slices.Sort(names)
	var b strings.Builder
	for _, n := range names {
		w := sts[n].Words()
		fmt.Fprintf(&b, "== %s\ntitle:   %s\nline:    %s\nfile:    %s\nproblem: %s\ndetail:  %s\naction:  %s\n\n", n, w.Title, w.Line, w.File, w.Problem, w.Detail, w.Action)
	}
	golden.AssertString(t, filepath.Join("testdata", "words.golden"), b.String())
}

// TestWordsRules: the rules the words keep, whatever the status.
func TestWordsRules(t *testing.T) {
	for name, st := range installtest.Statuses() {
		w := st.Words()
		all := strings.Join([]string{w.Title, w.Line, w.File, w.Problem, w.Action}, "\n")
		// Plain text: no Markdown backticks, no command lines to type
		// where the app has a button.
		if strings.ContainsAny(all, "`") || strings.Contains(all, "npuchat ") || strings.Contains(all, "--flm-root") {
			t.Errorf("%s: %q", name, all)
		}
		switch st.State {
		case install.StateFailed:
			// The sentence is short and first; the detail is the whole
			// error, never cut.
			if w.Problem == "" || len(w.Problem) > 200 || w.Detail != st.Failure.Detail {
				t.Errorf("%s: problem %q, detail %q", name, w.Problem, w.Detail)
			}
			if want := map[bool]string{true: "Resume", false: "Retry"}[st.OverallBytes > 0 || st.Earlier > 0]; w.Action != want {
				t.Errorf("%s: action %q, want %q", name, w.Action, want)
			}
		case install.StateRunning, install.StateDone:
			if w.Action != "" {
				t.Errorf("%s: action %q while running or done", name, w.Action)
			}
		}
	}
}

// TestStatusJSONCarriesItsWords: the page reads the words from the
// status's JSON, and the JSON reads back as the same status.
func TestStatusJSONCarriesItsWords(t *testing.T) {
	for name, st := range installtest.Statuses() {
		b, err := json.Marshal(st)
		if err != nil {
			t.Fatal(err)
		}
		var got struct {
			Words install.Words `json:"words"`
		}
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatal(err)
		}
		if got.Words != st.Words() {
			t.Errorf("%s: JSON words %+v, want %+v", name, got.Words, st.Words())
		}
		var back install.Status
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		if back.Words() != st.Words() {
			t.Errorf("%s: read back as %+v", name, back)
		}
	}
}
