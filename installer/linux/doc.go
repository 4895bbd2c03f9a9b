// Package linux holds the Debian package definition for NPU Chat (nfpm
// configuration, desktop entry, icons, udev rule and memlock limits). The
// packaging arrives in a later issue.
package linux
