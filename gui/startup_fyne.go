//go:build !windows || cgo

package gui

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"

	"fyne.io/fyne/v2"
	fyneapp "fyne.io/fyne/v2/app"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/driver/desktop"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"
)

// ShowStartupError shows a start-up error on the desktop until the user
// quits (or ctx ends): the tray icon in its error state with the reason
// as its tooltip and status line (and Open logs folder, Quit), a
// notification, and a window with the whole text. Like Run, it must be
// called from the main goroutine.
func ShowStartupError(ctx context.Context, e StartupError) error {
	fy := fyneapp.NewWithID(AppID)
	fy.SetIcon(AppIcon())
	desk, ok := fy.(desktop.App)
	if !ok {
		return errors.New("gui: this fyne driver has no system tray")
	}
	host := systrayHost{desk}
	openLogs := func() {
		if err := openFolder(fy, e.logDir()); err != nil {
			fy.SendNotification(fyne.NewNotification("Could not open the logs folder", cut(err.Error(), 240)))
		}
	}
	win := newStartupWindow(fy, e, openLogs)
	host.SetOnTapped(func() { fyne.Do(win.show) })

	v := startupView(e)
	status := fyne.NewMenuItem(v.Status, nil)
	status.Disabled = true
	items := []*fyne.MenuItem{status, fyne.NewMenuItemSeparator()}
	if e.logDir() != "" {
		items = append(items, fyne.NewMenuItem(labelLogs, openLogs))
	}
	quit := fyne.NewMenuItem(labelQuit, fy.Quit)
	quit.IsQuit = true
	items = append(items, quit)
	host.SetSystemTrayIcon(TrayIcon(v.Icon))
	host.SetTooltip(v.Tooltip)
	host.SetSystemTrayMenu(fyne.NewMenu("NPU Chat", items...))

	win.show()
	fy.SendNotification(fyne.NewNotification(startupTitle, cut(e.Err.Error(), 240)))
	go func() {
		<-ctx.Done()
		fyne.Do(fy.Quit)
	}()
	fy.Run()
	return nil
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

// newStartupWindow makes the window of e; Quit quits fy, and Open logs
// folder (there when e is in a log file) calls openLogs. Closing the
// window hides it: the tray icon stays, with Quit.
func newStartupWindow(fy fyne.App, e StartupError, openLogs func()) *startupWindow {
	w := &startupWindow{win: fy.NewWindow(startupTitle), head: heading(startupTitle), text: wrapped(startupText(e))}
	w.win.SetIcon(AppIcon())
	w.win.SetCloseIntercept(w.win.Hide)
	w.buttons = container.NewHBox()
	if e.logDir() != "" {
		w.buttons.Add(widget.NewButtonWithIcon(labelLogs, theme.FolderOpenIcon(), openLogs))
	}
	w.buttons.Add(widget.NewButtonWithIcon(labelQuit, theme.CancelIcon(), fy.Quit))
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
