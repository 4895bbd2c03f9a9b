package page

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/npuchat/npuchat/service/install"
	"github.com/npuchat/npuchat/service/install/installtest"
)

// installView is what the install view shows, read from the page.
type installView struct {
	Title, Line, File, Problem, Kept, Detail, Button string
	ErrorShown, DetailShown, DetailOpen, ButtonShown bool
}

const readInstallView = `(() => { const $ = (id) => document.getElementById(id);
	return {Title: $('install-title').textContent, Line: $('install-progress-text').textContent,
		File: $('install-file-text').hidden ? '' : $('install-file-text').textContent,
		Problem: $('install-problem').textContent, Kept: $('install-kept').hidden ? '' : $('install-kept').textContent,
		Detail: $('install-detail').textContent, Button: $('install').textContent,
		ErrorShown: !$('install-error').hidden, DetailShown: !$('install-detail-box').hidden && $('install-detail').textContent !== '',
		DetailOpen: $('install-detail-box').open, ButtonShown: !$('install').hidden} })()`

// TestFirstRunWithTheHubUnreachable: a fresh machine that cannot reach
// Hugging Face. The install fails with its cause in a sentence, the whole
// error folded under Details (not cut), Retry (nothing was downloaded),
// no command line to type, and a line in the Log view.
func TestFirstRunWithTheHubUnreachable(t *testing.T) {
	env := installtest.Env(nil, t.TempDir()) // nothing listens at its hub
	env["NPUCHAT_ENGINE"] = "cpu"
	env["PATH"] = "/usr/bin:/bin"
	srv := serve(t, env)
	b := newBrowser(t)
	b.open(srv.URL + "/")
	b.waitJS(`!document.getElementById('view-install').hidden && !document.querySelector('[data-testid=install]').hidden`, 20*time.Second)
	b.run(chromedp.Click("[data-testid=install]", chromedp.ByQuery))
	b.waitJS(`!document.getElementById('install-error').hidden`, 120*time.Second)

	code, body := apiCall(t, "GET", srv.URL+"/api/models/minicpm5:2b/install", "", "")
	var st install.Status
	if err := json.Unmarshal([]byte(body), &st); code != http.StatusOK || err != nil {
		t.Fatalf("install status: %d %v\n%s", code, err, body)
	}
	w := st.Words()
	got := eval[installView](b, readInstallView)
	if st.State != install.StateFailed || st.Failure == nil {
		t.Fatalf("status after the failure: %s", body)
	}
	// The cause in words, first; the detail the whole error, folded.
	if !strings.HasPrefix(got.Problem, "NPU Chat cannot reach Hugging Face at http://127.0.0.1:1.") || got.Problem != w.Problem {
		t.Errorf("the problem shown %q; the status's words %q", got.Problem, w.Problem)
	}
	if got.Detail != st.Failure.Detail || !strings.Contains(got.Detail, "127.0.0.1:1") || !got.DetailShown || got.DetailOpen {
		t.Errorf("the detail: shown %v, open %v, %q; the status's %q", got.DetailShown, got.DetailOpen, got.Detail, st.Failure.Detail)
	}
	if got.Button != "Retry" || !got.ButtonShown || got.Kept != "Nothing was downloaded." || got.Title != w.Title {
		t.Errorf("after a failure that downloaded nothing: %+v", got)
	}
	text := eval[string](b, `document.getElementById('view-install').innerText`)
	if strings.Contains(text, "`") || strings.Contains(text, "npuchat ") {
		t.Errorf("the install view offers a command line or shows Markdown: %q", text)
	}
	b.shot("install-unreachable")
	b.run(chromedp.Click("#install-detail-box summary", chromedp.ByQuery))
	b.waitJS(`document.getElementById('install-detail-box').open`, 5*time.Second)
	b.shot("install-unreachable-details")

	// The Log view has the failed install, its sentence and its cause.
	b.run(chromedp.Click("#install-error [data-view=logs]", chromedp.ByQuery))
	b.waitJS(`document.getElementById('log-lines').textContent.includes('install failed: NPU Chat cannot reach Hugging Face')`, 10*time.Second)
	if log := eval[string](b, `document.getElementById('log-lines').textContent`); !strings.Contains(log, "127.0.0.1:1") {
		t.Errorf("the log line lacks the cause:\n%s", log)
	}
	b.shot("install-unreachable-log")
}

// TestInstallWordsOnThePageAreTheStatusWords: for every kind of status
// the page shows exactly install.Status.Words, the words the tray and
// npuchat install use (they call the same function): the page gets the
// status's JSON, as from GET …/install or /api/events, and words nothing.
func TestInstallWordsOnThePageAreTheStatusWords(t *testing.T) {
	srv := serve(t, installtest.Env(nil, t.TempDir()))
	b := newBrowser(t)
	b.open(srv.URL + "/")
	b.waitJS(`window.NPUInstall && document.getElementById('install-title').textContent !== ''`, 20*time.Second)
	// the page's own status requests are answered before statuses are
	// shown to it (a late answer showed the real status over one)
	b.waitIdle()
	sts := installtest.Statuses()
	names := make([]string, 0, len(sts))
	for n := range sts {
		names = append(names, n)
	}
	slices.Sort(names)
	// Done last: a finished install sends the page back to the chat.
	names = append(slices.DeleteFunc(names, func(n string) bool { return n == "done" }), "done")
	for _, name := range names {
		st := sts[name]
		if st.Model != "minicpm5:2b" {
			// Another model's install (from the Models view) is not
			// the install view's: TestCatalogInstallsFastFlowLMModel.
			continue
		}
		js, err := json.Marshal(st)
		if err != nil {
			t.Fatal(err)
		}
		b.run(chromedp.Evaluate(fmt.Sprintf(`window.NPUInstall.show(%s)`, js), nil))
		got := eval[installView](b, readInstallView)
		w := st.Words()
		want := installView{Title: w.Title, Line: w.Line, File: w.File, Button: w.Action, ButtonShown: w.Action != ""}
		if st.State == install.StateFailed {
			want.Line, want.Problem, want.Kept, want.Detail = "", w.Problem, w.Line, w.Detail
			want.ErrorShown, want.DetailShown = true, w.Detail != ""
		}
		if !want.ButtonShown {
			want.Button = got.Button // a hidden button's label is not shown
		}
		if !want.ErrorShown {
			got.Problem, got.Kept, got.Detail, got.DetailShown = "", "", "", false
		}
		if got != want {
			t.Errorf("%s: the page shows\n%+v\nthe words are\n%+v", name, got, want)
		}
		if os.Getenv("NPUCHAT_TOUR") != "" || name == "downloading" || name == "failed disk full" {
			b.shot("install-words-" + strings.ReplaceAll(name, " ", "-"))
		}
	}
}
