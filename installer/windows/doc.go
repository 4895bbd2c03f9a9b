// Package windows builds NPU Chat's Windows executable and MSI on Linux
// (`make msi`).
//
// [BuildExe] cross-compiles cmd/trayapp with Debian's MinGW-w64
// (CGO_ENABLED=1 CC=x86_64-w64-mingw32-gcc GOOS=windows: fyne needs cgo)
// as a GUI-subsystem program (-H windowsgui: the tray opens no console
// window; cmd/trayapp/console_windows.go attaches to the parent's console
// so that `npuchat serve` and the other commands still print in a
// terminal). Before linking it generates a Windows resource (.syso: the
// icon gui/icons/npuchat.ico, a version resource from FyneApp.toml and a
// manifest) into cmd/trayapp, where the Go linker picks it up, and removes
// it afterwards (.gitignore covers it should a build be killed).
//
// The .syso comes from github.com/tc-hib/go-winres v0.3.3, pinned as a
// tool in installer/go.mod (run as `go tool go-winres`): pure Go, writes
// icon, version and manifest resources in one call, and is the newest
// release the module proxy serves.
//
// [BuildMSI] compiles npuchat.wxs with wixl (Debian's msitools) into a
// per-user MSI: %LOCALAPPDATA%\Programs\NPU Chat, no administrator prompt
// (the summary's word count says elevation is not needed, and nothing is
// written outside the user's profile and HKCU), a Start menu shortcut,
// launch at login, and an UpgradeCode with upgrade rows so that a new
// version (or a rebuild of the same one) replaces the installed one.
//
// Launch at login is the value the tray's "Launch at login" toggles:
// HKCU\Software\Microsoft\Windows\CurrentVersion\Run, value "NPU Chat",
// data "<install dir>\npuchat.exe" --hidden (quoted). It is on unless
// the MSI is installed with AUTOSTART=0 (`msiexec /i npuchat.msi
// AUTOSTART=0`), and an upgrade keeps the user's choice: when an older
// NPU Chat is installed and the value is gone (switched off in the tray),
// it stays off. wixl 0.101 cannot write that component condition, nor
// schedule RemoveExistingProducts where WiX does (after InstallValidate,
// so that the old version is removed before the new one is installed),
// and it drops IncludeMaximum from the upgrade row, so BuildMSI sets all
// three afterwards with msibuild, from the same msitools.
//
// Uninstalling removes the program, the shortcut, the program's HKCU keys
// and the Run value (also one the tray wrote when the MSI had not), and
// keeps the user's models, chat history and settings (%LOCALAPPDATA%\npuchat,
// %APPDATA%\npuchat, FastFlowLM's %USERPROFILE%\.flm), which the MSI never
// installed. The MSI installs no driver and no FastFlowLM; the app's
// first run checks for both and says what to install.
//
// The tests (run by `make test-installers`) read the MSI's tables with
// msiinfo, extract it with msiextract and check npuchat.exe with
// debug/pe, run `npuchat.exe version` under Wine, and install, upgrade
// and uninstall the MSI with Wine's msiexec in a private Wine prefix.
package windows
