package web_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/npuchat/npuchat/history"
	"github.com/npuchat/npuchat/service/backend/fake"
)

// TestEventsSayWhenConversationsChange: /api/events sends
// "conversations" after a chat is made, renamed, answered in and
// deleted, so that another tab's list follows.
func TestEventsSayWhenConversationsChange(t *testing.T) {
	url, _ := startChat(t, fake.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", url+"/api/events", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	// next reads the stream to the next event named name, failing on its end.
	next := func(what, name string) {
		t.Helper()
		for sc.Scan() {
			if sc.Text() == "event: "+name {
				return
			}
		}
		t.Fatalf("%s: the stream ended without %q (%v)", what, name, sc.Err())
	}
	for sc.Scan() && sc.Text() != ": events" {
	}
	api := url + "/api/conversations"
	r, body := do(t, "POST", api, `{"title": "From another tab"}`)
	if r.StatusCode != 201 {
		t.Fatalf("create: %d %s", r.StatusCode, body)
	}
	next("create", "conversations")
	c := decodeJSON[history.Conversation](t, body)
	do(t, "PATCH", fmt.Sprintf("%s/%d", api, c.ID), `{"title": "Renamed"}`)
	next("rename", "conversations")
	stream(t, context.Background(), fmt.Sprintf("%s/%d/messages", api, c.ID), `{"content": "hello"}`, nil)
	next("answer", "conversations")
	if r, _ := do(t, "DELETE", fmt.Sprintf("%s/%d", api, c.ID), ""); r.StatusCode != 204 {
		t.Fatalf("delete: %d", r.StatusCode)
	}
	next("delete", "conversations")
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Errorf("Content-Type %q", resp.Header.Get("Content-Type"))
	}
}
