//go:build !windows || cgo

package gui

import (
	"context"
	"errors"
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
	v := startupView(e)
	win := fy.NewWindow(startupTitle)
	win.SetIcon(AppIcon())
	win.SetCloseIntercept(win.Hide) // the tray stays, with Quit
	win.Resize(fyne.NewSize(560, 280))
	host.SetOnTapped(func() { fyne.Do(win.Show) })
	openLogs := func() {
		if dir, err := filepath.Abs(e.LogDir); err == nil {
			fy.OpenURL(&url.URL{Scheme: "file", Path: filepath.ToSlash(dir)})
		}
	}
	status := fyne.NewMenuItem(v.Status, nil)
	status.Disabled = true
	items := []*fyne.MenuItem{status, fyne.NewMenuItemSeparator()}
	buttons := container.NewHBox()
	if e.LogDir != "" {
		items = append(items, fyne.NewMenuItem(labelLogs, openLogs))
		buttons.Add(widget.NewButtonWithIcon(labelLogs, theme.FolderOpenIcon(), openLogs))
	}
	quit := fyne.NewMenuItem(labelQuit, fy.Quit)
	quit.IsQuit = true
	items = append(items, quit)
	buttons.Add(widget.NewButtonWithIcon(labelQuit, theme.CancelIcon(), fy.Quit))
	host.SetSystemTrayIcon(TrayIcon(v.Icon))
	host.SetTooltip(v.Tooltip)
	host.SetSystemTrayMenu(fyne.NewMenu("NPU Chat", items...))

	win.SetContent(container.NewBorder(heading(startupTitle), container.NewCenter(buttons), nil, nil,
		container.NewVScroll(wrapped(startupText(e)))))
	win.Show()
	fy.SendNotification(fyne.NewNotification(startupTitle, cut(e.Err.Error(), 240)))
	go func() {
		<-ctx.Done()
		fyne.Do(fy.Quit)
	}()
	fy.Run()
	return nil
}
