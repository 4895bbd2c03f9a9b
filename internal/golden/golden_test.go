package golden

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	cases := []struct {
		name    string
		file    string // "" means no file
		got     string
		write   bool
		wantErr []string // substrings of the error; nil means none
		after   string   // the file's content afterwards
	}{
		{"same", "a\nb\n", "a\nb\n", false, nil, "a\nb\n"},
		{"second line differs", "a\nb\n", "a\nc\n", false, []string{"line 2", `got: "c"`, `want: "b"`, "-update"}, "a\nb\n"},
		{"got is longer", "a\n", "a\nb\nc", false, []string{"line 2", `want: ""`}, "a\n"},
		{"got is shorter", "a\nb\nc", "a", false, []string{"line 2", `got: "(end of file)"`, `want: "b"`}, "a\nb\nc"},
		{"missing file", "", "x", false, []string{"read golden", "-update"}, ""},
		{"update rewrites", "old\n", "new\n", true, nil, "new\n"},
		{"update creates the folder", "", "new\n", true, nil, "new\n"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "sub", "x.golden")
			if c.file != "" {
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, []byte(c.file), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			err := check(path, []byte(c.got), c.write)
			switch {
			case c.wantErr == nil && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case c.wantErr != nil && err == nil:
				t.Fatalf("no error, want one containing %q", c.wantErr)
			}
			for _, s := range c.wantErr {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q lacks %q", err, s)
				}
			}
			b, _ := os.ReadFile(path)
			if string(b) != c.after {
				t.Errorf("file afterwards = %q, want %q", b, c.after)
			}
		})
	}
}

// recorder is a testing.TB that keeps the errors reported to it.
type recorder struct {
	testing.TB
	errs []string
}

func (r *recorder) Helper()           {}
func (r *recorder) Error(args ...any) { r.errs = append(r.errs, fmt.Sprint(args...)) }

func TestAssertReportsToT(t *testing.T) {
	if Update() {
		t.Skip("compares against fixed files; meaningless with -update")
	}
	path := filepath.Join(t.TempDir(), "x.golden")
	if err := os.WriteFile(path, []byte("want"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := &recorder{TB: t}
	Assert(r, path, []byte("want"))
	if len(r.errs) != 0 {
		t.Fatalf("equal output reported %d errors", len(r.errs))
	}
	AssertString(r, path, "other")
	if len(r.errs) != 1 {
		t.Fatalf("different output reported %d errors, want 1", len(r.errs))
	}
	if !strings.Contains(r.errs[0], path) {
		t.Errorf("the error does not name the golden file: %s", r.errs[0])
	}
}
