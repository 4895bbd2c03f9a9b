//go:build !windows || cgo

package gui

import (
	"context"
	"errors"
	"log/slog"

	"fyne.io/fyne/v2"
	fyneapp "fyne.io/fyne/v2/app"
	"fyne.io/fyne/v2/driver/desktop"
	"fyne.io/systray"
)

// Run shows the tray icon and runs fyne's event loop until the user
// quits from the menu or ctx ends (SIGTERM); it must be called from the
// main goroutine (fyne's rule). It returns when the tray is gone; the
// caller then shuts the app down. On a desktop that shows no tray
// icons, the setup window opens even with opts.ShowSetup false and says
// why (controller.trayMissing).
func Run(ctx context.Context, a App, opts Options) error {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	fy := fyneapp.NewWithID(AppID)
	fy.SetIcon(AppIcon())
	desk, ok := fy.(desktop.App)
	if !ok {
		return errors.New("gui: this fyne driver has no system tray")
	}
	c := newController(ctx, fy, a, systrayHost{desk}, log)
	stop := c.start()
	if why := trayHostMissing(); why != nil {
		c.trayMissing(why)
	} else if opts.ShowSetup {
		c.showSetup()
	}
	go func() {
		<-ctx.Done()
		fyne.Do(func() { quitApp(fy) })
	}()
	fy.Run()
	stop()
	return nil
}

// systrayHost is the real tray: fyne's desktop app for the menu and the
// icon, and fyne.io/systray directly for what fyne does not expose (the
// tooltip, and the left click without a window to toggle).
type systrayHost struct{ desktop.App }

func (systrayHost) SetTooltip(s string)  { systray.SetTooltip(s) }
func (systrayHost) SetOnTapped(f func()) { systray.SetOnTapped(f) }
