//go:build linux || freebsd || openbsd || netbsd

package gui

// trayHostMissing says why the desktop shows no tray icon, nil when it
// does. On Linux and the BSDs the icon is a StatusNotifierItem on the
// session D-Bus, shown only when a tray host runs.
func trayHostMissing() error { return trayHostOnSessionBus() }
