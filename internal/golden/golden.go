// Package golden compares what a test produces with a file committed under
// testdata, and rewrites the file instead when the tests run with -update:
//
//	go test ./web -run TestAnswerFormats -update
//
// It is the one place that defines the -update flag, so every package's
// goldens are regenerated the same way, never by hand.
package golden

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files with what the tests produce")

// Update reports whether the tests run with -update, for goldens written
// another way (an oracle program, a generator) than by Assert.
func Update() bool { return *update }

// Assert fails t when got differs from the file at path, naming the first
// line that differs. With -update it writes got to path first (making its
// folder), so the next run compares against it.
func Assert(t testing.TB, path string, got []byte) {
	t.Helper()
	if err := check(path, got, *update); err != nil {
		t.Error(err)
	}
}

// AssertString is Assert for text.
func AssertString(t testing.TB, path, got string) {
	t.Helper()
	Assert(t, path, []byte(got))
}

// check writes got to path when write is set, then compares.
func check(path string, got []byte, write bool) error {
	if write {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return fmt.Errorf("update golden %s: %w", path, err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			return fmt.Errorf("update golden %s: %w", path, err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("read golden: %w (run the test with -update to write it, then review the file)", err)
	}
	if bytes.Equal(got, want) {
		return nil
	}
	i := firstDiff(got, want)
	return fmt.Errorf("%s differs at line %d (run with -update to accept after checking the change):\n got: %q\nwant: %q\nwhole output:\n%s",
		path, i+1, lineAt(got, i), lineAt(want, i), got)
}

// firstDiff returns the index of the first line where a and b differ.
func firstDiff(a, b []byte) int {
	la, lb := strings.Split(string(a), "\n"), strings.Split(string(b), "\n")
	for i := range la {
		if i >= len(lb) || la[i] != lb[i] {
			return i
		}
	}
	return len(la)
}

// lineAt returns line i of b, or a note that b has fewer lines.
func lineAt(b []byte, i int) string {
	lines := strings.Split(string(b), "\n")
	if i < len(lines) {
		return lines[i]
	}
	return "(end of file)"
}
