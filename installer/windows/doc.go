// Package windows holds the MSI definition for NPU Chat (WiX source built
// with wixl, shortcuts, autostart). The packaging arrives in a later issue.
package windows
