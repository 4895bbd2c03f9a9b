//go:build unix

package safefile

import (
	"errors"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestSpecialFilesRefusedAtOnce: a FIFO with no writer and a device are
// refused by Open without blocking or reading (an ordinary open of the
// FIFO would wait for a writer for ever; a read of /dev/zero never ends).
func TestSpecialFilesRefusedAtOnce(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "model_list.json")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ path, says string }{
		{fifo, "it is a FIFO"},
		{"/dev/zero", "it is a device"},
	} {
		_, err := ReadFile(tc.path, 1<<20)
		if !errors.Is(err, ErrNotRegular) || !strings.Contains(err.Error(), tc.path) || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s: err = %v, want ErrNotRegular naming it and saying %q", tc.path, err, tc.says)
		}
	}
}
