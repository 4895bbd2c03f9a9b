package web_test

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/npuchat/npuchat/enginekind"
	"github.com/npuchat/npuchat/history"
	"github.com/npuchat/npuchat/service"
	"github.com/npuchat/npuchat/service/backend"
	"github.com/npuchat/npuchat/service/backend/fake"
	"github.com/npuchat/npuchat/service/servicetest"
	"github.com/npuchat/npuchat/web"
)

// startChat starts a server with a history in a temporary folder.
func startChat(t *testing.T, fo fake.Options) (string, *history.Handle) {
	t.Helper()
	h := history.NewHandle(filepath.Join(t.TempDir(), "history.db"), history.Options{})
	t.Cleanup(func() { h.Close() })
	s := startServer(t, fo, web.Options{History: h}, service.Options{})
	return s.URL, h
}

func decodeJSON[T any](t *testing.T, body string) T {
	t.Helper()
	var v T
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		t.Fatalf("%v in %s", err, body)
	}
	return v
}

type sseEvent struct {
	Name string
	Data json.RawMessage
}

// stream posts to a conversation and reads its events.
func stream(t *testing.T, ctx context.Context, url, body string, each func(sseEvent) bool) []sseEvent {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, "POST", url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	withSession(req)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	var out []sseEvent
	sc := bufio.NewScanner(resp.Body)
	var ev sseEvent
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			ev.Name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			ev.Data = json.RawMessage(strings.TrimPrefix(line, "data: "))
		case line == "":
			out = append(out, ev)
			if each != nil && !each(ev) {
				return out
			}
			ev = sseEvent{}
		}
	}
	return out
}

func TestConversationAPI(t *testing.T) {
	url, _ := startChat(t, fake.Options{})
	api := url + "/api/conversations"
	resp, body := do(t, "POST", api, `{"title": "First", "system_prompt": "Be brief.", "temperature": 0.3}`)
	if resp.StatusCode != 201 {
		t.Fatalf("create: %d %s", resp.StatusCode, body)
	}
	first := decodeJSON[history.Conversation](t, body)
	_, body = do(t, "POST", api, `{}`)
	second := decodeJSON[history.Conversation](t, body)
	// The history keeps times to the millisecond: the answer below must
	// come in a later one than the second chat's creation for "the chat
	// just answered is on top" to be defined (on a fast run both fell in
	// the same millisecond and the newer id won the tie).
	for created := time.Now().UnixMilli(); time.Now().UnixMilli() <= created; {
		runtime.Gosched()
	}

	// Send a message: the answer streams and is stored.
	evs := stream(t, context.Background(), fmt.Sprintf("%s/%d/messages", api, first.ID), `{"content": "tell me about tiles"}`, nil)
	var names, text []string
	for _, e := range evs {
		names = append(names, e.Name)
		if e.Name == "token" {
			text = append(text, decodeJSON[map[string]string](t, string(e.Data))["text"])
		}
	}
	if names[0] != "user" || names[1] != "start" || names[len(names)-1] != "done" {
		t.Fatalf("events %v", names)
	}
	done := decodeJSON[history.Message](t, string(evs[len(evs)-1].Data))
	if done.Content != strings.Join(text, "") || done.Content != "echo: tell me about tiles" || done.Cut || done.Stats == nil || done.Stats.Engine != "cpu" {
		t.Fatalf("answer %+v, streamed %q", done, strings.Join(text, ""))
	}
	if done.Stats.ContextLength != 4096 || done.Stats.CompletionTokens == 0 {
		t.Errorf("stats: %+v", done.Stats)
	}

	// The list is newest first: the chat just answered is on top.
	_, body = do(t, "GET", api, "")
	list := decodeJSON[struct{ Conversations []history.Conversation }](t, body).Conversations
	if len(list) != 2 || list[0].ID != first.ID || list[1].ID != second.ID {
		t.Fatalf("list %+v", list)
	}
	// Search, rename, export, delete.
	_, body = do(t, "GET", api+"?q=tiles", "")
	if found := decodeJSON[struct{ Conversations []history.Conversation }](t, body).Conversations; len(found) != 1 || found[0].ID != first.ID {
		t.Fatalf("search: %s", body)
	}
	resp, body = do(t, "PATCH", fmt.Sprintf("%s/%d", api, second.ID), `{"title": "Renamed", "max_tokens": 50}`)
	if c := decodeJSON[history.Conversation](t, body); resp.StatusCode != 200 || c.Title != "Renamed" || c.MaxTokens == nil || *c.MaxTokens != 50 {
		t.Fatalf("rename: %d %s", resp.StatusCode, body)
	}
	resp, body = do(t, "GET", fmt.Sprintf("%s/%d/export?format=md", api, first.ID), "")
	if resp.StatusCode != 200 || !strings.Contains(body, "# First") || !strings.Contains(body, "echo: tell me about tiles") ||
		!strings.Contains(resp.Header.Get("Content-Disposition"), "attachment") {
		t.Fatalf("export md: %d %s", resp.StatusCode, body)
	}
	_, body = do(t, "GET", fmt.Sprintf("%s/%d/export?format=json", api, first.ID), "")
	if e := decodeJSON[history.Export](t, body); len(e.Messages) != 2 || e.SystemPrompt != "Be brief." {
		t.Fatalf("export json: %s", body)
	}
	if resp, _ := do(t, "DELETE", fmt.Sprintf("%s/%d", api, second.ID), ""); resp.StatusCode != 204 {
		t.Fatalf("delete: %d", resp.StatusCode)
	}
	if resp, _ := do(t, "GET", fmt.Sprintf("%s/%d", api, second.ID), ""); resp.StatusCode != 404 {
		t.Fatalf("get deleted: %d", resp.StatusCode)
	}
}

func TestConversationBadInput(t *testing.T) {
	url, _ := startChat(t, fake.Options{})
	api := url + "/api/conversations"
	_, body := do(t, "POST", api, `{}`)
	c := decodeJSON[history.Conversation](t, body)
	cases := []struct {
		method, path, body string
		status             int
		want               string
	}{
		{"GET", "/1%20OR%201=1", "", 400, "not a conversation or message id"},
		{"GET", "/-3", "", 400, "not a conversation or message id"},
		{"GET", "/999", "", 404, "conversation 999"},
		{"POST", "", `{"temperature": 9}`, 400, "temperature must be between 0 and 2"},
		{"POST", "", `{"title": 5}`, 400, "title"},
		{"POST", fmt.Sprintf("/%d/messages", c.ID), `{"content": "  "}`, 400, "empty"},
		{"POST", fmt.Sprintf("/%d/messages", c.ID), `{"edit": 4242, "content": "x"}`, 404, "no user message 4242"},
		{"POST", fmt.Sprintf("/%d/messages", c.ID), `{"regenerate": true}`, 400, "no message to answer again"},
		{"GET", fmt.Sprintf("/%d/export?format=pdf", c.ID), "", 400, "format must be md or json"},
		{"PATCH", fmt.Sprintf("/%d", c.ID), `{"clear": ["everything"]}`, 400, "not a setting"},
	}
	for _, tc := range cases {
		resp, body := do(t, tc.method, api+tc.path, tc.body)
		if resp.StatusCode != tc.status || !strings.Contains(body, tc.want) {
			t.Errorf("%s %s %s: %d %s, want %d with %q", tc.method, tc.path, tc.body, resp.StatusCode, body, tc.status, tc.want)
		}
	}
	// The same Host and Origin checks as the rest of the API.
	if resp, _ := do(t, "GET", api, "", "Origin", "https://evil.example"); resp.StatusCode != 403 {
		t.Errorf("foreign origin: %d", resp.StatusCode)
	}
	if resp, _ := do(t, "GET", api, "", "Host", "evil.example"); resp.StatusCode != 403 {
		t.Errorf("foreign host: %d", resp.StatusCode)
	}
}

func TestStoppedAnswerIsStoredCut(t *testing.T) {
	url, h := startChat(t, fake.Options{TokenDelay: 20 * time.Millisecond, Reply: func(*backendRequest) string {
		return strings.Repeat("word ", 200)
	}})
	_, body := do(t, "POST", url+"/api/conversations", `{}`)
	c := decodeJSON[history.Conversation](t, body)
	ctx, cancel := context.WithCancel(context.Background())
	var got strings.Builder
	tokens := 0
	stream(t, ctx, fmt.Sprintf("%s/api/conversations/%d/messages", url, c.ID), `{"content": "go on"}`, func(e sseEvent) bool {
		if e.Name == "token" {
			got.WriteString(decodeJSON[map[string]string](t, string(e.Data))["text"])
			if tokens++; tokens == 5 {
				cancel() // the stop button: the page aborts the request
				return false
			}
		}
		return true
	})
	st, _ := h.Store(context.Background())
	var msgs []history.Message
	waitUntil(t, "the stopped answer to be stored", func() bool {
		msgs, _ = st.Messages(context.Background(), c.ID)
		return len(msgs) == 2 && msgs[1].CutReason == history.CutStopped
	})
	if len(msgs) != 2 || !msgs[1].Cut || msgs[1].CutReason != history.CutStopped {
		t.Fatalf("after stop: %+v", msgs)
	}
	if !strings.HasPrefix(msgs[1].Content, got.String()) || len(msgs[1].Content) > len(got.String())+len("word ")*2 {
		t.Fatalf("stored %q, shown %q", msgs[1].Content, got.String())
	}
}

func TestRegenerateAndEdit(t *testing.T) {
	url, _ := startChat(t, fake.Options{})
	_, body := do(t, "POST", url+"/api/conversations", `{}`)
	c := decodeJSON[history.Conversation](t, body)
	msgsURL := fmt.Sprintf("%s/api/conversations/%d/messages", url, c.ID)
	stream(t, context.Background(), msgsURL, `{"content": "one"}`, nil)
	stream(t, context.Background(), msgsURL, `{"content": "two"}`, nil)
	list := func() []history.Message {
		_, body := do(t, "GET", msgsURL, "")
		return decodeJSON[struct{ Messages []history.Message }](t, body).Messages
	}
	before := list()
	stream(t, context.Background(), msgsURL, `{"regenerate": true}`, nil)
	after := list()
	if len(after) != 4 || after[3].ID == before[3].ID || after[3].Content != "echo: two" || after[2].ID != before[2].ID {
		t.Fatalf("regenerate: before %+v after %+v", before, after)
	}
	// The earlier answer is kept as version 1 of 2.
	if v := after[3].Versions; len(v) != 2 || v[0] != before[3].ID || v[1] != after[3].ID {
		t.Fatalf("regenerate kept no version: %+v", after[3])
	}
	// Editing the first message shows the edit and its answer; the old
	// line stays as version 1.
	stream(t, context.Background(), msgsURL, fmt.Sprintf(`{"edit": %d, "content": "uno"}`, after[0].ID), nil)
	edited := list()
	if len(edited) != 2 || edited[0].Content != "uno" || edited[1].Content != "echo: uno" || len(edited[0].Versions) != 2 {
		t.Fatalf("edit: %+v", edited)
	}
	// PUT …/current shows the first version again, with its newest answer.
	resp, body := do(t, "PUT", fmt.Sprintf("%s/api/conversations/%d/current", url, c.ID), fmt.Sprintf(`{"message_id": %d}`, after[0].ID))
	if resp.StatusCode != 200 {
		t.Fatalf("select: %d %s", resp.StatusCode, body)
	}
	shown := decodeJSON[history.Export](t, body)
	if len(shown.Messages) != 4 || shown.Messages[0].Content != "one" || shown.Messages[3].ID != after[3].ID || len(shown.OtherVersions) != 3 {
		t.Fatalf("after selecting version 1: %+v", shown)
	}
	if got := list(); len(got) != 4 || got[3].ID != after[3].ID {
		t.Fatalf("the selection is not kept: %+v", got)
	}
	// Every version is exported.
	_, body = do(t, "GET", fmt.Sprintf("%s/api/conversations/%d/export?format=json", url, c.ID), "")
	if e := decodeJSON[history.Export](t, body); len(e.Messages)+len(e.OtherVersions) != 7 {
		t.Fatalf("the export holds %d+%d messages, want 7", len(e.Messages), len(e.OtherVersions))
	}
	// Another chat's message is no version of this one.
	_, body = do(t, "POST", url+"/api/conversations", `{}`)
	other := decodeJSON[history.Conversation](t, body)
	if resp, body := do(t, "PUT", fmt.Sprintf("%s/api/conversations/%d/current", url, other.ID), fmt.Sprintf(`{"message_id": %d}`, after[0].ID)); resp.StatusCode != 404 {
		t.Fatalf("selecting another chat's message: %d %s", resp.StatusCode, body)
	}
}

// TestRefusedEditKeepsTheConversation: an edit whose new text the
// history refuses (too long) is a 400 that changes nothing: the message
// it was to replace and its answer are still there.
func TestRefusedEditKeepsTheConversation(t *testing.T) {
	url, _ := startChat(t, fake.Options{})
	_, body := do(t, "POST", url+"/api/conversations", `{}`)
	c := decodeJSON[history.Conversation](t, body)
	msgsURL := fmt.Sprintf("%s/api/conversations/%d/messages", url, c.ID)
	stream(t, context.Background(), msgsURL, `{"content": "one"}`, nil)
	list := func() []history.Message {
		_, body := do(t, "GET", msgsURL, "")
		return decodeJSON[struct{ Messages []history.Message }](t, body).Messages
	}
	before := list()
	if len(before) != 2 {
		t.Fatalf("before: %+v", before)
	}
	resp, body := do(t, "POST", msgsURL, fmt.Sprintf(`{"edit": %d, "content": "%s"}`, before[0].ID, strings.Repeat("a", history.MaxContent+1)))
	if resp.StatusCode != 400 || !strings.Contains(body, "at most") {
		t.Fatalf("too long an edit: %d %s", resp.StatusCode, tail(body, 200))
	}
	if after := list(); len(after) != 2 || after[0].Content != "one" || after[1].Content != "echo: one" {
		t.Fatalf("a refused edit changed the conversation: %+v", after)
	}
}

// TestShutdownStoresTheAnswerAsInterrupted: an answer still running
// when the server shuts down (Quit, SIGTERM) is kept, cut, with
// cut_reason "interrupted" (the server stopped), not "failed".
func TestShutdownStoresTheAnswerAsInterrupted(t *testing.T) {
	reg := &servicetest.Registry{}
	reg.Add(servicetest.Entry{Desc: service.ModelDesc{Name: "minicpm5:2b", Installed: true}})
	mgr := service.New(service.Options{
		Resolve: reg.Resolve, Models: reg.Models, KeepAlive: -1,
		NewBackend: func(_ context.Context, model string, kind enginekind.Kind) (backend.Backend, error) {
			return fake.New(fake.Options{Name: model, Kind: kind, TokenDelay: 20 * time.Millisecond,
				Reply: func(*backend.Request) string { return strings.Repeat("word ", 500) }}), nil
		},
	})
	defer mgr.Close(context.Background())
	h := history.NewHandle(filepath.Join(t.TempDir(), "history.db"), history.Options{})
	defer h.Close()
	srv, err := web.NewServer(mgr, web.Options{Addr: "127.0.0.1:0", History: h, ShutdownGrace: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, ln, nil) }()
	url := "http://" + ln.Addr().String()
	login(t, url, srv)
	_, body := do(t, "POST", url+"/api/conversations", `{}`)
	c := decodeJSON[history.Conversation](t, body)
	done := make(chan struct{})
	go func() {
		defer close(done)
		req, _ := http.NewRequest("POST", fmt.Sprintf("%s/api/conversations/%d/messages", url, c.ID), strings.NewReader(`{"content": "go on"}`))
		req.Header.Set("Content-Type", "application/json")
		withSession(req)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}()
	st, err := h.Store(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	messages := func() []history.Message {
		msgs, _ := st.Messages(context.Background(), c.ID)
		return msgs
	}
	waitUntil(t, "part of the answer to be stored", func() bool {
		msgs := messages()
		return len(msgs) == 2 && msgs[1].Content != ""
	})
	cancel() // what SIGTERM does
	<-done
	<-served
	msgs := messages()
	if len(msgs) != 2 || !msgs[1].Cut || msgs[1].CutReason != history.CutInterrupted || !strings.HasPrefix(msgs[1].Content, "word ") {
		t.Fatalf("after shutdown: %+v", msgs)
	}
}

// TestFullQueueRefusesAMessageBeforeStoringIt: with the queue full,
// sending a message is a 429 before its body is read, as for the other
// generation routes, and nothing is stored.
func TestFullQueueRefusesAMessageBeforeStoringIt(t *testing.T) {
	h := history.NewHandle(filepath.Join(t.TempDir(), "history.db"), history.Options{})
	t.Cleanup(func() { h.Close() })
	ts := startServer(t, fake.Options{}, web.Options{History: h}, service.Options{QueueSize: 1})
	_, body := do(t, "POST", ts.URL+"/api/conversations", `{}`)
	c := decodeJSON[history.Conversation](t, body)
	ticket, err := ts.Manager.Reserve() // the queue's one place
	if err != nil {
		t.Fatal(err)
	}
	resp, body := do(t, "POST", fmt.Sprintf("%s/api/conversations/%d/messages", ts.URL, c.ID), `{"content": "hello"}`)
	ticket.Release()
	if resp.StatusCode != 429 {
		t.Fatalf("with the queue full: %d %s", resp.StatusCode, tail(body, 300))
	}
	st, err := h.Store(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if msgs, err := st.Messages(context.Background(), c.ID); err != nil || len(msgs) != 0 {
		t.Fatalf("a refused message was stored: %+v %v", msgs, err)
	}
}

func TestLockedHistoryKeepsTheAPIServing(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "history.db")
	st, err := history.Open(context.Background(), path, history.Options{})
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	// Another connection takes an exclusive lock and keeps it.
	locker, err := sql.Open("sqlite", "file:"+path+"?_pragma=locking_mode(EXCLUSIVE)")
	if err != nil {
		t.Fatal(err)
	}
	defer locker.Close()
	locker.SetMaxOpenConns(1)
	if _, err := locker.Exec(`BEGIN EXCLUSIVE; UPDATE conversations SET title = title; COMMIT`); err != nil {
		t.Fatal(err)
	}
	h := history.NewHandle(path, history.Options{BusyTimeout: 100 * time.Millisecond})
	defer h.Close()
	s := startServer(t, fake.Options{}, web.Options{History: h}, service.Options{})
	resp, body := do(t, "GET", s.URL+"/api/conversations", "")
	if resp.StatusCode != 503 || !strings.Contains(body, "locked by another program") || !strings.Contains(body, "Close the other program") {
		t.Fatalf("locked history: %d %s", resp.StatusCode, body)
	}
	if resp, body := do(t, "POST", s.URL+"/v1/chat/completions", `{"model": "minicpm5:2b", "messages": [{"role": "user", "content": "hi"}]}`); resp.StatusCode != 200 {
		t.Fatalf("the API stopped serving with the history locked: %d %s", resp.StatusCode, body)
	}
	_, body = do(t, "GET", s.URL+"/api/history", "")
	if hs := decodeJSON[map[string]any](t, body); hs["available"] != false || !strings.Contains(fmt.Sprint(hs["problem"]), "locked") {
		t.Fatalf("history status: %s", body)
	}
	resp, body = do(t, "GET", s.URL+"/", "")
	if resp.StatusCode != 200 || !strings.Contains(body, "locked by another program") {
		t.Fatalf("the page does not say the history is locked: %d", resp.StatusCode)
	}
}

func TestCorruptHistoryIsMovedAsideAndThePageSaysWhere(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "history.db")
	if err := writeFile(path, "not a database at all"); err != nil {
		t.Fatal(err)
	}
	h := history.NewHandle(path, history.Options{})
	defer h.Close()
	s := startServer(t, fake.Options{}, web.Options{History: h}, service.Options{})
	resp, body := do(t, "GET", s.URL+"/", "")
	if resp.StatusCode != 200 || !strings.Contains(body, path+".corrupt-") || !strings.Contains(body, "nothing was deleted") {
		t.Fatalf("page: %d, %s", resp.StatusCode, body)
	}
	if resp, _ := do(t, "POST", s.URL+"/api/conversations", `{}`); resp.StatusCode != 201 {
		t.Fatalf("a new history does not work: %d", resp.StatusCode)
	}
}

func TestPageHeadersAndSafeTitles(t *testing.T) {
	url, _ := startChat(t, fake.Options{})
	_, body := do(t, "POST", url+"/api/conversations", `{"title": "<script>alert(1)</script><img src=x onerror=alert(2)>"}`)
	c := decodeJSON[history.Conversation](t, body)
	resp, page := do(t, "GET", fmt.Sprintf("%s/c/%d", url, c.ID), "")
	csp := resp.Header.Get("Content-Security-Policy")
	if resp.StatusCode != 200 || !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe-inline") || strings.Contains(csp, "unsafe-eval") {
		t.Fatalf("page: %d, CSP %q", resp.StatusCode, csp)
	}
	if strings.Contains(page, "<script>alert") || strings.Contains(page, "<img src=x") || !strings.Contains(page, "&lt;script&gt;alert(1)&lt;/script&gt;") {
		t.Fatal("a title became markup on the page")
	}
	if strings.Contains(page, "<script>") && strings.Count(page, "<script src=") != strings.Count(page, "<script") {
		t.Fatal("the page has an inline script")
	}
	for _, p := range []string{"/static/app.js", "/static/md.js", "/static/install.js", "/static/style.css", "/static/theme.js"} {
		if resp, _ := do(t, "GET", url+p, ""); resp.StatusCode != 200 {
			t.Errorf("%s: %d", p, resp.StatusCode)
		}
	}
	if resp, _ := do(t, "GET", url+"/c/77777", ""); resp.StatusCode != 404 {
		t.Errorf("missing conversation page: %d", resp.StatusCode)
	}
}

// TestPageWithAPIKeyShowsNoHistoryWithoutTheKey: neither the key nor
// the page's session: no history.
func TestPageWithAPIKeyShowsNoHistoryWithoutTheKey(t *testing.T) {
	h := history.NewHandle(filepath.Join(t.TempDir(), "history.db"), history.Options{})
	defer h.Close()
	s := startServer(t, fake.Options{}, web.Options{History: h, APIKey: "sekrit"}, service.Options{})
	resp, body := do(t, "POST", s.URL+"/api/conversations", `{"title": "private plans"}`, "Authorization", "Bearer sekrit")
	if resp.StatusCode != 201 {
		t.Fatalf("create with the key: %d %s", resp.StatusCode, body)
	}
	c := decodeJSON[history.Conversation](t, body)
	if resp, _ := do(t, "GET", s.URL+"/api/conversations", "", "Cookie", ""); resp.StatusCode != 401 {
		t.Fatalf("list without the key: %d", resp.StatusCode)
	}
	for _, path := range []string{"/", fmt.Sprintf("/c/%d", c.ID)} {
		resp, page := do(t, "GET", s.URL+path, "", "Cookie", "")
		if resp.StatusCode != 200 || strings.Contains(page, "private plans") {
			t.Errorf("%s without the key: %d, shows the history: %v", path, resp.StatusCode, strings.Contains(page, "private plans"))
		}
	}
}

// TestChatThinkingSwitchReachesTheModel: a chat's thinking setting goes
// to the backend as Request.Think; cleared, it is the model's default.
// A <think> block in the answer streams as thinking events and is
// stored apart.
func TestChatThinkingSwitchReachesTheModel(t *testing.T) {
	url, _ := startChat(t, fake.Options{Reply: func(r *backend.Request) string {
		think := "default"
		if r.Think != nil {
			think = fmt.Sprint(*r.Think)
		}
		return "<think>asked with " + think + "</think>\n\nanswer"
	}})
	_, body := do(t, "POST", url+"/api/conversations", `{"thinking": false}`)
	c := decodeJSON[history.Conversation](t, body)
	if c.Thinking == nil || *c.Thinking {
		t.Fatalf("created with thinking off: %+v", c)
	}
	msgsURL := fmt.Sprintf("%s/api/conversations/%d/messages", url, c.ID)
	for _, step := range []struct{ patch, think string }{
		{"", "false"},
		{`{"thinking": true}`, "true"},
		{`{"clear": ["thinking"]}`, "default"},
	} {
		if step.patch != "" {
			if resp, body := do(t, "PATCH", fmt.Sprintf("%s/api/conversations/%d", url, c.ID), step.patch); resp.StatusCode != 200 {
				t.Fatalf("patch %s: %d %s", step.patch, resp.StatusCode, body)
			}
		}
		var thought, said strings.Builder
		evs := stream(t, context.Background(), msgsURL, `{"content": "hi"}`, nil)
		for _, e := range evs {
			switch e.Name {
			case "thinking":
				thought.WriteString(decodeJSON[map[string]string](t, string(e.Data))["text"])
			case "token":
				said.WriteString(decodeJSON[map[string]string](t, string(e.Data))["text"])
			}
		}
		done := decodeJSON[history.Message](t, string(evs[len(evs)-1].Data))
		want := "asked with " + step.think
		if thought.String() != want || said.String() != "answer" || done.Thinking != want || done.Content != "answer" {
			t.Errorf("%s: streamed thinking %q and text %q, stored %q and %q; want %q and \"answer\"", step.patch, thought.String(), said.String(), done.Thinking, done.Content, want)
		}
	}
}
