package gui

import (
	"errors"
	"testing"

	"fyne.io/fyne/v2/test"
)

// TestLoopAfterFyneQuitByItself: a function do runs after fyne has quit
// by itself (SIGTERM: fyne's own handler quits first, and what is still
// queued runs after GLFW has ended) panics in GLFW; do drops it and the
// loop counts as ended, so nothing more is run. Any other panic is not
// hidden.
func TestLoopAfterFyneQuitByItself(t *testing.T) {
	l := newLoop(test.NewTempApp(t))
	done := make(chan any, 1)
	run := func(f func()) {
		go func() { // fyne.Do's function runs on fyne's goroutine
			defer func() { done <- recover() }()
			l.do(f)
		}()
	}
	ran := make(chan struct{}, 1)
	run(func() { ran <- struct{}{}; panic(errors.New("NotInitialized: The " + glfwEnded)) })
	if r := <-done; r != nil {
		t.Fatalf("the panic after fyne's end escaped: %v", r)
	}
	<-ran
	if !l.ended.Load() {
		t.Fatal("the loop does not count as ended after GLFW's end")
	}
	later := false
	run(func() { later = true })
	<-done
	if later {
		t.Error("a function was run after the loop ended")
	}

	other := newLoop(test.NewTempApp(t))
	l = other
	run(func() { panic("a bug") })
	if r := <-done; r != "a bug" {
		t.Errorf("another panic was %v, want it passed on", r)
	}
}
