package tray

import (
	"strings"
	"testing"
)

// fyneThreadError starts the line fyne 2.7.1 logs (internal/async) when
// a call that must run on fyne's goroutine runs on another, or when
// fyne.DoAndWait is called from fyne's own: the warning that a widget or
// window was touched off its thread, which can crash or corrupt it.
const fyneThreadError = "Error in Fyne call thread"

// noFyneThreadErrors fails the test when the program's output (fyne
// logs to stderr through the standard log package) has a fyne thread
// warning, with the lines that follow it (fyne names the caller there).
func noFyneThreadErrors(t *testing.T, output string) {
	t.Helper()
	lines := strings.Split(output, "\n")
	var found []string
	for i, l := range lines {
		if strings.Contains(l, fyneThreadError) {
			found = append(found, strings.Join(lines[i:min(i+3, len(lines))], "\n"))
		}
	}
	if len(found) > 0 {
		t.Errorf("fyne logged %d call-thread errors (a fyne call off fyne's goroutine):\n%s", len(found), strings.Join(found, "\n"))
	}
}
