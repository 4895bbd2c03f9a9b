// Package gui is the desktop face of NPU Chat: the tray icon and menu
// (fyne.io/systray through fyne), and the setup and settings windows.
//
// It holds no business logic: it subscribes to the service's events and
// calls the service to start or stop the model. The tray arrives in a
// later issue; until then `npuchat` runs `serve` when there is no display.
package gui
