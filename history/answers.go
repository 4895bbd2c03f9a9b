package history

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/npuchat/npuchat/safefile"
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

// A journal is two files: the answer's text, and its thinking (a
// reasoning model's <think> text, kept apart).
type journal struct {
	conv int64
	f    [2]JournalFile // nil once closed
	text [2]strings.Builder
}

// The streams of a journal, and their files' suffixes.
const (
	streamText  = 0
	streamThink = 1
)

var suffixes = [2]string{".txt", ".think.txt"}

// maxJournalBytes caps one answer's journal when it is recovered: an
// answer is bounded by the context (a few MB of text at most), so a
// bigger file was not written by NPU Chat.
const maxJournalBytes = 64 << 20

func newJournals(dbPath string, open func(string) (JournalFile, error)) *journals {
	if open == nil {
		open = func(path string) (JournalFile, error) {
			return os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY|os.O_APPEND, 0o600)
		}
	}
	return &journals{dir: dbPath + "-answers", open: open, live: map[int64]*journal{}}
}

func (js *journals) path(message int64) string { return js.file(message, streamText) }

func (js *journals) file(message int64, stream int) string {
	return filepath.Join(js.dir, strconv.FormatInt(message, 10)+suffixes[stream])
}

// start opens the journal of a new answer.
func (js *journals) start(conv, message int64) error {
	if err := os.MkdirAll(js.dir, 0o700); err != nil {
		return diskError("history: start the answer's journal", err)
	}
	j := &journal{conv: conv}
	for i := range j.f {
		f, err := js.open(js.file(message, i))
		if err != nil {
			if i > 0 {
				j.f[0].Close()
				os.Remove(js.file(message, 0))
			}
			return diskError("history: start the answer's journal", err)
		}
		j.f[i] = f
	}
	js.mu.Lock()
	js.live[message] = j
	js.mu.Unlock()
	return nil
}

// appendText appends a piece to a stream; ok is false when message has
// no journal.
func (js *journals) appendText(message int64, stream int, text string) (ok bool, err error) {
	js.mu.Lock()
	defer js.mu.Unlock()
	j := js.live[message]
	if j == nil || j.f[stream] == nil {
		return false, nil
	}
	n, err := j.f[stream].Write([]byte(text))
	if err != nil {
		if n > 0 {
			j.f[stream].Truncate(int64(j.text[stream].Len())) // the piece is not kept, so not shown
		}
		return true, diskError("history: store the answer", err)
	}
	j.text[stream].WriteString(text)
	return true, nil
}

// text is the streamed text and thinking of a live answer (ok false if
// none).
func (js *journals) text(message int64) (text, thinking string, ok bool) {
	js.mu.Lock()
	defer js.mu.Unlock()
	j := js.live[message]
	if j == nil {
		return "", "", false
	}
	return j.text[streamText].String(), j.text[streamThink].String(), true
}

// done forgets an answer whose text is in the database, and removes its
// journal.
func (js *journals) done(message int64) {
	js.mu.Lock()
	j := js.live[message]
	delete(js.live, message)
	js.mu.Unlock()
	if j != nil {
		for _, f := range j.f {
			if f != nil {
				f.Close()
			}
		}
	}
	for i := range suffixes {
		os.Remove(js.file(message, i))
	}
}

// of returns the live answers of conv.
func (js *journals) of(conv int64) []int64 {
	js.mu.Lock()
	defer js.mu.Unlock()
	var ids []int64
	for id, j := range js.live {
		if j.conv == conv {
			ids = append(ids, id)
		}
	}
	return ids
}

// dropGone forgets the live answers of conv whose messages were deleted.
func (s *Store) dropGone(ctx context.Context, conv int64) {
	for _, id := range s.answers.of(conv) {
		var one int
		if err := s.db.QueryRowContext(ctx, `SELECT 1 FROM messages WHERE id = ?`, id).Scan(&one); errors.Is(err, sql.ErrNoRows) {
			s.answers.done(id)
		}
	}
}

// closeAll closes the journals (the files stay, for the next Open).
func (js *journals) closeAll() {
	js.mu.Lock()
	defer js.mu.Unlock()
	for _, j := range js.live {
		for i, f := range j.f {
			if f != nil {
				f.Close()
				j.f[i] = nil
			}
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
		column, name := "content", e.Name()
		if n, ok := strings.CutSuffix(name, suffixes[streamThink]); ok {
			column, name = "thinking", n
		} else if n, ok := strings.CutSuffix(name, suffixes[streamText]); ok {
			name = n
		} else {
			continue
		}
		id, err := strconv.ParseInt(name, 10, 64)
		if err != nil {
			continue
		}
		b, err := safefile.ReadFile(filepath.Join(s.answers.dir, e.Name()), maxJournalBytes)
		if errors.Is(err, safefile.ErrNotRegular) || errors.Is(err, safefile.ErrTooLarge) {
			// not a journal NPU Chat wrote (a FIFO would block the open
			// for ever): the answer keeps what the database has
			continue
		}
		if err != nil {
			return fmt.Errorf("history: read the answer journal %s: %w", e.Name(), err)
		}
		if len(b) > 0 {
			if _, err := s.db.ExecContext(ctx, `UPDATE messages SET `+column+` = `+column+` || ? WHERE id = ?`, string(b), id); err != nil {
				return wrap("history: recover an answer", err)
			}
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
