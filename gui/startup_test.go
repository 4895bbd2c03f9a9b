package gui

import (
	"errors"
	"strings"
	"testing"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/test"
	"fyne.io/fyne/v2/theme"
)

// TestStartupWindowFitsItsText: the start-up error window is as tall as
// its text needs, wrapped at the window's width, so that nothing is cut
// off at the bottom (the last line, the buttons) whether the error is
// short, names a long path, or is one long word; text longer than a
// window can be scrolls in a window of the largest height.
func TestStartupWindowFitsItsText(t *testing.T) {
	home := "/tmp/TestStartupErrorShowsOnTheDesktopsettings3246971340/001/home" // as tests/tray makes it
	tests := []struct {
		name    string
		e       StartupError
		scrolls bool
	}{
		{"short", StartupError{Err: errors.New("another NPU Chat holds the lock"), LogFile: "/tmp/logs/npuchat.log"}, false},
		{"long path", StartupError{Err: errors.New("config: settings file " + home + "/.config/npuchat/settings.json is not valid JSON (unexpected end of JSON input); fix or delete it"),
			LogFile: home + "/.local/share/npuchat/logs/npuchat.log"}, false},
		{"no log", StartupError{Err: errors.New("logs folder /data/logs: mkdir /data: permission denied"), LogErr: errors.New("logs folder /data/logs: mkdir /data: permission denied")}, false},
		{"one long word", StartupError{Err: errors.New(strings.Repeat("x", 400)), LogFile: "/tmp/logs/npuchat.log"}, false},
		{"very long", StartupError{Err: errors.New(strings.Repeat("FastFlowLM failed to start on the NPU again. ", 120)), LogFile: "/tmp/l/npuchat.log"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fy := test.NewTempApp(t)
			fy.Settings().SetTheme(theme.DefaultTheme()) // the fonts and sizes a user sees, not the test theme's
			w := newStartupWindow(newLoop(fy), tt.e, func() {})
			w.show()
			size := w.win.Canvas().Size()
			if size.Width != startupWidth || size.Height > startupMaxHeight {
				t.Fatalf("window %v; want %v wide, at most %v tall", size, startupWidth, startupMaxHeight)
			}
			view := w.scroll.Size()
			need := w.text.MinSize() // at the width the text is laid out at
			if w.text.Size().Width != view.Width || need.Width > view.Width {
				t.Errorf("text %v wide (needs %v) in a view %v wide: not wrapped at the window's width", w.text.Size().Width, need.Width, view.Width)
			}
			cut := need.Height > view.Height+0.5
			if cut != tt.scrolls {
				t.Errorf("text needs %v high, the view is %v high (window %v); scrolls %v, want %v", need.Height, view.Height, size, cut, tt.scrolls)
			}
			if tt.scrolls && size.Height != startupMaxHeight {
				t.Errorf("window %v high; text that scrolls wants the largest window, %v", size.Height, startupMaxHeight)
			}
			bottom := fyne.CurrentApp().Driver().AbsolutePositionForObject(w.buttons).Y + w.buttons.Size().Height
			if bottom > size.Height {
				t.Errorf("the buttons end at %v, below the window's %v", bottom, size.Height)
			}
			if w.text.Text != startupText(tt.e) {
				t.Errorf("text %q, want %q", w.text.Text, startupText(tt.e))
			}
		})
	}
}

// TestStartupText: the window says the reason, where the log is or why
// the error is in no log (once, when it is the same reason), and what
// to do.
func TestStartupText(t *testing.T) {
	bad := errors.New("logs folder /d/logs: mkdir /d: not a directory")
	tests := []struct {
		e    StartupError
		want string
	}{
		{StartupError{Err: errors.New("bad settings"), LogFile: "/l/npuchat.log"},
			"bad settings\n\nThis is also in the log: /l/npuchat.log\n\nFix it, then start NPU Chat again."},
		{StartupError{Err: bad, LogErr: bad},
			bad.Error() + "\n\nFor the same reason, it could not be written to the log either.\n\nFix it, then start NPU Chat again."},
		{StartupError{Err: errors.New("bad settings"), LogErr: bad},
			"bad settings\n\nIt could not be written to the log either: " + bad.Error() + "\n\nFix it, then start NPU Chat again."},
	}
	for _, tt := range tests {
		if got := startupText(tt.e); got != tt.want {
			t.Errorf("startupText(%v) =\n%q\nwant\n%q", tt.e, got, tt.want)
		}
		if v := startupView(tt.e); v.Icon != IconError || !strings.Contains(v.Tooltip, tt.e.Err.Error()) {
			t.Errorf("startupView(%v) = %+v", tt.e, v)
		}
	}
	if d := (StartupError{LogFile: "/l/npuchat.log"}).logDir(); d != "/l" {
		t.Errorf("logDir = %q, want /l", d)
	}
	if d := (StartupError{}).logDir(); d != "" {
		t.Errorf("logDir without a log file = %q, want none", d)
	}
}
