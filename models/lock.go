package models

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/npuchat/npuchat/config"
)

// errInstallRunning: another process holds the install lock.
var errInstallRunning = errors.New("another NPU Chat install or uninstall is running")

// lockInstalls takes the lock that keeps two installs or uninstalls
// (the tray and a terminal, say) from working on the same files at once.
// The lock is held by the open file and released by the returned
// function or when the process ends.
func lockInstalls(cfg *config.Config) (func(), error) {
	return takeInstallLock(cfg, lockFile)
}

// takeInstallLock is lockInstalls with the file lock given (tests pass
// one that fails as a network folder's does). Only a lock that another
// process holds says "another install is running"; any other failure
// (the folder cannot be made, the file cannot be opened, the file
// system has no locks: ENOLCK on some network home folders) says what
// failed and where.
func takeInstallLock(cfg *config.Config, lock func(*os.File) error) (func(), error) {
	dir := filepath.Join(cfg.DataDir, "installed")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("make the folder of the install lock: %w", err)
	}
	path := filepath.Join(dir, ".lock")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open the install lock: %w", err)
	}
	if err := lock(f); err != nil {
		f.Close()
		if lockHeld(err) {
			return nil, fmt.Errorf("%w (it holds %s); wait for it to finish", errInstallRunning, path)
		}
		return nil, fmt.Errorf("could not lock %s, which keeps two installs apart: %w (a network folder may not support locks; set NPUCHAT_DATA to a local folder)", path, err)
	}
	return func() { unlockFile(f); f.Close() }, nil
}
