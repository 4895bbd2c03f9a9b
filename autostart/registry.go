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

// ApprovedKey is the part of the StartupApproved\Run key the Windows
// entry uses; golang.org/x/sys/windows/registry.Key satisfies it.
type ApprovedKey interface {
	GetBinaryValue(name string) (value []byte, valtype uint32, err error)
	DeleteValue(name string) error
	Close() error
}

// Registry is the Windows entry: the "NPU Chat" value of the current
// user's Run key, unless switched off in StartupApproved\Run.
type Registry struct {
	// Open opens HKCU\Software\Microsoft\Windows\CurrentVersion\Run for
	// reading and writing ([OpenRunKey] on Windows; a fake in tests).
	Open func() (RunKey, error)
	// OpenApproved opens HKCU\[ApprovedKeyPath] for reading and deleting
	// values ([OpenApprovedKey] on Windows); nil leaves it unread. Task
	// Manager's Startup apps and Settings > Apps > Startup switch a Run
	// entry off there, without removing it: a binary value of the same
	// name whose first byte is odd (03) is off, even (02) or absent on.
	OpenApproved func() (ApprovedKey, error)
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
	if commandExe(data) == "" {
		return false, nil
	}
	return r.approved()
}

// approved reports whether the entry is not switched off in
// StartupApproved\Run (a missing key or value is not).
func (r *Registry) approved() (bool, error) {
	if r.OpenApproved == nil {
		return true, nil
	}
	k, err := r.OpenApproved()
	if errors.Is(err, os.ErrNotExist) {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("launch at login: open HKCU\\%s: %w", ApprovedKeyPath, err)
	}
	defer k.Close()
	b, _, err := k.GetBinaryValue(RunValueName)
	if errors.Is(err, os.ErrNotExist) {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("launch at login: read HKCU\\%s\\%s: %w", ApprovedKeyPath, RunValueName, err)
	}
	return len(b) == 0 || b[0]&1 == 0, nil
}

// approve removes a "switched off" mark from StartupApproved\Run, so
// that Windows starts the entry again (no value means on).
func (r *Registry) approve() error {
	if r.OpenApproved == nil {
		return nil
	}
	k, err := r.OpenApproved()
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("launch at login: open HKCU\\%s: %w", ApprovedKeyPath, err)
	}
	defer k.Close()
	if err := k.DeleteValue(RunValueName); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("launch at login: it is switched off in Task Manager's Startup apps, and clearing that failed (delete HKCU\\%s\\%s: %w); switch NPU Chat on there", ApprovedKeyPath, RunValueName, err)
	}
	return nil
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
	return r.approve()
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
