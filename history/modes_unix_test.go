//go:build unix

package history

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestFileModes: the history's folder is 0700 and its database, -wal and
// -shm 0600, whether Open creates them or finds them looser (an older
// NPU Chat left them 0644 in a 0755 folder), under the usual umask.
func TestFileModes(t *testing.T) {
	defer syscall.Umask(syscall.Umask(0o022))
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "npuchat")
	path := filepath.Join(dir, "history.db")
	files := []string{path, path + "-wal", path + "-shm"}
	check := func(when string) {
		t.Helper()
		if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
			t.Errorf("%s: folder %v (%v), want 0700", when, fi.Mode().Perm(), err)
		}
		for _, f := range files {
			fi, err := os.Stat(f)
			if err != nil {
				t.Errorf("%s: %v", when, err)
				continue
			}
			if fi.Mode().Perm() != 0o600 {
				t.Errorf("%s: %s is %v, want 0600", when, filepath.Base(f), fi.Mode().Perm())
			}
		}
	}
	write := func(st *Store) {
		t.Helper()
		c, err := st.Create(ctx, "modes", Settings{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.AddUser(ctx, c.ID, "a secret"); err != nil {
			t.Fatal(err)
		}
	}

	st, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	write(st)
	check("created")

	// Loosen everything while it is open (the -wal and -shm exist), as
	// an older version left them, and open it again beside.
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if err := os.Chmod(f, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	st2, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	write(st2)
	check("reopened")
	st2.Close()
	st.Close()

	// Reopened after a clean close (SQLite made the -wal and -shm anew).
	st3, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st3.Close()
	write(st3)
	check("after close")
}

// TestNewHandleTightensAtStart: a history an older version left open
// (folder 0755, files 0644) is private as soon as the handle exists,
// before anything opens it.
func TestNewHandleTightensAtStart(t *testing.T) {
	defer syscall.Umask(syscall.Umask(0o022))
	dir := filepath.Join(t.TempDir(), "npuchat")
	path := filepath.Join(dir, "history.db")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	files := []string{path, path + "-wal", path + "-shm"}
	for _, f := range files {
		if err := os.WriteFile(f, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	NewHandle(path, Options{})
	if fi, _ := os.Stat(dir); fi.Mode().Perm() != 0o700 {
		t.Errorf("folder %v, want 0700", fi.Mode().Perm())
	}
	for _, f := range files {
		if fi, _ := os.Stat(f); fi.Mode().Perm() != 0o600 {
			t.Errorf("%s is %v, want 0600", filepath.Base(f), fi.Mode().Perm())
		}
	}
	// A handle for a history that does not exist yet makes nothing.
	none := filepath.Join(t.TempDir(), "later", "history.db")
	NewHandle(none, Options{})
	if _, err := os.Stat(filepath.Dir(none)); !os.IsNotExist(err) {
		t.Errorf("NewHandle made %s: %v", filepath.Dir(none), err)
	}
}

// TestJournalFIFOIsSkipped: a FIFO where a killed answer's journal was
// (another program's, or a hostile one) does not block Open for ever:
// it is skipped and the answer keeps what the database has.
func TestJournalFIFOIsSkipped(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "history.db")
	st, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	c, err := st.Create(ctx, "", Settings{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.AddUser(ctx, c.ID, "hello"); err != nil {
		t.Fatal(err)
	}
	a, err := st.StartAnswer(ctx, c.ID, "m")
	if err != nil {
		t.Fatal(err)
	}
	if err := st.AppendText(ctx, a.ID, "Hello"); err != nil {
		t.Fatal(err)
	}
	st.Close() // as a kill leaves it
	journal := filepath.Join(path+"-answers", fmt.Sprint(a.ID)+suffixes[streamText])
	if err := os.Remove(journal); err != nil {
		t.Fatalf("no journal where the answer's was expected: %v", err)
	}
	if err := syscall.Mkfifo(journal, 0o600); err != nil {
		t.Fatal(err)
	}
	again, err := Open(ctx, path, Options{}) // blocked for ever before
	if err != nil {
		t.Fatalf("open with a FIFO journal: %v", err)
	}
	defer again.Close()
	if _, err := again.Message(ctx, a.ID); err != nil {
		t.Fatal(err)
	}
}
