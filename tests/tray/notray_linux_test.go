package tray

import (
	"errors"
	"fmt"
	"image"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/npuchat/npuchat/gui/desktoptest"
)

// TestNoTrayHostAtLogin: started at login (--hidden) on a desktop that
// shows no tray icons (a session bus with a notification server but no
// StatusNotifierWatcher: stock GNOME without the AppIndicator
// extension), NPU Chat does not vanish: it opens its setup window
// (saved as .artifacts/gui/notray.png), notifies where it serves and
// how to get a tray, and logs why; SIGTERM still ends it with 0.
func TestNoTrayHostAtLogin(t *testing.T) {
	exe := buildNPUChat(t)
	dir := t.TempDir()
	display := desktoptest.StartXvfb(t)
	bus := desktoptest.StartSessionBus(t)
	shell := desktoptest.StartShellWithoutTray(t, bus)
	home := filepath.Join(dir, "home")
	runtimeDir := filepath.Join(dir, "run")
	for _, d := range []string{home, runtimeDir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	addr := freeAddr(t)
	cmd := exec.Command(exe, "--hidden", "--engine", "cpu", "--addr", addr)
	cmd.Env = []string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + home, "LANG=C.UTF-8",
		"DISPLAY=" + display.Name, "DBUS_SESSION_BUS_ADDRESS=" + bus, "XDG_RUNTIME_DIR=" + runtimeDir,
		"XDG_CONFIG_HOME=" + filepath.Join(home, ".config"), "XDG_DATA_HOME=" + filepath.Join(home, ".local/share"),
		"XDG_CACHE_HOME=" + filepath.Join(home, ".cache"),
	}
	var output lockedBuffer
	cmd.Stdout, cmd.Stderr = &output, &output
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			<-exited
		}
		t.Logf("npuchat output:\n%s", output.String())
	})

	desktoptest.Eventually(t, 120*time.Second, "the no-tray notification", func() error {
		for _, n := range shell.Notifications() {
			if n.Summary == "NPU Chat has no tray icon here" && strings.Contains(n.Body, "http://"+addr+"/") &&
				strings.Contains(n.Body, "AppIndicator extension") {
				return nil
			}
		}
		return fmt.Errorf("notifications %+v", shell.Notifications())
	})
	var last *image.NRGBA
	desktoptest.Eventually(t, 60*time.Second, "the setup window", func() error {
		img, err := display.Screenshot()
		if err != nil {
			return err
		}
		shot := desktoptest.Crop(img)
		if shot.Bounds() == img.Bounds() || shot.Bounds().Dx() < 400 || shot.Bounds().Dy() < 200 {
			return fmt.Errorf("no window on the screen (%v)", shot.Bounds())
		}
		prev := last
		last = shot
		if prev == nil || !samePixels(prev, shot) {
			return errors.New("the window is still being drawn")
		}
		return savePNG(t, "notray.png", shot)
	})
	logFile := filepath.Join(home, ".local/share/npuchat/logs/npuchat.log")
	if b, err := os.ReadFile(logFile); err != nil || !strings.Contains(string(b), "no tray icon on this desktop") ||
		!strings.Contains(string(b), "org.kde.StatusNotifierWatcher") {
		t.Errorf("the log %s does not say why there is no tray icon (%v):\n%s", logFile, err, b)
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("npuchat after SIGTERM: %v; want exit status 0", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("npuchat did not exit within 60 s of SIGTERM")
	}
	noFyneThreadErrors(t, output.String())
}
