package gui

import (
	"time"

	"fyne.io/fyne/v2"
)

// quitApp ends fyne's event loop with no window on screen. fyne 2.7.1
// crashes (a nil viewport in window.processMouseMoved) when a pointer
// event reaches a window that Quit is closing, which a window under the
// pointer gets as it goes: NPU Chat exited with a panic on SIGTERM or
// Quit while the setup window was open (as it stays on a desktop without
// a tray host). So the windows are hidden first, and the quit comes once
// their last events have been handled. Call it on fyne's goroutine.
func quitApp(fy fyne.App) {
	for _, w := range fy.Driver().AllWindows() {
		w.Hide()
	}
	go func() {
		time.Sleep(150 * time.Millisecond)
		fyne.Do(fy.Quit)
	}()
}
