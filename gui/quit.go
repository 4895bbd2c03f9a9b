package gui

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"fyne.io/fyne/v2"
)

// loop is fyne's event loop as the tray uses it: do runs a function on
// fyne's goroutine, quit ends the loop, and once the loop has ended do
// drops what it is given.
//
// fyne 2.7.1 runs a function given to fyne.Do after its loop has ended
// on the caller's goroutine, not on its own: a service event, a
// finished background task or the ctx watcher reaching fyne.Do as the
// app quits then touched windows off fyne's goroutine, and fyne logged
// "Error in Fyne call thread" for each (four at every Quit, from
// quitApp hiding the windows a second time). Nothing that comes after
// the end is worth drawing, so do drops it.
type loop struct {
	fy fyne.App
	// ended is set on fyne's goroutine as the quit begins, and after
	// fyne.App.Run returns (fyne may quit by itself: SIGTERM, the
	// session ending).
	ended atomic.Bool
	// quitting is set by the first quit (on fyne's goroutine only).
	quitting bool
}

func newLoop(fy fyne.App) *loop { return &loop{fy: fy} }

// do runs f on fyne's goroutine without waiting, unless the loop has
// ended.
func (l *loop) do(f func()) {
	if l.ended.Load() {
		return
	}
	fyne.Do(func() {
		if l.ended.Load() {
			return
		}
		defer l.recoverAfterEnd()
		f()
	})
}

// glfwEnded is what GLFW panics with when a window is touched after it
// has ended.
const glfwEnded = "GLFW library is not initialized"

// recoverAfterEnd recovers the one panic fyne gives when it has quit by
// itself: fyne catches SIGTERM and SIGINT and quits at once, and the
// functions still queued then run after GLFW has ended, where every
// window call panics (NPU Chat exited with status 2 on SIGTERM when its
// own quit, 150 ms behind, came after fyne's: TestTrayWithATakenPortStaysUp
// on CI). The loop has ended then, so what f wanted is dropped, as do
// drops what comes after the end. Any other panic goes on.
func (l *loop) recoverAfterEnd() {
	r := recover()
	if r == nil {
		return
	}
	if strings.Contains(fmt.Sprint(r), glfwEnded) {
		l.ended.Store(true)
		return
	}
	panic(r)
}

// quit ends fyne's event loop with no window on screen; a second call
// does nothing. fyne 2.7.1 crashes (a nil viewport in
// window.processMouseMoved) when a pointer event reaches a window that
// Quit is closing, which a window under the pointer gets as it goes:
// NPU Chat exited with a panic on SIGTERM or Quit while the setup
// window was open (as it stays on a desktop without a tray host). So the
// windows are hidden first, and the quit comes once their last events
// have been handled. Call it on fyne's goroutine (a menu item, a
// button, or through do).
func (l *loop) quit() {
	if l.quitting || l.ended.Load() {
		return
	}
	l.quitting = true
	for _, w := range l.fy.Driver().AllWindows() {
		w.Hide()
	}
	go func() {
		time.Sleep(150 * time.Millisecond)
		l.do(func() {
			l.ended.Store(true)
			l.fy.Quit()
		})
	}()
}

// runUntil runs fyne's event loop (on the main goroutine, fyne's rule)
// until quit, fyne's own quit, or ctx's end (which quits as the menu's
// Quit does); when it returns, the loop has ended and do drops what it
// is given.
func (l *loop) runUntil(ctx context.Context) {
	ran := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
			l.do(l.quit)
		case <-ran:
		}
	}()
	l.fy.Run()
	l.ended.Store(true)
	close(ran)
}
