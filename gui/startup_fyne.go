//go:build !windows || cgo

package gui

import (
	"context"
	"errors"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/driver/desktop"
)

// ShowStartupError shows a start-up error on the desktop until the user
// quits (or ctx ends): the tray icon in its error state with the reason
// as its tooltip and status line (and Open logs folder, Quit), a
// notification, and a window with the whole text. Like Run, it must be
// called from the main goroutine. The version is fyne's (the app could
// not start to say its own).
func ShowStartupError(ctx context.Context, e StartupError) error {
	fy := newFyneApp("")
	desk, ok := fy.(desktop.App)
	if !ok {
		return errors.New("gui: this fyne driver has no system tray")
	}
	l := newLoop(fy)
	host := systrayHost{desk}
	openLogs := func() {
		if err := openFolder(fy, e.logDir()); err != nil {
			fy.SendNotification(fyne.NewNotification("Could not open the logs folder", cut(err.Error(), 240)))
		}
	}
	win := newStartupWindow(l, e, openLogs)
	host.SetOnTapped(func() { l.do(win.show) })

	v := startupView(e)
	status := fyne.NewMenuItem(v.Status, nil)
	status.Disabled = true
	items := []*fyne.MenuItem{status, fyne.NewMenuItemSeparator()}
	if e.logDir() != "" {
		items = append(items, fyne.NewMenuItem(labelLogs, openLogs))
	}
	quit := fyne.NewMenuItem(labelQuit, l.quit)
	quit.IsQuit = true
	items = append(items, quit)
	host.SetSystemTrayIcon(TrayIcon(v.Icon))
	host.SetTooltip(v.Tooltip)
	host.SetSystemTrayMenu(fyne.NewMenu(AppName, items...))

	win.show()
	fy.SendNotification(fyne.NewNotification(startupTitle, cut(e.Err.Error(), 240)))
	l.runUntil(ctx)
	return nil
}
