package web

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"
)

// One writer per chat. Two sends at once interleaved a chat's messages
// (user, assistant, user, user, assistant, assistant), and a chat deleted
// or edited mid-answer went on answering into nothing, holding the one
// generation slot. Now a chat has at most one answer running
// (chatWriters): a plain send while it runs gets 409; an edit, a
// regenerate or a delete stops it (its stored part stays, as cut, until
// the delete) and waits for it to end before changing the chat.

// chatWriters are the chats answering now.
type chatWriters struct {
	mu   sync.Mutex
	busy map[int64]*chatWriter
}

// chatWriter is one chat's running answer.
type chatWriter struct {
	ctx  context.Context // ends (with its cause) when the answer is to stop
	stop context.CancelCauseFunc
	done chan struct{} // closed when the answer has ended
}

// stopWait bounds how long a change waits for the answer it stopped.
const stopWait = 10 * time.Second

// begin takes chat id for an answer; nil when an answer runs already.
func (cw *chatWriters) begin(id int64) *chatWriter {
	cw.mu.Lock()
	defer cw.mu.Unlock()
	if cw.busy == nil {
		cw.busy = map[int64]*chatWriter{}
	}
	if cw.busy[id] != nil {
		return nil
	}
	ctx, stop := context.WithCancelCause(context.Background())
	w := &chatWriter{ctx: ctx, stop: stop, done: make(chan struct{})}
	cw.busy[id] = w
	return w
}

// end gives chat id back.
func (cw *chatWriters) end(id int64, w *chatWriter) {
	cw.mu.Lock()
	if cw.busy[id] == w {
		delete(cw.busy, id)
	}
	cw.mu.Unlock()
	w.stop(nil)
	close(w.done)
}

// interrupt stops the answer running in chat id, if any, with cause,
// and waits for it to end (within stopWait and ctx). It reports whether
// the chat is free.
func (cw *chatWriters) interrupt(ctx context.Context, id int64, cause error) bool {
	cw.mu.Lock()
	w := cw.busy[id]
	cw.mu.Unlock()
	if w == nil {
		return true
	}
	w.stop(cause)
	t := time.NewTimer(stopWait)
	defer t.Stop()
	select {
	case <-w.done:
		return true
	case <-t.C:
	case <-ctx.Done():
	}
	return false
}

// chatBusy is the answer to a change of a chat whose answer does not
// stop.
func chatBusy(id int64) *apiError {
	return &apiError{http.StatusConflict, "chat_busy", fmt.Sprintf("conversation %d is answering; stop that answer (or wait for it) first", id), ""}
}

// Why a running answer was stopped, as its client is told.
var (
	errChatDeleted = &apiError{http.StatusConflict, "chat_deleted", "the chat was deleted while it answered; the answer was stopped", ""}
	errChatChanged = &apiError{http.StatusConflict, "chat_changed", "the chat was changed (a message edited or answered again) while it answered; this answer was stopped and is kept as it was", ""}
)
