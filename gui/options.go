package gui

import "log/slog"

// AppID is the application id: FyneApp.toml's, the D-Bus and
// notification name, and fyne's preferences folder.
const AppID = "dev.npuchat.app"

// Options say how Run starts.
type Options struct {
	// Logger receives what goes wrong in the tray (default: discarded).
	Logger *slog.Logger
	// ShowSetup opens the setup window at start (the first run).
	ShowSetup bool
}
