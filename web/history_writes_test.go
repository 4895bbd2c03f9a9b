package web_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/npuchat/npuchat/history"
	"github.com/npuchat/npuchat/service"
	"github.com/npuchat/npuchat/service/backend"
	"github.com/npuchat/npuchat/service/backend/fake"
	"github.com/npuchat/npuchat/web"
)

// diskWithRoom is an answer journal on a disk with room bytes left.
type diskWithRoom struct {
	f    *os.File
	room int
}

func (d *diskWithRoom) Write(p []byte) (int, error) {
	if len(p) > d.room {
		n, _ := d.f.Write(p[:d.room])
		d.room = 0
		return n, &os.PathError{Op: "write", Path: d.f.Name(), Err: syscall.ENOSPC}
	}
	d.room -= len(p)
	return d.f.Write(p)
}
func (d *diskWithRoom) Truncate(n int64) error { return d.f.Truncate(n) }
func (d *diskWithRoom) Close() error           { return d.f.Close() }

// TestFullDiskStopsTheAnswerAndKeepsWhatWasShown: the disk fills while
// an answer streams (a nearly full disk cut the first answer after 532
// characters with a bare error): the answer stops with an error that
// says the disk is full, and every word the page was shown is in the
// history, no more and no less.
func TestFullDiskStopsTheAnswerAndKeepsWhatWasShown(t *testing.T) {
	h := history.NewHandle(filepath.Join(t.TempDir(), "history.db"), history.Options{OpenJournal: func(p string) (history.JournalFile, error) {
		f, err := os.OpenFile(p, os.O_CREATE|os.O_TRUNC|os.O_WRONLY|os.O_APPEND, 0o600)
		return &diskWithRoom{f: f, room: 300}, err
	}})
	t.Cleanup(func() { h.Close() })
	ts := startServer(t, fake.Options{Reply: func(*backend.Request) string { return strings.Repeat("lorem ipsum ", 200) }},
		web.Options{History: h}, service.Options{})
	_, body := do(t, "POST", ts.URL+"/api/conversations", `{}`)
	c := decodeJSON[history.Conversation](t, body)
	var shown strings.Builder
	var errMsg string
	stream(t, context.Background(), fmt.Sprintf("%s/api/conversations/%d/messages", ts.URL, c.ID), `{"content": "go on"}`, func(ev sseEvent) bool {
		var v struct{ Text, Message string }
		json.Unmarshal(ev.Data, &v)
		switch ev.Name {
		case "token":
			shown.WriteString(v.Text)
		case "error":
			errMsg = v.Message
		}
		return true
	})
	if !strings.Contains(errMsg, "disk is full") || !strings.Contains(errMsg, "everything shown so far is stored") {
		t.Errorf("the answer ended with %q; want it to say the disk is full", errMsg)
	}
	if shown.Len() == 0 || shown.Len() > 300 {
		t.Fatalf("%d bytes were shown; the disk had room for 300", shown.Len())
	}
	_, body = do(t, "GET", fmt.Sprintf("%s/api/conversations/%d/messages", ts.URL, c.ID), "")
	msgs := decodeJSON[struct{ Messages []history.Message }](t, body).Messages
	if len(msgs) != 2 || msgs[1].Content != shown.String() || !msgs[1].Cut {
		t.Fatalf("stored %+v; shown %q", msgs, shown.String())
	}
}

// TestDamagedHistoryKeepsTheChatsAndSaysSo: damage in history.db's
// search index emptied the page's history, and /api/history reported no
// problem. Now the chats are there and /api/history says what happened.
func TestDamagedHistoryKeepsTheChatsAndSaysSo(t *testing.T) {
	path := filepath.Join(t.TempDir(), "history.db")
	h := history.NewHandle(path, history.Options{})
	ts := startServer(t, fake.Options{}, web.Options{History: h}, service.Options{})
	for i := range 3 {
		_, body := do(t, "POST", ts.URL+"/api/conversations", fmt.Sprintf(`{"title": "pelican chat %d"}`, i))
		c := decodeJSON[history.Conversation](t, body)
		stream(t, context.Background(), fmt.Sprintf("%s/api/conversations/%d/messages", ts.URL, c.ID), `{"content": "tell me about pelicans"}`, nil)
	}
	h.Close()
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	var root int64
	db.QueryRow(`SELECT rootpage FROM sqlite_master WHERE name = 'messages_fts_data'`).Scan(&root)
	db.Close()
	b, _ := os.ReadFile(path)
	for i := (root - 1) * 4096; i < root*4096 && i < int64(len(b)); i++ {
		b[i] ^= 0x5a
	}
	os.WriteFile(path, b, 0o600)

	h2 := history.NewHandle(path, history.Options{})
	t.Cleanup(func() { h2.Close() })
	ts2 := startServer(t, fake.Options{}, web.Options{History: h2}, service.Options{})
	_, body := do(t, "GET", ts2.URL+"/api/conversations", "")
	if n := len(decodeJSON[struct{ Conversations []history.Conversation }](t, body).Conversations); n != 3 {
		t.Fatalf("%d chats after the damage, want 3: %s", n, body)
	}
	_, body = do(t, "GET", ts2.URL+"/api/history", "")
	if !strings.Contains(body, "damaged") || !strings.Contains(body, "3 chats") {
		t.Errorf("/api/history: %s", body)
	}
	_, page := do(t, "GET", ts2.URL+"/", "")
	if !strings.Contains(page, "was damaged") {
		t.Error("the page does not say the history was damaged")
	}
}
