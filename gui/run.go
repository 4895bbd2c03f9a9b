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
	fy := newFyneApp(a.Version())
	desk, ok := fy.(desktop.App)
	if !ok {
		return errors.New("gui: this fyne driver has no system tray")
	}
	run(ctx, fy, a, systrayHost{desk}, opts, trayHostMissing)
	return nil
}

// newFyneApp makes fyne's app with NPU Chat's identity: its ID, and the
// name and version that fyne shows (the tray item's title is the
// metadata's name; without it fyne titles the item with the ID).
func newFyneApp(version string) fyne.App {
	fyneapp.SetMetadata(metadata(version))
	fy := fyneapp.NewWithID(AppID)
	fy.SetIcon(AppIcon())
	return fy
}

// run is Run on a fyne app and a tray host.
func run(ctx context.Context, fy fyne.App, a App, host trayHost, opts Options, missing func() error) {
	_, runLoop := startTray(ctx, fy, a, host, opts, missing)
	runLoop()
}

// startTray starts the tray on a fyne app and a tray host (the
// screenshot test gives a fake host): the controller following the
// app, and the setup window when asked, or when missing (on a real
// desktop trayHostMissing) says there is no tray. runLoop runs fyne's
// loop until the quit, then stops following the app.
func startTray(ctx context.Context, fy fyne.App, a App, host trayHost, opts Options, missing func() error) (c *controller, runLoop func()) {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	l := newLoop(fy)
	c = newController(ctx, l, a, host, log)
	stop := c.start()
	if why := missing(); why != nil {
		c.trayMissing(why)
	} else if opts.ShowSetup {
		c.showSetup()
	}
	return c, func() {
		l.runUntil(ctx)
		stop()
	}
}

// systrayHost is the real tray: fyne's desktop app for the menu and the
// icon, and fyne.io/systray directly for what fyne does not expose (the
// tooltip, and the left click without a window to toggle).
type systrayHost struct{ desktop.App }

func (systrayHost) SetTooltip(s string)  { systray.SetTooltip(s) }
func (systrayHost) SetOnTapped(f func()) { systray.SetOnTapped(f) }
