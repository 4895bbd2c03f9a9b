//go:build unix

package models

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/npuchat/npuchat/config"
)

// TestInstallLockErrors: only a lock another process holds says that
// another install is running; a lock that fails otherwise (ENOLCK on a
// network home folder, EACCES) or a lock file that cannot be made says
// what failed and where.
func TestInstallLockErrors(t *testing.T) {
	for _, tc := range []struct {
		name   string
		setup  func(t *testing.T, cfg *config.Config) // before the lock is taken
		lock   func(*os.File) error                   // nil: the real one
		want   []string                               // in the error ("<lock>": the lock file's path)
		refuse string                                 // not in the error
	}{
		{"held by another install", func(t *testing.T, cfg *config.Config) {
			unlock, err := lockInstalls(cfg)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(unlock)
		}, nil, []string{"another NPU Chat install or uninstall is running", "<lock>"}, ""},
		{"ENOLCK (a network folder)", nil, func(*os.File) error { return unix.ENOLCK },
			[]string{"could not lock <lock>", "no locks available", "NPUCHAT_DATA"}, "another"},
		{"EACCES", nil, func(*os.File) error { return unix.EACCES },
			[]string{"could not lock <lock>", "permission denied"}, "another"},
		{"data folder is a file", func(t *testing.T, cfg *config.Config) {
			if err := os.WriteFile(cfg.DataDir, []byte("not a folder"), 0o600); err != nil {
				t.Fatal(err)
			}
		}, nil, []string{"make the folder of the install lock", "<data>"}, "another"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := &config.Config{DataDir: filepath.Join(t.TempDir(), "data")}
			if tc.setup != nil {
				tc.setup(t, cfg)
			}
			lock := tc.lock
			if lock == nil {
				lock = lockFile
			}
			unlock, err := takeInstallLock(cfg, lock)
			if err == nil {
				unlock()
				t.Fatal("the lock was taken")
			}
			r := strings.NewReplacer("<lock>", filepath.Join(cfg.DataDir, "installed", ".lock"), "<data>", cfg.DataDir)
			for _, w := range tc.want {
				if w = r.Replace(w); !strings.Contains(err.Error(), w) {
					t.Errorf("the error lacks %q: %v", w, err)
				}
			}
			if held := errors.Is(err, errInstallRunning); held != (tc.refuse == "") {
				t.Errorf("errors.Is(err, errInstallRunning) = %v: %v", held, err)
			}
			if tc.refuse != "" && strings.Contains(err.Error(), tc.refuse) {
				t.Errorf("the error says %q: %v", tc.refuse, err)
			}
		})
	}
}
