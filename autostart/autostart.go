// Package autostart turns "launch NPU Chat when I log in" on and off, and
// reads whether it is on from the real entry, never from a remembered
// flag, so that the tray's check mark and the settings window tell the
// truth even after the user removed the entry by hand.
//
// On Linux the entry is an XDG autostart desktop file,
// $XDG_CONFIG_HOME/autostart/npuchat.desktop (~/.config/autostart/ when
// XDG_CONFIG_HOME is unset), as the XDG Autostart specification says; it
// counts as on unless it says Hidden=true or
// X-GNOME-Autostart-enabled=false.
//
// On Windows the entry is the string value named [RunValueName] ("NPU
// Chat") under HKEY_CURRENT_USER\Software\Microsoft\Windows\CurrentVersion\Run,
// with the data `"<exe path>" --hidden`. Task Manager's Startup apps
// switch it off without removing it, in the StartupApproved\Run key
// ([ApprovedKeyPath]); an entry switched off there reads as off, and
// Enable switches it on again. The MSI writes the same value
// name and data, so that the installer's "launch at login" and the
// tray's are one entry. The registry is reached through [RunKey], which
// golang.org/x/sys/windows/registry implements on Windows (x/sys is
// already a dependency; its registry package is the standard binding)
// and which tests fake on Linux.
package autostart

import (
	"errors"
	"fmt"
	"strings"
)

// Names shared with the installers.
const (
	// RunValueName is the Run value's name on Windows.
	RunValueName = "NPU Chat"
	// RunKeyPath is the key under HKEY_CURRENT_USER that holds it.
	RunKeyPath = `Software\Microsoft\Windows\CurrentVersion\Run`
	// ApprovedKeyPath is the key under HKEY_CURRENT_USER where Task
	// Manager records a Run entry switched off.
	ApprovedKeyPath = `Software\Microsoft\Windows\CurrentVersion\Explorer\StartupApproved\Run`
	// DesktopFileName is the XDG autostart file's name on Linux.
	DesktopFileName = "npuchat.desktop"
	// HiddenFlag is the argument the entry starts NPU Chat with: the
	// tray starts without opening a window.
	HiddenFlag = "--hidden"
)

// Entry is a launch-at-login entry for this user.
type Entry interface {
	// Enabled reads the entry and reports whether it starts NPU Chat at
	// login.
	Enabled() (bool, error)
	// Enable writes the entry so that exe starts with --hidden at login.
	Enable(exe string) error
	// Disable removes the entry; removing an absent entry is not an error.
	Disable() error
}

// ForOS returns the entry of goos ("linux", "windows") for this user;
// getenv reads XDG_CONFIG_HOME and HOME on Linux.
func ForOS(goos string, getenv func(string) string) Entry {
	switch goos {
	case "windows":
		return &Registry{Open: OpenRunKey, OpenApproved: OpenApprovedKey}
	case "linux", "freebsd", "openbsd", "netbsd":
		dir := getenv("XDG_CONFIG_HOME")
		if dir == "" && getenv("HOME") != "" {
			dir = getenv("HOME") + "/.config"
		}
		if dir == "" {
			return unsupported{"launch at login: neither XDG_CONFIG_HOME nor HOME is set"}
		}
		return &XDG{Dir: dir + "/autostart"}
	default:
		return unsupported{"launch at login is not supported on " + goos}
	}
}

// ErrUnsupported is returned where this system has no launch-at-login
// mechanism NPU Chat knows.
var ErrUnsupported = errors.New("launch at login is not supported here")

type unsupported struct{ why string }

func (u unsupported) Enabled() (bool, error) { return false, nil }
func (u unsupported) Enable(string) error    { return fmt.Errorf("%s: %w", u.why, ErrUnsupported) }
func (u unsupported) Disable() error         { return nil }

// CommandLine is the Run value's data: the executable quoted (paths
// under Program Files have spaces) and --hidden.
func CommandLine(exe string) string {
	return `"` + exe + `" ` + HiddenFlag
}

// commandExe returns the executable of a Run value's data (quoted or not).
func commandExe(data string) string {
	data = strings.TrimSpace(data)
	if rest, ok := strings.CutPrefix(data, `"`); ok {
		exe, _, _ := strings.Cut(rest, `"`)
		return exe
	}
	exe, _, _ := strings.Cut(data, " ")
	return exe
}
