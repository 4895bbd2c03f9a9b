//go:build windows

package models

import (
	"os"
	"testing"

	"golang.org/x/sys/windows"
)

// TestFileInUse: the rename Windows refuses for a file FastFlowLM has
// open is told apart, so that the install's error says to stop serving.
func TestFileInUse(t *testing.T) {
	err := &os.LinkError{Op: "rename", Old: `C:\m\model.q4nx`, New: `C:\m\.old\model.q4nx`, Err: windows.ERROR_SHARING_VIOLATION}
	if !fileInUse(err) {
		t.Fatal("a sharing violation is not seen as a file in use")
	}
	if fileInUse(os.ErrNotExist) {
		t.Fatal("a missing file is seen as in use")
	}
}
