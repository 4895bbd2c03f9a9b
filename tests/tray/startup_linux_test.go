package tray

import (
	"bytes"
	"errors"
	"fmt"
	"image"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/npuchat/npuchat/gui"
	"github.com/npuchat/npuchat/gui/desktoptest"
)

// TestStartupErrorShowsOnTheDesktop: an error the tray cannot start
// without (a malformed settings file, a data folder that cannot be
// written) is shown where a person sees it, since the Windows GUI build
// has no stderr: the tray icon in its error state with the reason in
// its tooltip and status line, a notification, and a window (saved as
// .artifacts/gui/startup-<case>.png to look at); it is written to the
// log file when the log can be written; Quit ends the process with the
// error's exit status. Under LANG=C.UTF-8, fyne logs nothing about the
// locale.
func TestStartupErrorShowsOnTheDesktop(t *testing.T) {
	exe := buildNPUChat(t)
	for _, tc := range []struct {
		name    string
		breakIt func(t *testing.T, home string) []string // breaks the setup, returns extra environment
		reason  string                                   // in the tooltip, the menu and the log
		logged  bool                                     // the log can be written
	}{
		{"settings", func(t *testing.T, home string) []string {
			p := filepath.Join(home, ".config", "npuchat", "settings.json")
			os.MkdirAll(filepath.Dir(p), 0o700)
			if err := os.WriteFile(p, []byte(`{"engine": "cpu",`), 0o600); err != nil {
				t.Fatal(err)
			}
			return nil
		}, "settings.json", true},
		{"data-folder", func(t *testing.T, home string) []string {
			data := filepath.Join(home, "data-is-a-file")
			if err := os.WriteFile(data, []byte("not a folder"), 0o600); err != nil {
				t.Fatal(err)
			}
			return []string{"NPUCHAT_DATA=" + data}
		}, "data-is-a-file", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			display := desktoptest.StartXvfb(t)
			bus := desktoptest.StartSessionBus(t)
			shell := desktoptest.StartShell(t, bus)
			home := filepath.Join(dir, "home")
			runtimeDir := filepath.Join(dir, "run")
			for _, d := range []string{home, runtimeDir} {
				if err := os.MkdirAll(d, 0o700); err != nil {
					t.Fatal(err)
				}
			}
			cmd := exec.Command(exe, "--addr", freeAddr(t))
			cmd.Env = append([]string{
				"PATH=" + os.Getenv("PATH"), "HOME=" + home, "LANG=C.UTF-8",
				"DISPLAY=" + display.Name, "DBUS_SESSION_BUS_ADDRESS=" + bus, "XDG_RUNTIME_DIR=" + runtimeDir,
				"XDG_CONFIG_HOME=" + filepath.Join(home, ".config"), "XDG_DATA_HOME=" + filepath.Join(home, ".local/share"),
				"XDG_CACHE_HOME=" + filepath.Join(home, ".cache"),
			}, tc.breakIt(t, home)...)
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

			item, err := shell.WaitItem(120 * time.Second)
			if err != nil {
				t.Fatal(err)
			}
			checkIcon(t, item, gui.IconError)
			if tt, err := item.Tooltip(); err != nil || !strings.Contains(tt, "NPU Chat could not start") || !strings.Contains(tt, tc.reason) {
				t.Errorf("tooltip %q (%v); want the start-up error naming %s", tt, err, tc.reason)
			}
			var menu *desktoptest.MenuNode
			desktoptest.Eventually(t, 60*time.Second, "the error in the menu", func() error {
				m, err := item.Menu()
				if err != nil {
					return err
				}
				lines := m.Lines()
				if len(lines) == 0 || !strings.HasPrefix(lines[0], "Error: ") || !strings.HasSuffix(lines[0], "(disabled)") || m.Find("Quit") == nil {
					return fmt.Errorf("menu:\n%s", strings.Join(lines, "\n"))
				}
				menu = m
				return nil
			})
			desktoptest.Eventually(t, 60*time.Second, "the notification", func() error {
				for _, n := range shell.Notifications() {
					if n.Summary == "NPU Chat could not start" && strings.Contains(n.Body, tc.reason) {
						return nil
					}
				}
				return fmt.Errorf("notifications %+v", shell.Notifications())
			})
			// The window shows (the screen is no longer all black) and is
			// drawn (two shots in a row are the same).
			var last *image.NRGBA
			desktoptest.Eventually(t, 60*time.Second, "the error window", func() error {
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
				return savePNG(t, "startup-"+tc.name+".png", shot)
			})
			logFile := filepath.Join(home, ".local/share/npuchat/logs/npuchat.log")
			b, err := os.ReadFile(logFile)
			switch {
			case tc.logged && (err != nil || !strings.Contains(string(b), "NPU Chat could not start") || !strings.Contains(string(b), tc.reason)):
				t.Errorf("the log %s does not have the error (%v):\n%s", logFile, err, b)
			case !tc.logged && !strings.Contains(output.String(), "could not be written to the log"):
				t.Errorf("stderr does not say the log could not be written:\n%s", output.String())
			}
			if strings.Contains(output.String(), "locale") {
				t.Errorf("fyne complained about the locale:\n%s", output.String())
			}

			if err := item.Click(menu.Find("Quit")); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-exited:
				var ee *exec.ExitError
				if !errors.As(err, &ee) || ee.ExitCode() != 2 {
					t.Fatalf("npuchat after Quit: %v; want exit status 2", err)
				}
			case <-time.After(60 * time.Second):
				t.Fatal("npuchat did not exit within 60 s of Quit")
			}
			noFyneThreadErrors(t, output.String())
		})
	}
}

// samePixels reports whether a and b are the same picture.
func samePixels(a, b *image.NRGBA) bool {
	if a.Bounds() != b.Bounds() {
		return false
	}
	r := a.Bounds()
	for y := r.Min.Y; y < r.Max.Y; y++ {
		if !bytes.Equal(a.Pix[a.PixOffset(r.Min.X, y):a.PixOffset(r.Max.X, y)], b.Pix[b.PixOffset(r.Min.X, y):b.PixOffset(r.Max.X, y)]) {
			return false
		}
	}
	return true
}

// savePNG writes a screenshot where a person looks at them:
// $NPUCHAT_ARTIFACTS/gui, else .artifacts/gui at the repository root.
func savePNG(t *testing.T, name string, img image.Image) error {
	dir := os.Getenv("NPUCHAT_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join("..", "..", ".artifacts")
	}
	dir = filepath.Join(dir, "gui")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(dir, name))
	if err != nil {
		return err
	}
	defer f.Close()
	if err := png.Encode(f, img); err != nil {
		return err
	}
	t.Logf("screenshot: %s", f.Name())
	return f.Close()
}

// binDir holds the npuchat binary the tests of this package share (made
// and removed by TestMain).
var binDir string

func TestMain(m *testing.M) {
	var err error
	if binDir, err = os.MkdirTemp("", "npuchat-tray-"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(binDir)
	os.Exit(code)
}

// builtNPUChat builds the npuchat binary once for the tests of this
// package (a build takes long on two cores).
var builtNPUChat = sync.OnceValues(func() (string, error) {
	exe := filepath.Join(binDir, "npuchat")
	if out, err := exec.Command("go", "build", "-o", exe, "github.com/npuchat/npuchat/cmd/trayapp").CombinedOutput(); err != nil {
		return "", fmt.Errorf("build npuchat: %v\n%s", err, out)
	}
	return exe, nil
})

func buildNPUChat(t *testing.T) string {
	t.Helper()
	exe, err := builtNPUChat()
	if err != nil {
		t.Fatal(err)
	}
	return exe
}
