//go:build !(linux || freebsd || openbsd || netbsd)

package gui

// trayHostMissing is nil: Windows and macOS always have a tray.
func trayHostMissing() error { return nil }
