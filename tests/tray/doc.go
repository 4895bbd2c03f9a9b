// Package tray holds the end-to-end test of the tray app on Linux: the
// real npuchat binary on an Xvfb display and a private session bus,
// driven over D-Bus as a desktop panel drives it (see gui/desktoptest).
package tray
