package web_test

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/npuchat/npuchat/history"
	"github.com/npuchat/npuchat/service"
	"github.com/npuchat/npuchat/service/backend/fake"
	"github.com/npuchat/npuchat/web"
)

// TestLongChatStaysAnswerable: a conversation longer than the context is
// answered on the page route without its oldest messages; the answer's
// stats say how many the model did not see, the page says so under the
// answer, and the history keeps every message.
func TestLongChatStaysAnswerable(t *testing.T) {
	url, _ := startChat(t, fake.Options{ContextLength: 120})
	api := url + "/api/conversations"
	_, body := do(t, "POST", api, `{"system_prompt": "Be brief."}`)
	conv := decodeJSON[history.Conversation](t, body)
	msgs := fmt.Sprintf("%s/%d/messages", api, conv.ID)
	var done history.Message
	for i := range 8 {
		evs := stream(t, context.Background(), msgs, fmt.Sprintf(`{"content": "question %d %s"}`, i, strings.Repeat("word ", 10)), nil)
		last := evs[len(evs)-1]
		if last.Name != "done" {
			t.Fatalf("turn %d ended with %s: %s", i, last.Name, last.Data)
		}
		done = decodeJSON[history.Message](t, string(last.Data))
	}
	if done.Stats == nil || done.Stats.OmittedMessages == 0 || done.Stats.OmittedMessages%2 != 0 {
		t.Fatalf("the last answer's stats %+v: want whole turns left out", done.Stats)
	}
	_, body = do(t, "GET", fmt.Sprintf("%s/%d", api, conv.ID), "")
	stored := decodeJSON[struct{ Messages []history.Message }](t, body).Messages
	if len(stored) != 16 {
		t.Errorf("the history holds %d messages, want all 16", len(stored))
	}
	resp, page := do(t, "GET", fmt.Sprintf("%s/c/%d", url, conv.ID), "")
	want := fmt.Sprintf("The model did not see the %d oldest messages", done.Stats.OmittedMessages)
	if resp.StatusCode != 200 || !strings.Contains(page, want) || !strings.Contains(page, `data-testid="omitted"`) {
		t.Errorf("the page (%d) does not say %q under the answer", resp.StatusCode, want)
	}

	// A message that alone does not fit: a clear error, nothing answered.
	evs := stream(t, context.Background(), msgs, fmt.Sprintf(`{"content": "%s"}`, strings.Repeat("word ", 130)), nil)
	last := evs[len(evs)-1]
	if last.Name != "error" || !strings.Contains(string(last.Data), "more than the context holds (120 tokens)") {
		t.Errorf("a message larger than the context: %s %s", last.Name, last.Data)
	}
}

// TestLongChatOverTheAPI: OpenAI and Ollama chats longer than the
// context are answered, with the messages left out in a field of each
// format's answer; OpenAI's usage has prompt_tokens_details.
func TestLongChatOverTheAPI(t *testing.T) {
	s := startServer(t, fake.Options{ContextLength: 60}, web.Options{}, service.Options{})
	var turns []string
	for i := range 6 {
		turns = append(turns, fmt.Sprintf(`{"role":"user","content":"question %d %s"},{"role":"assistant","content":"answer %d"}`, i, strings.Repeat("w ", 8), i))
	}
	chat := `[{"role":"system","content":"Be brief."},` + strings.Join(turns, ",") + `,{"role":"user","content":"last one"}]`
	for _, c := range []struct{ path, body, field string }{
		{"/v1/chat/completions", `{"model":"minicpm5:2b","messages":` + chat + `}`, "omitted_messages"},
		{"/v1/chat/completions", `{"model":"minicpm5:2b","stream":true,"messages":` + chat + `}`, "omitted_messages"},
		{"/api/chat", `{"model":"minicpm5:2b","stream":false,"messages":` + chat + `}`, "omitted_messages"},
	} {
		resp, body := do(t, "POST", s.URL+c.path, c.body)
		if resp.StatusCode != http.StatusOK || !strings.Contains(body, `"`+c.field+`":`) || !strings.Contains(body, "last ") {
			t.Errorf("%s: %d %s", c.path, resp.StatusCode, body)
		}
		if c.path == "/v1/chat/completions" && !strings.Contains(c.body, `"stream":true`) && !strings.Contains(body, `"prompt_tokens_details":{"cached_tokens":`) {
			t.Errorf("%s: no prompt_tokens_details in %s", c.path, body)
		}
	}
	resp, body := do(t, "POST", s.URL+"/v1/chat/completions", `{"model":"minicpm5:2b","messages":[{"role":"user","content":"`+strings.Repeat("w ", 80)+`"}]}`)
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, "context_length_exceeded") || !strings.Contains(body, "(60 tokens)") {
		t.Errorf("a message larger than the context: %d %s", resp.StatusCode, body)
	}
}

// TestDeletedChatForgetsItsCache: deleting a conversation drops what is
// kept for its answers' prompts (the tag its requests carry).
func TestDeletedChatForgetsItsCache(t *testing.T) {
	var forgot []string
	h := history.NewHandle(filepath.Join(t.TempDir(), "history.db"), history.Options{})
	t.Cleanup(func() { h.Close() })
	s := startServer(t, fake.Options{}, web.Options{History: h}, service.Options{ForgetCache: func(tag string) { forgot = append(forgot, tag) }})
	api := s.URL + "/api/conversations"
	_, body := do(t, "POST", api, `{}`)
	conv := decodeJSON[history.Conversation](t, body)
	if resp, _ := do(t, "DELETE", fmt.Sprintf("%s/%d", api, conv.ID), ""); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("delete: %d", resp.StatusCode)
	}
	if want := fmt.Sprintf("chat-%d", conv.ID); len(forgot) != 1 || forgot[0] != want {
		t.Errorf("forgot %v, want [%s]", forgot, want)
	}
}

// TestOpenedChatWarmsItsCache: opening a conversation (GET, as the page
// does when a chat is chosen) asks the loaded backend to read its keys
// and values back (the tag its requests carry), so its next message
// does not wait for the disk.
func TestOpenedChatWarmsItsCache(t *testing.T) {
	h := history.NewHandle(filepath.Join(t.TempDir(), "history.db"), history.Options{})
	t.Cleanup(func() { h.Close() })
	s := startServer(t, fake.Options{}, web.Options{History: h}, service.Options{})
	api := s.URL + "/api/conversations"
	_, body := do(t, "POST", api, `{}`)
	conv := decodeJSON[history.Conversation](t, body)
	stream(t, t.Context(), fmt.Sprintf("%s/%d/messages", api, conv.ID), `{"content": "hello"}`, func(sseEvent) bool { return true })
	if resp, _ := do(t, "GET", fmt.Sprintf("%s/%d", api, conv.ID), ""); resp.StatusCode != http.StatusOK {
		t.Fatalf("open: %d", resp.StatusCode)
	}
	fakes := s.Fakes()
	if len(fakes) != 1 {
		t.Fatalf("%d backends loaded, want 1", len(fakes))
	}
	if want := fmt.Sprintf("chat-%d", conv.ID); fmt.Sprint(fakes[0].Warmed()) != "["+want+"]" {
		t.Errorf("warmed %v, want [%s]", fakes[0].Warmed(), want)
	}
}
