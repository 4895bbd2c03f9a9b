package gui

import (
	"log/slog"

	"fyne.io/fyne/v2"
)

// AppID is the application id: FyneApp.toml's, the D-Bus and
// notification name, and fyne's preferences folder.
const AppID = "dev.npuchat.app"

// AppName is the application's name as people see it: FyneApp.toml's,
// the tray item's title, the windows' and the About box's.
const AppName = "NPU Chat"

// metadata is what fyne knows of the app: FyneApp.toml's ID and name,
// and the version the build was given (FyneApp.toml's, through the
// build's -X main.version; see the Makefile and installer/).
func metadata(version string) fyne.AppMetadata {
	return fyne.AppMetadata{ID: AppID, Name: AppName, Version: version}
}

// Options say how Run starts.
type Options struct {
	// Logger receives what goes wrong in the tray (default: discarded).
	Logger *slog.Logger
	// ShowSetup opens the setup window at start (the first run).
	ShowSetup bool
}
