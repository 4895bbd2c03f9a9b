package gui

import (
	"errors"
	"fmt"

	"github.com/godbus/dbus/v5"
)

// trayWatcher is the D-Bus name of the StatusNotifierWatcher: the part
// of a desktop's panel (KDE's, GNOME's AppIndicator extension, waybar)
// that tray icons register with. fyne.io/systray's icon appears only
// while some program owns it.
const trayWatcher = "org.kde.StatusNotifierWatcher"

// errNoTrayHost says that the desktop shows no tray icons.
var errNoTrayHost = errors.New("no program on the session bus owns " + trayWatcher +
	" (the desktop shows no tray icons: on GNOME, the AppIndicator extension is not installed or not enabled)")

// trayHostOn asks the bus whether a tray host (a StatusNotifierWatcher)
// runs: nil when one does, errNoTrayHost when none does, another error
// when the bus cannot be asked.
func trayHostOn(conn *dbus.Conn) error {
	var has bool
	err := conn.BusObject().Call("org.freedesktop.DBus.NameHasOwner", 0, trayWatcher).Store(&has)
	if err != nil {
		return fmt.Errorf("ask the session bus for %s: %w", trayWatcher, err)
	}
	if !has {
		return errNoTrayHost
	}
	return nil
}

// trayHostOnSessionBus is trayHostOn on this session's bus. With no
// session bus at all there is no tray either (fyne.io/systray needs
// one), and the error says so.
func trayHostOnSessionBus() error {
	conn, err := dbus.ConnectSessionBus()
	if err != nil {
		return fmt.Errorf("no tray icon: the session D-Bus cannot be reached: %w", err)
	}
	defer conn.Close()
	return trayHostOn(conn)
}
