package history

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// An answer streams into a journal of its own, not into the database:
// the database row of a streaming answer was rewritten (and re-indexed
// for search) on every piece, which wrote the square of the answer to
// disk (a 14 KB answer wrote 166 MB). Each piece is now appended to
// <history.db>-answers/<message id>.txt, one write of the piece itself,
// before it is sent; when the answer ends its text goes into the
// database once, indexed once, and the journal is removed. A journal
// left by a killed server is put into its message when the history is
// next opened (the message is marked interrupted from its start). A
// write that fails (a full disk) is undone and returned: the answer
// stops there, and everything before it stays.

// JournalFile is an answer's journal: appends, an undo of a partial
// append, and Close. *os.File is one.
type JournalFile interface {
	Write(p []byte) (int, error)
	Truncate(size int64) error
	Close() error
}

// ErrDiskFull: the history could not keep a piece of an answer because
// the disk is full (or over quota); the answer was stopped there.
var ErrDiskFull = errors.New("the disk is full")

// journals are the answers being streamed.
type journals struct {
	dir  string
	open func(path string) (JournalFile, error)

	mu   sync.Mutex
	live map[int64]*journal // message id → its journal
}

type journal struct {
	conv int64
	f    JournalFile // nil once closed
	text strings.Builder
}

func newJournals(dbPath string, open func(string) (JournalFile, error)) *journals {
	if open == nil {
		open = func(path string) (JournalFile, error) {
			return os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY|os.O_APPEND, 0o600)
		}
	}
	return &journals{dir: dbPath + "-answers", open: open, live: map[int64]*journal{}}
}

func (js *journals) path(message int64) string {
	return filepath.Join(js.dir, strconv.FormatInt(message, 10)+".txt")
}

// start opens the journal of a new answer.
func (js *journals) start(conv, message int64) error {
	if err := os.MkdirAll(js.dir, 0o700); err != nil {
		return diskError("history: start the answer's journal", err)
	}
	f, err := js.open(js.path(message))
	if err != nil {
		return diskError("history: start the answer's journal", err)
	}
	js.mu.Lock()
	js.live[message] = &journal{conv: conv, f: f}
	js.mu.Unlock()
	return nil
}

// appendText appends a piece; ok is false when message has no journal.
func (js *journals) appendText(message int64, text string) (ok bool, err error) {
	js.mu.Lock()
	defer js.mu.Unlock()
	j := js.live[message]
	if j == nil || j.f == nil {
		return false, nil
	}
	n, err := j.f.Write([]byte(text))
	if err != nil {
		if n > 0 {
			j.f.Truncate(int64(j.text.Len())) // the piece is not kept, so not shown
		}
		return true, diskError("history: store the answer", err)
	}
	j.text.WriteString(text)
	return true, nil
}

// text is the streamed text of a live answer ("" and false if none).
func (js *journals) text(message int64) (string, bool) {
	js.mu.Lock()
	defer js.mu.Unlock()
	j := js.live[message]
	if j == nil {
		return "", false
	}
	return j.text.String(), true
}

// taken is what an answer's end puts into the database.
func (js *journals) taken(message int64) (string, bool) { return js.text(message) }

// done forgets an answer whose text is in the database, and removes its
// journal.
func (js *journals) done(message int64) {
	js.mu.Lock()
	j := js.live[message]
	delete(js.live, message)
	js.mu.Unlock()
	if j != nil && j.f != nil {
		j.f.Close()
	}
	os.Remove(js.path(message))
}

// drop forgets the answers of messages that were deleted: those of conv
// with an id of at least from (from 0: all of conv's).
func (js *journals) drop(conv, from int64) {
	js.mu.Lock()
	var gone []int64
	for id, j := range js.live {
		if j.conv == conv && id >= from {
			gone = append(gone, id)
		}
	}
	js.mu.Unlock()
	for _, id := range gone {
		js.done(id)
	}
}

// closeAll closes the journals (the files stay, for the next Open).
func (js *journals) closeAll() {
	js.mu.Lock()
	defer js.mu.Unlock()
	for _, j := range js.live {
		if j.f != nil {
			j.f.Close()
			j.f = nil
		}
	}
}

// recover puts the journals a killed server left into their messages.
func (s *Store) recoverJournals(ctx context.Context) error {
	entries, err := os.ReadDir(s.answers.dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("history: read %s: %w", s.answers.dir, err)
	}
	for _, e := range entries {
		id, err := strconv.ParseInt(strings.TrimSuffix(e.Name(), ".txt"), 10, 64)
		if err != nil || !strings.HasSuffix(e.Name(), ".txt") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(s.answers.dir, e.Name()))
		if err != nil {
			return fmt.Errorf("history: read the answer journal %s: %w", e.Name(), err)
		}
		if _, err := s.db.ExecContext(ctx, `UPDATE messages SET content = content || ? WHERE id = ?`, string(b), id); err != nil {
			return wrap("history: recover an answer", err)
		}
		os.Remove(filepath.Join(s.answers.dir, e.Name()))
	}
	return nil
}

// diskError wraps err, marking a full disk with ErrDiskFull.
func diskError(what string, err error) error {
	if errors.Is(err, syscall.ENOSPC) || isDiskFullCode(err) {
		return fmt.Errorf("%s: %w (%v)", what, ErrDiskFull, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}
