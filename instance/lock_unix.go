//go:build unix

package instance

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// FileLocker locks a file with flock(2).
type FileLocker struct{}

// TryLock implements Locker.
func (FileLocker) TryLock(path string) (func() error, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("single instance: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, ErrRunning
		}
		return nil, fmt.Errorf("single instance: lock %s: %w", path, err)
	}
	return f.Close, nil // closing the file releases the lock
}

// privateTempDir is a folder in the temporary folder that only this
// user owns and reaches (for systems without XDG_RUNTIME_DIR).
func privateTempDir() (string, error) {
	dir := filepath.Join(os.TempDir(), fmt.Sprintf("npuchat-%d", os.Getuid()))
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return "", fmt.Errorf("single instance: %w", err)
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return "", fmt.Errorf("single instance: %w", err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !fi.IsDir() || !ok || int(st.Uid) != os.Getuid() || fi.Mode().Perm()&0o077 != 0 {
		return "", fmt.Errorf("single instance: %s is not a folder only this user owns; remove it", dir)
	}
	return dir, nil
}
