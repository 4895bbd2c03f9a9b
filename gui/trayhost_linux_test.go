package gui

import (
	"errors"
	"testing"

	"github.com/godbus/dbus/v5"

	"github.com/npuchat/npuchat/gui/desktoptest"
)

// TestTrayHostOn asks a private session bus for a tray host: none on a
// desktop with only a notification server (GNOME without the
// AppIndicator extension), one once a shell with a
// StatusNotifierWatcher is on the bus.
func TestTrayHostOn(t *testing.T) {
	for _, tc := range []struct {
		name  string
		shell func(testing.TB, string) *desktoptest.Shell
		want  error
	}{
		{"no tray host", desktoptest.StartShellWithoutTray, errNoTrayHost},
		{"a tray host", desktoptest.StartShell, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr := desktoptest.StartSessionBus(t)
			tc.shell(t, addr)
			conn, err := dbus.Connect(addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			if err := trayHostOn(conn); !errors.Is(err, tc.want) || (tc.want == nil && err != nil) {
				t.Fatalf("trayHostOn: %v, want %v", err, tc.want)
			}
		})
	}
}
