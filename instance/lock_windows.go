//go:build windows

package instance

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/windows"
)

// FileLocker locks a file with LockFileEx.
type FileLocker struct{}

// TryLock implements Locker.
func (FileLocker) TryLock(path string) (func() error, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("single instance: %w", err)
	}
	ol := new(windows.Overlapped)
	err = windows.LockFileEx(windows.Handle(f.Fd()), windows.LOCKFILE_EXCLUSIVE_LOCK|windows.LOCKFILE_FAIL_IMMEDIATELY, 0, 1, 0, ol)
	if err != nil {
		f.Close()
		if errors.Is(err, windows.ERROR_LOCK_VIOLATION) {
			return nil, ErrRunning
		}
		return nil, fmt.Errorf("single instance: lock %s: %w", path, err)
	}
	return func() error {
		windows.UnlockFileEx(windows.Handle(f.Fd()), 0, 1, 0, ol)
		return f.Close()
	}, nil
}

// privateTempDir is not used on Windows (LOCALAPPDATA is per user).
func privateTempDir() (string, error) {
	return "", errors.New("single instance: LOCALAPPDATA is not set")
}
