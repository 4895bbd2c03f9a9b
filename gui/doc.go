// Package gui is the desktop face of NPU Chat: the tray icon and menu,
// and the setup, settings and about windows.
//
// It holds no business logic. It drives an [App] (the assembled
// application of package app, or a fake in tests) and follows the
// service through one subscription: every event updates one [Snapshot],
// and the icon, the tooltip, the menu and the open windows are all drawn
// from it ([ViewOf] computes the words and the icon, without fyne), so
// the tray, the chat page and /api/status always agree. Installs too:
// the tray's Install starts the app's install and, like one the page
// started, follows it from the service's install events alone, as the
// install runner's status (install.Status) in its own words
// (install.Status.Words, the ones `npuchat install` and the page show). No goroutine
// touches a widget except through fyne.Do (loop.do, which drops what
// comes once fyne's loop has ended: fyne would run it on the caller's
// goroutine); what blocks (starting and stopping the model, the NPU
// check, installs) runs in a goroutine that reports back the same way,
// so neither the menu nor a window ever blocks the tray. The tests fail
// on fyne's "Error in Fyne call thread" warning (TestWindowScreenshots
// and the end-to-end tests in tests/tray read what fyne logs).
//
// The menu is built from sections (status, serving, engine, tools,
// about and quit; controller.menuItems), each a function, so a new one
// is one line there. The engine is a radio group drawn with ● and ○:
// fyne's menu items have only a check mark, which fyne.io/systray
// draws for a checked item alone. The tray item's title, the windows
// and fyne's metadata say [AppName]; the version is the build's
// (FyneApp.toml's, passed by the Makefile and installer/ as
// -X main.version).
//
// The Model submenu (models_menu.go) lists the model library: the
// tray reads it in a goroutine of its own (at start, after each model or
// state change, and every few seconds, since a model the page adds
// sends no event), and marks the loaded model from the status. Adding a
// model the user has, and choosing the models folder in Settings, go
// through fyne's own file and folder dialogs (a list of whole names);
// TestWindowScreenshots drives them under Xvfb by tapping what fyne
// draws, and tests/tray's TestTrayModelMenuOverDBus switches models
// through the menu over dbusmenu.
//
// Words: an error or a fallback reason is said as its sentence (the
// most specific part of the Go error chain, as the chat page says it,
// errorWords) in the menu, the tooltip and notifications; a window
// folds the whole error under Details; the log has it all. Without a
// tray icon, the setup window says what is served at the chat's
// address in the model's state, and is the switch (Start or Stop
// serving).
//
// The tray: a left click starts serving when the model is off and opens
// the chat when it is on; the icon shows off, loading, on or error
// (icons drawn by tools/icons), the tooltip says it in words, and
// notifications say when the model is ready, when it fell back from the
// NPU to the CPU and why, and when an install finished or failed.
//
// Dependencies, pinned:
//   - fyne.io/fyne/v2 v2.7.1, the newest release the module proxy
//     serves: desktop.App's SetSystemTrayMenu and SetSystemTrayIcon
//     draw the tray through fyne.io/systray, fyne.Do (since 2.6) makes
//     widget updates from goroutines safe, and its test driver renders
//     windows without a display for the unit tests. It needs cgo and the
//     GL and X11 headers on Linux (scripts/setup installs them).
//   - fyne.io/systray v1.12.2, newer than the pre-release fyne 2.7.1
//     asks for: v1.12 added SetOnTapped, the left click (the
//     StatusNotifierItem's Activate on Linux), which fyne only offers
//     as "show a window"; the tooltip is also set through it. On Linux
//     it speaks D-Bus (StatusNotifierItem, com.canonical.dbusmenu) in
//     pure Go, so the tray test drives it with a watcher of its own.
//   - github.com/BurntSushi/toml v1.5.0, in a test only: the TOML
//     reader fyne itself reads FyneApp.toml with (the version fyne
//     2.7.1 requires), to check that file's fields.
//
// Screenshots of the windows (TestWindowScreenshots, under Xvfb with
// fyne's GL driver) go to $NPUCHAT_ARTIFACTS/gui or .artifacts/gui.
package gui
