package gui

import (
	"embed"

	"fyne.io/fyne/v2"
)

// assets are the icons drawn by tools/icons (`go run ./tools/icons`
// regenerates them; its test fails when they are stale), and the
// buttons' icons fyne's theme lacks (icons/chat.svg, drawn by hand). An
// embed.FS is read-only: it is not mutable state.
//
//go:embed icon.png icons/tray-off.png icons/tray-loading.png icons/tray-on.png icons/tray-error.png icons/chat.svg
var assets embed.FS

// AppIcon is NPU Chat's icon (512 px), for windows and notifications.
func AppIcon() fyne.Resource { return resource("icon.png") }

// TrayIcon is the tray icon of a state.
func TrayIcon(i Icon) fyne.Resource { return resource("icons/tray-" + string(i) + ".png") }

func resource(name string) fyne.Resource {
	b, err := assets.ReadFile(name)
	if err != nil {
		panic("gui: icon " + name + " is not embedded: " + err.Error()) // a build mistake, caught by the tests
	}
	return fyne.NewStaticResource(name, b)
}
