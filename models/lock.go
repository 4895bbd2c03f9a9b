package models

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/npuchat/npuchat/config"
)

// lockInstalls takes the lock that keeps two installs or uninstalls
// (the tray and a terminal, say) from working on the same files at once.
// The lock is held by the open file and released by the returned
// function or when the process ends.
func lockInstalls(cfg *config.Config) (func(), error) {
	dir := filepath.Join(cfg.DataDir, "installed")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	if err := lockFile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("another NPU Chat install or uninstall is running (%v); wait for it to finish", err)
	}
	return func() { unlockFile(f); f.Close() }, nil
}
