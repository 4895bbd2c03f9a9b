package mmapfile

import (
	"os"
	"path/filepath"
	"testing"
)

func TestOpen(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	if err := os.WriteFile(p, []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	if string(f.Data) != "hello" {
		t.Errorf("data %q", f.Data)
	}
	// Advice changes nothing that is read: inside the data, and outside
	// it (ignored).
	for _, b := range [][]byte{f.Data[1:4], f.Data, []byte("other")} {
		f.WillNeed(b)
		f.Release(b)
	}
	if string(f.Data) != "hello" {
		t.Errorf("data after advice %q", f.Data)
	}
	if err := f.Close(); err != nil {
		t.Error(err)
	}
	if _, err := Open(dir); err == nil {
		t.Error("opening a directory succeeded")
	}
	if _, err := Open(filepath.Join(dir, "missing")); err == nil {
		t.Error("opening a missing file succeeded")
	}
	// The fallback reads the same bytes.
	fh, _ := os.Open(p)
	defer fh.Close()
	data, _, err := readAll(fh, 5)
	if err != nil || string(data) != "hello" {
		t.Errorf("readAll: %q %v", data, err)
	}
}
