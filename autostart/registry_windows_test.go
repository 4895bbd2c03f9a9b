//go:build windows

package autostart

import (
	"errors"
	"os"
	"testing"
)

// TestRealRunKey writes, reads and removes the real Run value (under
// Wine in this project's tests), restoring what was there before.
func TestRealRunKey(t *testing.T) {
	k, err := OpenRunKey()
	if err != nil {
		t.Fatal(err)
	}
	before, _, getErr := k.GetStringValue(RunValueName)
	k.Close()
	t.Cleanup(func() {
		k, err := OpenRunKey()
		if err != nil {
			t.Error(err)
			return
		}
		defer k.Close()
		if getErr == nil {
			k.SetStringValue(RunValueName, before)
		} else {
			k.DeleteValue(RunValueName)
		}
	})
	e := ForOS("windows", os.Getenv)
	if err := e.Disable(); err != nil {
		t.Fatal(err)
	}
	if on, err := e.Enabled(); on || err != nil {
		t.Fatalf("after Disable: %v %v", on, err)
	}
	exe := `C:\Program Files\NPU Chat\npuchat.exe`
	if err := e.Enable(exe); err != nil {
		t.Fatal(err)
	}
	if on, err := e.Enabled(); !on || err != nil {
		t.Fatalf("after Enable: %v %v", on, err)
	}
	k, _ = OpenRunKey()
	data, _, err := k.GetStringValue(RunValueName)
	k.Close()
	if err != nil || data != `"C:\Program Files\NPU Chat\npuchat.exe" --hidden` {
		t.Fatalf("Run value %q %v", data, err)
	}
	if err := e.Disable(); err != nil {
		t.Fatal(err)
	}
	k, _ = OpenRunKey()
	_, _, err = k.GetStringValue(RunValueName)
	k.Close()
	if !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("after Disable the value reads %v; want not found", err)
	}
}
