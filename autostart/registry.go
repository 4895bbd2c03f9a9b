package autostart

import (
	"errors"
	"fmt"
	"os"
)

// RunKey is the part of an open registry key the Windows entry uses;
// golang.org/x/sys/windows/registry.Key satisfies it. A missing value
// is reported with an error for which errors.Is(err, os.ErrNotExist)
// holds (registry.ErrNotExist is syscall.ERROR_FILE_NOT_FOUND, which
// does).
type RunKey interface {
	GetStringValue(name string) (value string, valtype uint32, err error)
	SetStringValue(name, value string) error
	DeleteValue(name string) error
	Close() error
}

// Registry is the Windows entry: the "NPU Chat" value of the current
// user's Run key.
type Registry struct {
	// Open opens HKCU\Software\Microsoft\Windows\CurrentVersion\Run for
	// reading and writing ([OpenRunKey] on Windows; a fake in tests).
	Open func() (RunKey, error)
}

// Enabled implements Entry: the value exists and names a program.
func (r *Registry) Enabled() (bool, error) {
	k, err := r.Open()
	if err != nil {
		return false, fmt.Errorf("launch at login: open HKCU\\%s: %w", RunKeyPath, err)
	}
	defer k.Close()
	data, _, err := k.GetStringValue(RunValueName)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("launch at login: read HKCU\\%s\\%s: %w", RunKeyPath, RunValueName, err)
	}
	return commandExe(data) != "", nil
}

// Enable implements Entry.
func (r *Registry) Enable(exe string) error {
	k, err := r.Open()
	if err != nil {
		return fmt.Errorf("launch at login: open HKCU\\%s: %w", RunKeyPath, err)
	}
	defer k.Close()
	if err := k.SetStringValue(RunValueName, CommandLine(exe)); err != nil {
		return fmt.Errorf("launch at login: write HKCU\\%s\\%s: %w", RunKeyPath, RunValueName, err)
	}
	return nil
}

// Disable implements Entry.
func (r *Registry) Disable() error {
	k, err := r.Open()
	if err != nil {
		return fmt.Errorf("launch at login: open HKCU\\%s: %w", RunKeyPath, err)
	}
	defer k.Close()
	if err := k.DeleteValue(RunValueName); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("launch at login: delete HKCU\\%s\\%s: %w", RunKeyPath, RunValueName, err)
	}
	return nil
}
