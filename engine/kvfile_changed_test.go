package engine

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// kvChangeChild names, in a child test process's environment, the
// change TestKVFileChangedUnderSession makes there.
const kvChangeChild = "NPUCHAT_KV_CHANGE_CHILD"

// kvChanges are what another process of the user can do to a KV file
// while a sequence read from it lives: cut it short (which faults a
// process that maps it) or overwrite its bytes in place (which a
// mapping sees, unchecked).
var kvChanges = []struct {
	name   string
	change func(path string, size int64) error
}{
	{"cut short", func(path string, _ int64) error { return os.Truncate(path, kvAlign) }},
	{"overwritten", func(path string, size int64) error {
		f, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			return err
		}
		defer f.Close()
		// every byte after the head: keys, values, scales and checksums
		_, err = f.WriteAt(bytes.Repeat([]byte{0x7b}, int(size-kvAlign)), kvAlign)
		return err
	}},
	{"deleted and replaced", func(path string, size int64) error {
		if err := os.Remove(path); err != nil {
			return err
		}
		return os.WriteFile(path, make([]byte, size), 0o600)
	}},
}

// TestKVFileChangedUnderSession: a sequence read from a KV file is the
// process's own: the file cut short, overwritten or replaced after the
// read, the session resumed from it computes on, and its logits are a
// fresh computation's, for every KV type. Each change runs in a child
// process (this test, run again), so that a reader whose memory is the
// file's pages fails the test (a SIGBUS ends the child) without ending
// the test binary.
func TestKVFileChangedUnderSession(t *testing.T) {
	if name := os.Getenv(kvChangeChild); name != "" {
		for _, c := range kvChanges {
			if c.name == name {
				for _, typ := range KVTypes() {
					t.Run(typ, func(t *testing.T) { readOnAfterChange(t, typ, c.change) })
				}
				return
			}
		}
		t.Fatalf("no change %q", name)
	}
	for _, c := range kvChanges {
		t.Run(c.name, func(t *testing.T) {
			cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestKVFileChangedUnderSession$", "-test.count=1", "-test.v")
			cmd.Env = append(os.Environ(), kvChangeChild+"="+c.name)
			out, err := cmd.CombinedOutput()
			if err != nil || !strings.Contains(string(out), "--- PASS: TestKVFileChangedUnderSession") {
				t.Fatalf("a session computing on after its KV file was %s: the process (%v) said:\n%s", c.name, err, out)
			}
		})
	}
}

// readOnAfterChange reads a KV file, changes it, and computes on from
// what was read.
func readOnAfterChange(t *testing.T, typ string, change func(path string, size int64) error) {
	m := kvModel(t, LoadOptions{KVCacheType: typ})
	chat := seqTokens(40, 90)
	more := cat(chat, seqTokens(41, 30))
	file := kvFileBytes(t, m, keptSequence(t, m, chat))
	p := filepath.Join(t.TempDir(), "chat-1-changed.kv")
	if err := os.WriteFile(p, file, 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := OpenKVFile(p)
	if err != nil {
		t.Fatal(err)
	}
	st, _, err := m.ReadKVFile(f, "model-id", ReadKVOptions{Capacity: len(more)})
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	if mapsOf(t, p) {
		t.Error("the file is mapped after the read: its pages are not the process's own")
	}
	if err := change(p, int64(len(file))); err != nil {
		t.Fatal(err)
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
		t.Error("computed on after the file changed: logits differ from a fresh computation")
	}
}

// mapsOf reports whether the process maps the file at path
// (/proc/self/maps; false where there is none).
func mapsOf(t *testing.T, path string) bool {
	t.Helper()
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return false
	}
	return strings.Contains(string(maps), path)
}
