package history

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// writtenBytes is what this process has passed to write(2) so far
// (/proc/self/io's wchar: the database, its WAL and the journals).
func writtenBytes(t *testing.T) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/io")
	if err != nil {
		t.Skipf("no /proc/self/io on %s: the bytes written cannot be counted here", runtime.GOOS)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "wchar: "); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	t.Fatalf("no wchar in /proc/self/io:\n%s", b)
	return 0
}

// TestAnswerWritesGrowWithTheAnswer: storing an answer as it streams
// writes about as much as the answer, not the square of it (each piece
// rewrote and re-indexed the whole stored answer: a 14 KB answer wrote
// 166 MB). 4,000 pieces of 8 bytes, stored one by one as the web layer
// does, may cost at most 16 bytes written per byte of answer; and what
// streamed is readable before the end and searchable after it.
func TestAnswerWritesGrowWithTheAnswer(t *testing.T) {
	st := openTest(t, filepath.Join(t.TempDir(), "history.db"))
	c := must[*Conversation](t)(st.Create(ctx, "", Settings{}))
	must[*Message](t)(st.AddUser(ctx, c.ID, "write a lot"))
	a := must[*Message](t)(st.StartAnswer(ctx, c.ID, "m"))
	const pieces, piece = 4000, "word42 "
	before := writtenBytes(t)
	for i := range pieces {
		if err := st.AppendText(ctx, a.ID, piece); err != nil {
			t.Fatal(err)
		}
		if i == pieces/2 {
			if got := must[*Message](t)(st.Message(ctx, a.ID)).Content; got != strings.Repeat(piece, i+1) {
				t.Fatalf("mid-answer the message holds %d bytes, want %d", len(got), (i+1)*len(piece))
			}
		}
	}
	if err := st.FinishAnswer(ctx, a.ID, Stats{Engine: "cpu"}); err != nil {
		t.Fatal(err)
	}
	written := writtenBytes(t) - before
	size := int64(pieces * len(piece))
	t.Logf("%d bytes of answer in %d pieces: %d bytes written (%.1f per byte)", size, pieces, written, float64(written)/float64(size))
	if written > 16*size {
		t.Errorf("storing a %d-byte answer wrote %d bytes (%.0f per byte of answer)", size, written, float64(written)/float64(size))
	}
	msgs := must[[]Message](t)(st.Messages(ctx, c.ID))
	if len(msgs) != 2 || msgs[1].Content != strings.Repeat(piece, pieces) || msgs[1].Cut {
		t.Fatalf("stored %d messages, answer of %d bytes, cut %v", len(msgs), len(msgs[len(msgs)-1].Content), msgs[len(msgs)-1].Cut)
	}
	if got := must[[]Conversation](t)(st.Search(ctx, "word42", 0)); len(got) != 1 {
		t.Errorf("the finished answer is not found: %v", got)
	}
	if entries, _ := os.ReadDir(st.answers.dir); len(entries) != 0 {
		t.Errorf("journals left after the answer ended: %v", entries)
	}
}

// TestKilledAnswerIsRecovered: a server killed mid-answer leaves the
// answer's journal; the next Open puts every streamed piece into the
// message, which stays marked interrupted.
func TestKilledAnswerIsRecovered(t *testing.T) {
	path := filepath.Join(t.TempDir(), "history.db")
	st, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	c := must[*Conversation](t)(st.Create(ctx, "", Settings{}))
	must[*Message](t)(st.AddUser(ctx, c.ID, "hello"))
	a := must[*Message](t)(st.StartAnswer(ctx, c.ID, "m"))
	for _, p := range []string{"Hello", ", ", "world"} {
		if err := st.AppendText(ctx, a.ID, p); err != nil {
			t.Fatal(err)
		}
	}
	st.Close() // as a kill leaves it: no end of the answer
	again := openTest(t, path)
	m := must[*Message](t)(again.Message(ctx, a.ID))
	if m.Content != "Hello, world" || !m.Cut || m.CutReason != CutInterrupted {
		t.Fatalf("after the kill: %q cut %v %q", m.Content, m.Cut, m.CutReason)
	}
	if got := must[[]Conversation](t)(again.Search(ctx, "world", 0)); len(got) != 1 {
		t.Errorf("the recovered answer is not found: %v", got)
	}
}

// fullDisk is a journal on a disk with room bytes left.
type fullDisk struct {
	f    *os.File
	room int
}

func (d *fullDisk) Write(p []byte) (int, error) {
	if len(p) > d.room {
		n, _ := d.f.Write(p[:d.room])
		d.room = 0
		return n, &os.PathError{Op: "write", Path: d.f.Name(), Err: syscall.ENOSPC}
	}
	d.room -= len(p)
	return d.f.Write(p)
}
func (d *fullDisk) Truncate(n int64) error { return d.f.Truncate(n) }
func (d *fullDisk) Close() error           { return d.f.Close() }

// TestFullDiskKeepsWhatWasStored: the disk fills mid-answer: the piece
// that does not fit is refused with ErrDiskFull and not kept (not even
// its first bytes), and everything before it is.
func TestFullDiskKeepsWhatWasStored(t *testing.T) {
	path := filepath.Join(t.TempDir(), "history.db")
	st, err := Open(ctx, path, Options{Now: time.Now, OpenJournal: func(p string) (JournalFile, error) {
		f, err := os.OpenFile(p, os.O_CREATE|os.O_TRUNC|os.O_WRONLY|os.O_APPEND, 0o600)
		return &fullDisk{f: f, room: 12}, err
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	c := must[*Conversation](t)(st.Create(ctx, "", Settings{}))
	a := must[*Message](t)(st.StartAnswer(ctx, c.ID, "m"))
	if err := st.AppendText(ctx, a.ID, "Hello, "); err != nil {
		t.Fatal(err)
	}
	err = st.AppendText(ctx, a.ID, "wonderful world")
	if !errors.Is(err, ErrDiskFull) {
		t.Fatalf("a piece that does not fit: %v, want ErrDiskFull", err)
	}
	if err := st.CutAnswer(ctx, a.ID, CutFailed, Stats{}); err != nil {
		t.Fatal(err)
	}
	if m := must[*Message](t)(st.Message(ctx, a.ID)); m.Content != "Hello, " || !m.Cut {
		t.Fatalf("stored %q cut %v, want what was stored before the disk filled", m.Content, m.Cut)
	}
}
