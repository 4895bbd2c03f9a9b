package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/npuchat/npuchat/history"
	"github.com/npuchat/npuchat/service/backend"
	"github.com/npuchat/npuchat/service/backend/fake"
)

// endless is a reply that would take half an hour at the fake's pace.
func endless(*backend.Request) string { return strings.Repeat("word ", 100000) }

// streamAsync posts to a conversation in the background: it reports the
// events as they come and closes the channel when the stream ends.
func streamAsync(t *testing.T, url, body string) <-chan sseEvent {
	t.Helper()
	ch := make(chan sseEvent, 1<<16)
	go func() {
		defer close(ch)
		stream(t, context.Background(), url, body, func(ev sseEvent) bool { ch <- ev; return true })
	}()
	return ch
}

// waitFor reads events until one named name (and returns it), failing
// when the stream ends first or after a minute.
func waitFor(t *testing.T, ch <-chan sseEvent, name string) sseEvent {
	t.Helper()
	deadline := time.After(time.Minute)
	for {
		select {
		case ev, ok := <-ch:
			if !ok {
				t.Fatalf("the stream ended before %q", name)
			}
			if ev.Name == name {
				return ev
			}
		case <-deadline:
			t.Fatalf("no %q event in a minute", name)
		}
	}
}

// TestDeleteMidAnswerStopsIt: a chat deleted while it answers stops
// answering (it went on to 3,901 tokens, holding the only slot, showing
// words stored nowhere): the stream ends with an error that says why,
// and the next chat is answered at once.
func TestDeleteMidAnswerStopsIt(t *testing.T) {
	url, _ := startChat(t, fake.Options{TokenDelay: 5 * time.Millisecond, Reply: endless})
	_, body := do(t, "POST", url+"/api/conversations", `{}`)
	c := decodeJSON[history.Conversation](t, body)
	ch := streamAsync(t, fmt.Sprintf("%s/api/conversations/%d/messages", url, c.ID), `{"content": "go on"}`)
	waitFor(t, ch, "token")
	if resp, body := do(t, "DELETE", fmt.Sprintf("%s/api/conversations/%d", url, c.ID), ""); resp.StatusCode != 204 {
		t.Fatalf("delete mid-answer: %d %s", resp.StatusCode, body)
	}
	ev := waitFor(t, ch, "error")
	if !strings.Contains(string(ev.Data), "deleted") {
		t.Errorf("the answer ended with %s", ev.Data)
	}
	for range ch {
	}
	// The slot is free: another chat is answered now.
	_, body = do(t, "POST", url+"/api/conversations", `{}`)
	c2 := decodeJSON[history.Conversation](t, body)
	ch2 := streamAsync(t, fmt.Sprintf("%s/api/conversations/%d/messages", url, c2.ID), `{"content": "hello"}`)
	waitFor(t, ch2, "token")
	if resp, _ := do(t, "DELETE", fmt.Sprintf("%s/api/conversations/%d", url, c2.ID), ""); resp.StatusCode != 204 {
		t.Fatal("delete the second chat")
	}
	for range ch2 {
	}
}

// TestOneWriterPerChat: a second message while the chat answers gets 409
// and changes nothing (three sends at once interleaved as user,
// assistant, user, user, assistant, assistant); a regenerate stops the
// running answer, which stays as a cut version, and answers again.
func TestOneWriterPerChat(t *testing.T) {
	url, _ := startChat(t, fake.Options{TokenDelay: 5 * time.Millisecond, Reply: endless})
	_, body := do(t, "POST", url+"/api/conversations", `{}`)
	c := decodeJSON[history.Conversation](t, body)
	msgURL := fmt.Sprintf("%s/api/conversations/%d/messages", url, c.ID)
	first := streamAsync(t, msgURL, `{"content": "first"}`)
	waitFor(t, first, "token")
	resp, body := do(t, "POST", msgURL, `{"content": "second"}`)
	if resp.StatusCode != 409 || !strings.Contains(body, "chat_busy") {
		t.Fatalf("a second message mid-answer: %d %s", resp.StatusCode, body)
	}
	again := streamAsync(t, msgURL, `{"regenerate": true}`)
	ev := waitFor(t, first, "error")
	if !strings.Contains(string(ev.Data), "changed") {
		t.Errorf("the first answer ended with %s", ev.Data)
	}
	for range first {
	}
	waitFor(t, again, "token")
	_, body = do(t, "GET", msgURL, "")
	msgs := decodeJSON[struct{ Messages []history.Message }](t, body).Messages
	var roles []string
	for _, m := range msgs {
		roles = append(roles, m.Role)
	}
	if strings.Join(roles, ",") != "user,assistant" || len(msgs[1].Versions) != 2 {
		b, _ := json.Marshal(msgs)
		t.Fatalf("the chat holds %v: %s", roles, b)
	}
	if resp, _ := do(t, "DELETE", fmt.Sprintf("%s/api/conversations/%d", url, c.ID), ""); resp.StatusCode != 204 {
		t.Fatal("delete")
	}
	for range again {
	}
}
