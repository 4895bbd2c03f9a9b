package web_test

import (
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/npuchat/npuchat/history"
	"github.com/npuchat/npuchat/service"
	"github.com/npuchat/npuchat/service/backend"
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

// TestSchemaThatCannotFitIsRefused (issue 38, item 8): a JSON schema
// with minLength 1e9 was accepted and ran to max_tokens, its answer cut
// and invalid. A schema whose smallest document cannot fit in max_tokens
// (or the context) is a 400 naming the keyword, a response format's or
// a forced tool call's; so is one nested without end. Schemas that fit
// run as before.
func TestSchemaThatCannotFitIsRefused(t *testing.T) {
	ts := startServer(t, fake.Options{Capabilities: []string{backend.CapCompletion, backend.CapJSON, backend.CapTools}, Reply: func(*backend.Request) string { return `{"a": "xyz"}` }},
		web.Options{}, service.Options{})
	nested := strings.Repeat(`{"type": "array", "items": `, 150) + `{"type": "string"}` + strings.Repeat(`}`, 150)
	for _, c := range []struct {
		name, schema string
		maxTokens    int // 0: none (the context, 4096, bounds the answer)
		status       int
		names        string
	}{
		{"minLength 1e9", `{"type": "string", "minLength": 1e9}`, 100, 400, "#/minLength"},
		{"minLength 1e9 without max_tokens", `{"type": "object", "properties": {"a": {"type": "string", "minLength": 1e9}}, "required": ["a"]}`, 0, 400, "#/properties/a/minLength"},
		{"minItems of minLength", `{"type": "array", "minItems": 1000, "items": {"type": "string", "minLength": 100}}`, 1000, 400, "#/minItems"},
		{"huge minItems", `{"type": "object", "properties": {"a": {"type": "array", "minItems": 1e15, "items": {"type": "integer"}}}, "required": ["a"]}`, 0, 400, "minItems"},
		{"through a $ref", `{"$defs": {"big": {"type": "string", "minLength": 999999}}, "type": "object", "properties": {"a": {"$ref": "#/$defs/big"}}, "required": ["a"]}`, 0, 400, "minLength"},
		{"every alternative too large", `{"anyOf": [{"type": "string", "minLength": 900000}, {"type": "array", "minItems": 900000}]}`, 0, 400, "minLength"},
		{"nested without end", nested, 100, 400, "nests"},
		{"fits", `{"type": "object", "properties": {"a": {"type": "string", "minLength": 3}}, "required": ["a"]}`, 100, 200, ""},
		{"fits in the bound", `{"type": "string", "minLength": 6000}`, 100, 200, ""},
		{"optional large property", `{"type": "object", "properties": {"a": {"type": "string", "minLength": 1e9}}}`, 100, 200, ""},
		{"one small alternative", `{"anyOf": [{"type": "string", "minLength": 1e9}, {"type": "null"}]}`, 100, 200, ""},
		{"huge maxLength", `{"type": "string", "maxLength": 1e9}`, 100, 200, ""},
		{"recursive $ref", `{"$defs": {"n": {"type": "object", "properties": {"next": {"$ref": "#/$defs/n"}}}}, "$ref": "#/$defs/n"}`, 100, 200, ""},
	} {
		mt := ""
		if c.maxTokens > 0 {
			mt = fmt.Sprintf(`, "max_tokens": %d`, c.maxTokens)
		}
		resp, body := do(t, "POST", ts.URL+"/v1/chat/completions", `{"model": "minicpm5:2b", "messages": [{"role": "user", "content": "hi"}]`+mt+
			`, "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": `+c.schema+`}}}`)
		if resp.StatusCode != c.status || !strings.Contains(body, c.names) {
			t.Errorf("%s: %d %s; want %d naming %q", c.name, resp.StatusCode, body, c.status, c.names)
		}
		if c.status == 400 && !strings.Contains(body, "response_format") {
			t.Errorf("%s: the error does not name response_format: %s", c.name, body)
		}
	}
	// A forced tool call is held to its parameters' schema the same way.
	huge := `{"type": "function", "function": {"name": "huge", "parameters": {"type": "object", "properties": {"a": {"type": "string", "minLength": 1e9}}, "required": ["a"]}}}`
	small := `{"type": "function", "function": {"name": "small", "parameters": {"type": "object", "properties": {"a": {"type": "string"}}}}}`
	for _, c := range []struct {
		name, tools, choice string
		status              int
	}{
		{"required, one tool too large", "[" + huge + "]", `"required"`, 400},
		{"the large function named", "[" + small + "," + huge + "]", `{"type": "function", "function": {"name": "huge"}}`, 400},
		{"required, another tool fits", "[" + huge + "," + small + "]", `"required"`, 200},
		{"auto", "[" + huge + "]", `"auto"`, 200},
	} {
		resp, body := do(t, "POST", ts.URL+"/v1/chat/completions", `{"model": "minicpm5:2b", "max_tokens": 100, "messages": [{"role": "user", "content": "hi"}], "tools": `+c.tools+`, "tool_choice": `+c.choice+`}`)
		if resp.StatusCode != c.status || c.status == 400 && (!strings.Contains(body, "function.parameters") || !strings.Contains(body, "minLength")) {
			t.Errorf("tools, %s: %d %s; want %d", c.name, resp.StatusCode, body, c.status)
		}
	}
	// Ollama's format is the same check, under its own name.
	resp, body := do(t, "POST", ts.URL+"/api/chat", `{"model": "minicpm5:2b", "stream": false, "messages": [{"role": "user", "content": "hi"}], "options": {"num_predict": 50}, "format": {"type": "string", "minLength": 1e9}}`)
	if resp.StatusCode != 400 || !strings.Contains(body, "format") || !strings.Contains(body, "minLength") {
		t.Errorf("Ollama format with minLength 1e9: %d %s", resp.StatusCode, body)
	}
}

// TestAnswerThatCannotStartSaysTheMessageStayed: when the message cannot
// be taken back either (here another program holds the history's write
// lock), the error says the message is in the chat, and it is.
func TestAnswerThatCannotStartSaysTheMessageStayed(t *testing.T) {
	path := filepath.Join(t.TempDir(), "history.db")
	var (
		full    atomic.Bool
		lockErr error
		lock    *sql.Conn
	)
	ctx := context.Background()
	other, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Close() })
	h := history.NewHandle(path, history.Options{BusyTimeout: 20 * time.Millisecond, OpenJournal: func(p string) (history.JournalFile, error) {
		if full.Load() {
			if lock == nil {
				// Another program takes the write lock as the disk fills.
				if lock, lockErr = other.Conn(ctx); lockErr == nil {
					_, lockErr = lock.ExecContext(ctx, "BEGIN IMMEDIATE")
				}
			}
			return nil, &os.PathError{Op: "open", Path: p, Err: syscall.ENOSPC}
		}
		return os.OpenFile(p, os.O_CREATE|os.O_TRUNC|os.O_WRONLY|os.O_APPEND, 0o600)
	}})
	t.Cleanup(func() { h.Close() })
	ts := startServer(t, fake.Options{}, web.Options{History: h}, service.Options{})
	_, body := do(t, "POST", ts.URL+"/api/conversations", `{}`)
	c := decodeJSON[history.Conversation](t, body)
	messages := fmt.Sprintf("%s/api/conversations/%d/messages", ts.URL, c.ID)
	full.Store(true)
	resp, body := do(t, "POST", messages, `{"content": "kept"}`)
	if lockErr != nil {
		t.Fatalf("take the lock: %v", lockErr)
	}
	lock.ExecContext(ctx, "ROLLBACK")
	lock.Close()
	if resp.StatusCode < 400 || !strings.Contains(body, "Your message is stored in the chat but has no answer") {
		t.Errorf("%d %s; want an error that says the message stayed", resp.StatusCode, body)
	}
	_, list := do(t, "GET", messages, "")
	msgs := decodeJSON[struct{ Messages []history.Message }](t, list).Messages
	if len(msgs) == 0 || msgs[0].Content != "kept" {
		t.Errorf("the chat holds %+v; the error said the message stayed", msgs)
	}
}
