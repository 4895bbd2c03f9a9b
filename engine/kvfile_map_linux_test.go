package engine

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// mapsOf reports whether the process maps the file at path
// (/proc/self/maps).
func mapsOf(t *testing.T, path string) bool {
	t.Helper()
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	return strings.Contains(string(maps), path)
}

// TestKVFileIsMapped: on Linux ReadKVFile maps the file's pages as the
// slabs (no copy); a session computing on in them writes its own pages,
// never the file; and when nothing holds the sequence any more its
// mapping goes, its address range emptied for the next.
func TestKVFileIsMapped(t *testing.T) {
	m := kvModel(t, LoadOptions{})
	chat := seqTokens(40, 90)
	more := cat(chat, seqTokens(41, 30))
	file := kvFileBytes(t, m, keptSequence(t, m, chat))
	p := filepath.Join(t.TempDir(), "mapped.kv")
	if err := os.WriteFile(p, file, 0o600); err != nil {
		t.Fatal(err)
	}
	func() {
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		st, _, err := m.ReadKVFile(f, "model-id", ReadKVOptions{Capacity: len(more)})
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		if !mapsOf(t, p) || !st.Mapped() {
			t.Fatal("the file is not mapped: it was copied")
		}
		c := m.NewKVCache(KVCacheOptions{Budget: 1 << 30})
		c.Insert(st)
		s := c.NewSession(0)
		n, err := s.Resume("scope", more)
		if err != nil || n != len(chat) {
			t.Fatalf("resumed %d (%v), want %d", n, err, len(chat))
		}
		l, err := s.Prefill(more[n:])
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(l) != freshLogits(t, m, more) {
			t.Error("computed on in the mapped slabs: logits differ from a fresh computation")
		}
		if on, _ := os.ReadFile(p); !bytes.Equal(on, file) {
			t.Error("the session's writes reached the file")
		}
		s.Discard()
		c.Clear()
	}()
	deadline := time.Now().Add(10 * time.Second)
	for mapsOf(t, p) {
		if time.Now().After(deadline) {
			t.Fatal("the file is still mapped after its sequence is gone")
		}
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
}
