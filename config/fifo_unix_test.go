//go:build unix

package config

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestSettingsFIFODoesNotHang (issue 13, item 7): a FIFO at the settings
// path is refused at once, not read forever.
func TestSettingsFIFODoesNotHang(t *testing.T) {
	path := filepath.Join(t.TempDir(), "settings.json")
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := Load(MapEnv(map[string]string{"HOME": t.TempDir(), "NPUCHAT_CONFIG": path}), "linux")
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "not a regular file") {
			t.Fatalf("err = %v", err)
		}
	case <-time.After(60 * time.Second): // a failure bound
		t.Fatal("Load blocked on a FIFO settings file (not returned after 60 s)")
	}
}
