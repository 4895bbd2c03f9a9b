//go:build unix

package cpu

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// TestKVDiskCacheFIFO: a FIFO named like a KV file, in the folder when
// the model loads or put in place of an indexed file before a message,
// is never waited for: the model loads, and the chat is computed again,
// exactly, as with no file.
func TestKVDiskCacheFIFO(t *testing.T) {
	path := models(t)["gguf"]
	want, _, _, err := run(t, load(t, Options{Path: path}), diskChat())
	if err != nil {
		t.Fatal(err)
	}

	t.Run("at load", func(t *testing.T) {
		dir := t.TempDir()
		if err := syscall.Mkfifo(filepath.Join(dir, "chat-1-00112233445566778899aabbccddeeff.kv"), 0o600); err != nil {
			t.Fatal(err)
		}
		b := load(t, Options{Path: path, KVDir: dir}) // a blocking open waits here for ever
		got, _, res, err := run(t, b, diskChat())
		if err != nil || got != want || res.CachedTokens != 0 {
			t.Errorf("with a FIFO in the KV folder: %q, %d tokens from a cache (%v); want %q computed", got, res.CachedTokens, err, want)
		}
	})

	t.Run("in place of a file", func(t *testing.T) {
		dir := t.TempDir()
		first := load(t, Options{Path: path, KVDir: dir})
		if _, _, _, err := run(t, first, diskChat()); err != nil {
			t.Fatal(err)
		}
		first.Unload(t.Context())
		files := kvFiles(t, dir)
		if len(files) != 1 {
			t.Fatalf("%d KV files, want 1", len(files))
		}
		var logged logBuffer
		b := load(t, Options{Path: path, KVDir: dir, Log: slog.New(slog.NewTextHandler(&logged, nil))}) // indexes the file
		if err := os.Remove(files[0]); err != nil {
			t.Fatal(err)
		}
		if err := syscall.Mkfifo(files[0], 0o600); err != nil {
			t.Fatal(err)
		}
		for range 2 {
			// the chat not in memory, its file is looked up (a blocking
			// open would wait here for ever)
			b.kv.Clear()
			got, _, res, err := run(t, b, diskChat())
			if err != nil || got != want || res.CachedTokens != 0 {
				t.Errorf("with a FIFO in place of the chat's KV file: %q, %d tokens from a cache (%v); want %q computed", got, res.CachedTokens, err, want)
			}
		}
		if n := strings.Count(logged.String(), "ignoring a file"); n != 1 {
			t.Errorf("the FIFO was logged %d times, want once:\n%s", n, logged.String())
		}
	})
}

// logBuffer is a log's text, written from any goroutine.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
