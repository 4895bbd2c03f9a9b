package gui

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestQuietUnderTheCLocale: a program that links the tray (this test
// binary, tests/tray's, npuchat) prints nothing about the locale under
// the C locale in its forms: fyne reads it at init, before any test
// runs, so the binary is run again, running no test.
func TestQuietUnderTheCLocale(t *testing.T) {
	for _, locale := range []string{"LANG=C.UTF-8", "LANG=C.utf8", "LC_ALL=C.UTF-8", "LC_ALL=POSIX.UTF-8", "LANG=C"} {
		t.Run(locale, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), locale}
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("%s: %v\n%s", os.Args[0], err, out)
			}
			if strings.Contains(strings.ToLower(string(out)), "locale") {
				t.Fatalf("the test binary logs about the locale:\n%s", out)
			}
		})
	}
}
