//go:build linux

package main

import (
	"bytes"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestVersionUnderTheCLocaleIsQuiet: under the C locale in its forms
// (containers and services run with LANG=C.UTF-8), a command prints its
// output and nothing on stderr: fyne, linked into the one executable,
// must not log that it cannot parse the locale.
func TestVersionUnderTheCLocaleIsQuiet(t *testing.T) {
	exe := buildNPUChat(t)
	for _, locale := range []string{"LANG=C", "LANG=POSIX", "LANG=C.UTF-8", "LANG=C.utf8", "LC_ALL=C.UTF-8", "LC_ALL=POSIX.UTF-8"} {
		t.Run(locale, func(t *testing.T) {
			cmd := exec.Command(exe, "version")
			cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), locale}
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			if err := cmd.Run(); err != nil {
				t.Fatalf("npuchat version: %v\n%s", err, stderr.String())
			}
			if !strings.HasPrefix(stdout.String(), "npuchat ") {
				t.Fatalf("stdout %q", stdout.String())
			}
			if stderr.Len() > 0 {
				t.Fatalf("stderr is not empty:\n%s", stderr.String())
			}
		})
	}
}
