package gui

import (
	"fmt"
	"net/url"
	"path/filepath"
	"strings"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"
)

// StartupError is a start-up error the tray cannot start without (a
// settings file that does not parse, a data folder that cannot be
// written, the single-instance lock), as ShowStartupError shows it: the
// Windows GUI build has no console, so stderr alone says nothing.
type StartupError struct {
	// Err is what went wrong, in words a person can act on.
	Err error
	// LogFile is the log file the error was written to ("" when it
	// could not be); LogErr, when it could not be written, says why.
	LogFile string
	LogErr  error
}

// logDir is the folder "Open logs folder" opens: LogFile's, "" (no
// button, no menu item) when the error is in no log file.
func (e StartupError) logDir() string {
	if e.LogFile == "" {
		return ""
	}
	return filepath.Dir(e.LogFile)
}

// startupTitle heads the window and the notification.
const startupTitle = "NPU Chat could not start"

// startupView is what the tray shows for a start-up error: the error
// icon, the reason as the status line and in the tooltip.
func startupView(e StartupError) View {
	reason := strings.Join(strings.Fields(e.Err.Error()), " ")
	return View{
		Icon:    IconError,
		Status:  cut("Error: "+reason, menuLine),
		Tooltip: startupTitle + ": " + reason,
	}
}

// startupText is the window's text: the reason, where the log is (or
// why it is in no log), and what to do.
func startupText(e StartupError) string {
	text := e.Err.Error()
	switch {
	case e.LogErr != nil && e.LogErr.Error() == e.Err.Error():
		text += "\n\nFor the same reason, it could not be written to the log either."
	case e.LogErr != nil:
		text += "\n\nIt could not be written to the log either: " + e.LogErr.Error()
	case e.LogFile != "":
		text += "\n\nThis is also in the log: " + e.LogFile
	}
	return text + "\n\nFix it, then start NPU Chat again."
}

// openFolder opens dir in the desktop's file manager.
func openFolder(fy fyne.App, dir string) error {
	abs, err := filepath.Abs(dir)
	if err == nil {
		err = fy.OpenURL(&url.URL{Scheme: "file", Path: filepath.ToSlash(abs)})
	}
	if err != nil {
		return fmt.Errorf("open %s: %w", dir, err)
	}
	return nil
}

// The start-up error window is startupWidth wide and as tall as its
// text needs, up to startupMaxHeight; longer text scrolls.
const (
	startupWidth     = 560
	startupMaxHeight = 640
)

// startupWindow is the window of a start-up error: a heading, the whole
// text (wrapped, plain text), and the Open logs folder and Quit buttons.
type startupWindow struct {
	win     fyne.Window
	head    *widget.Label
	text    *widget.Label
	scroll  *container.Scroll
	buttons *fyne.Container
}

// newStartupWindow makes the window of e; Quit ends l, and Open logs
// folder (there when e is in a log file) calls openLogs. Closing the
// window hides it: the tray icon stays, with Quit.
func newStartupWindow(l *loop, e StartupError, openLogs func()) *startupWindow {
	fy := l.fy
	w := &startupWindow{win: fy.NewWindow(startupTitle), head: heading(startupTitle), text: wrapped(startupText(e))}
	w.win.SetIcon(AppIcon())
	w.win.SetCloseIntercept(w.win.Hide)
	w.buttons = container.NewHBox()
	if e.logDir() != "" {
		w.buttons.Add(widget.NewButtonWithIcon(labelLogs, theme.FolderOpenIcon(), openLogs))
	}
	w.buttons.Add(widget.NewButtonWithIcon(labelQuit, theme.LogoutIcon(), l.quit))
	w.scroll = container.NewVScroll(w.text)
	w.win.SetContent(container.NewBorder(w.head, container.NewCenter(w.buttons), nil, nil, w.scroll))
	return w
}

// show sizes the window to its text and shows it.
func (w *startupWindow) show() {
	w.win.Resize(w.fit())
	w.win.Show()
}

// fit is the window's size: startupWidth, and the height the heading,
// the text wrapped at that width and the buttons need, with the
// padding between them and around the window (fyne pads a window's
// content), at most startupMaxHeight. A wrapped label's height depends
// on its width, so the text is laid out at the width it will have
// before it is measured.
func (w *startupWindow) fit() fyne.Size {
	pad := theme.Padding()
	inner := float32(startupWidth) - 2*pad
	w.text.Resize(fyne.NewSize(inner, w.text.MinSize().Height))
	h := 2*pad + w.head.MinSize().Height + pad + w.text.MinSize().Height + pad + w.buttons.MinSize().Height
	return fyne.NewSize(startupWidth, min(h, startupMaxHeight))
}
