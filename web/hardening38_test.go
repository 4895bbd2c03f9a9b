package web_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/npuchat/npuchat/history"
	"github.com/npuchat/npuchat/service"
	"github.com/npuchat/npuchat/service/backend/fake"
	"github.com/npuchat/npuchat/web"
)

// TestKeepAliveIsParsedStrictly (issue 38, item 8): keep_alive "NaN"
// became a negative duration, "never unload"; so did infinities and
// numbers too large for a duration. They are a 400 that says what is
// allowed; Ollama's own values keep their meaning (a negative one keeps
// the model loaded).
func TestKeepAliveIsParsedStrictly(t *testing.T) {
	ts := startServer(t, fake.Options{}, web.Options{}, service.Options{})
	for _, c := range []struct {
		value  string
		status int
	}{
		{`"NaN"`, 400}, {`"nan"`, 400}, {`"Inf"`, 400}, {`"+Inf"`, 400}, {`"-Inf"`, 400}, {`"infinity"`, 400},
		{`"1e300"`, 400}, {`1e300`, 400}, {`-1e300`, 400}, {`1e400`, 400}, {`"1e18"`, 400}, {`1e10`, 400},
		{`"300000h"`, 400}, {`"-300000h"`, 400}, {`"soon"`, 400}, {`true`, 400}, {`[]`, 400},
		{`"5m"`, 200}, {`300`, 200}, {`"300"`, 200}, {`0.5`, 200}, {`-1`, 200}, {`"-1"`, 200}, {`-5`, 200}, {`"-1m"`, 200}, {`"24h"`, 200}, {`0`, 200},
	} {
		resp, body := do(t, "POST", ts.URL+"/api/generate", `{"model": "minicpm5:2b", "keep_alive": `+c.value+`}`)
		if resp.StatusCode != c.status {
			t.Errorf("keep_alive %s: %d %s, want %d", c.value, resp.StatusCode, body, c.status)
		}
		if c.status == 400 && !strings.Contains(body, "keep_alive") {
			t.Errorf("keep_alive %s: the error does not name keep_alive: %s", c.value, body)
		}
	}
}

// TestAnswerThatCannotStartTakesTheMessageBack (issue 38, item 8): on a
// full disk the user's message was stored while the client got an
// error (and the page, which keeps a refused message in its box, sent it
// again). Now the store and the answer agree: the error says the message
// was not sent, and it is not in the history; an edit likewise.
func TestAnswerThatCannotStartTakesTheMessageBack(t *testing.T) {
	var full atomic.Bool
	h := history.NewHandle(filepath.Join(t.TempDir(), "history.db"), history.Options{OpenJournal: func(p string) (history.JournalFile, error) {
		if full.Load() {
			return nil, &os.PathError{Op: "open", Path: p, Err: syscall.ENOSPC}
		}
		return os.OpenFile(p, os.O_CREATE|os.O_TRUNC|os.O_WRONLY|os.O_APPEND, 0o600)
	}})
	t.Cleanup(func() { h.Close() })
	ts := startServer(t, fake.Options{}, web.Options{History: h}, service.Options{})
	_, body := do(t, "POST", ts.URL+"/api/conversations", `{}`)
	c := decodeJSON[history.Conversation](t, body)
	messages := fmt.Sprintf("%s/api/conversations/%d/messages", ts.URL, c.ID)
	stored := func() []history.Message {
		_, body := do(t, "GET", messages, "")
		return decodeJSON[struct{ Messages []history.Message }](t, body).Messages
	}
	stream(t, context.Background(), messages, `{"content": "first"}`, nil)
	first := stored()
	if len(first) != 2 {
		t.Fatalf("the first answer: %+v", first)
	}
	full.Store(true)
	for _, tc := range []struct{ name, body string }{
		{"message", `{"content": "second"}`},
		{"edit", fmt.Sprintf(`{"content": "first, edited", "edit": %d}`, first[0].ID)},
	} {
		resp, body := do(t, "POST", messages, tc.body)
		if resp.StatusCode != http.StatusInsufficientStorage || !strings.Contains(body, "disk is full") || !strings.Contains(body, "Your "+tc.name+" was not sent") {
			t.Errorf("%s on a full disk: %d %s", tc.name, resp.StatusCode, body)
		}
		if got := stored(); len(got) != 2 || got[0].Content != "first" || got[1].ID != first[1].ID {
			t.Errorf("after the refused %s the chat shows %+v; want the first question and answer only", tc.name, got)
		}
	}
	full.Store(false)
	stream(t, context.Background(), messages, `{"content": "second"}`, nil)
	if got := stored(); len(got) != 4 || got[2].Content != "second" {
		t.Errorf("with room again: %+v", got)
	}
}
