package tray

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestThisBinaryIsQuietUnderTheCLocale: this package's test binary,
// which links fyne through gui, prints nothing about the locale under
// LANG=C.UTF-8 (fyne reads it at init, so the binary is run again,
// running no test). It must not import gui/fynelocale itself: gui does.
func TestThisBinaryIsQuietUnderTheCLocale(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "LANG=C.UTF-8"}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", os.Args[0], err, out)
	}
	if strings.Contains(strings.ToLower(string(out)), "locale") {
		t.Fatalf("the tests/tray binary logs about the locale:\n%s", out)
	}
}
