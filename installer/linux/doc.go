// Package linux builds NPU Chat's Debian package (`make deb`).
//
// The package is described declaratively in nfpm.yaml beside this file:
// /usr/bin/npuchat, a desktop entry, hicolor icons, AppStream metainfo, a
// man page, README.Debian, and two optional system settings shipped
// switched off under /usr/share/npuchat/system (a udev rule giving the
// render group the NPU's /dev/accel/accel* nodes, and a limits.d file
// raising the memlock limit FastFlowLM needs). Switching one on is a
// symlink into /etc; the postrm removes such symlinks on remove or purge
// and does nothing on upgrade, never fails, and never touches a home
// folder. Icon caches and the desktop database are updated by dpkg
// triggers of hicolor-icon-theme and desktop-file-utils, so there is no
// postinst.
//
// [Build] compiles the tray build of cmd/trayapp (cgo on, as fyne needs),
// renders the desktop entry, metainfo, man page and changelog from
// FyneApp.toml (through package appmeta: one version everywhere), takes
// the icons from gui/icons/npuchat-<N>.png, and packs it all with nfpm
// used as a library.
//
// github.com/goreleaser/nfpm/v2 v2.48.0: the newest release the module
// proxy serves; a pure-Go .deb writer (no dpkg-deb, fakeroot or
// debhelper), whose YAML keeps the package's contents readable in one
// place.
//
// The tests (run by `make test-installers`) build the package, run
// lintian on it, check its Depends against dpkg-shlibdeps, install it
// with dpkg on this machine (they need root, as CI has), run
// /usr/bin/npuchat, and remove it again, checking that every file it
// installed is gone.
package linux
