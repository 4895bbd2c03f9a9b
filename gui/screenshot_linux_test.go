package gui

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"image"
	"image/png"
	"log/slog"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"fyne.io/fyne/v2"
	fyneapp "fyne.io/fyne/v2/app"

	"github.com/npuchat/npuchat/gui/desktoptest"
	"github.com/npuchat/npuchat/service"
)

// shotsEnv, when set, makes the test binary a child that opens the
// windows with fyne's real (GL) driver and saves their screenshots into
// the folder it names; TestWindowScreenshots runs it under Xvfb.
const shotsEnv = "NPUCHAT_GUI_SHOTS_CHILD"

func TestMain(m *testing.M) {
	if dir := os.Getenv(shotsEnv); dir != "" {
		os.Exit(screenshotChild(dir))
	}
	os.Exit(m.Run())
}

// artifactsDir is where tests save what a person should look at:
// $NPUCHAT_ARTIFACTS, or .artifacts at the repository root (gitignored).
func artifactsDir(t *testing.T, sub string) string {
	dir := os.Getenv("NPUCHAT_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join("..", ".artifacts")
	}
	dir = filepath.Join(dir, sub)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestWindowScreenshots opens the setup, settings and about windows with
// fyne's real driver on an Xvfb display and saves their screenshots
// (setup.png, settings.png, about.png, and setup-notray.png on a desktop
// without a tray icon, under .artifacts/gui) for a person
// to look at; it checks that each has its size and is not blank.
func TestWindowScreenshots(t *testing.T) {
	display := desktoptest.StartXvfb(t)
	out := artifactsDir(t, "gui")
	home := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), shotsEnv+"="+out, "DISPLAY="+display.Name, "HOME="+home,
		"XDG_CONFIG_HOME="+filepath.Join(home, ".config"), "XDG_DATA_HOME="+filepath.Join(home, ".local/share"),
		"XDG_CACHE_HOME="+filepath.Join(home, ".cache"), "DBUS_SESSION_BUS_ADDRESS=disabled:", "WAYLAND_DISPLAY=")
	b, err := cmd.CombinedOutput()
	t.Logf("screenshot child:\n%s", b)
	if err != nil {
		t.Fatalf("screenshot child: %v", err)
	}
	for _, name := range []string{"setup.png", "settings.png", "about.png", "setup-notray.png"} {
		path := filepath.Join(out, name)
		fh, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		img, err := png.Decode(fh)
		fh.Close()
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if b := img.Bounds(); b.Dx() < 300 || b.Dy() < 200 {
			t.Errorf("%s is %v", name, b)
		}
		if colours := distinctColours(img); colours < 50 {
			t.Errorf("%s has %d colours: blank, not a rendered window", name, colours)
		}
		t.Logf("saved %s", path)
	}
}

func distinctColours(img image.Image) int {
	seen := map[[4]uint32]bool{}
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y += 2 {
		for x := b.Min.X; x < b.Max.X; x += 2 {
			r, g, bl, a := img.At(x, y).RGBA()
			seen[[4]uint32{r >> 8, g >> 8, bl >> 8, a >> 8}] = true
		}
	}
	return len(seen)
}

// screenshotChild runs the tray's windows on fyne's real driver (it is
// on the main goroutine, as fyne needs) with a fake app whose NPU is not
// ready, the model on the CPU after a fallback, and an install at 42%.
func screenshotChild(dir string) int {
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	fy := fyneapp.NewWithID(AppID)
	var cleanups []func()
	defer func() {
		for _, c := range cleanups {
			c()
		}
	}()
	f := newFakeApp(func(c func()) { cleanups = append(cleanups, c) })
	f.report = notReady()
	f.npuErr = errors.New("FastFlowLM: ERT_CMD_STATE_TIMEOUT on the first token")
	f.login = true
	f.install = func(ctx context.Context, progress func(InstallProgress)) error {
		progress(InstallProgress{Model: "minicpm5:2b", Message: "downloading model.q4nx", Frac: 0.42,
			FilesDone: 2, FilesTotal: 9, Bytes: 1_100_000_000, Total: 2_600_000_000, Left: 230 * time.Second})
		<-ctx.Done()
		return ctx.Err()
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := newController(ctx, fy, f, &fakeHost{}, log)
	c.notify = func(n Notice) { log.Info("notice", "title", n.Title, "body", n.Body) }
	c.openURL = func(*url.URL) error { return nil }
	stop := c.start()
	code := 1
	go func() {
		defer fyne.Do(fy.Quit)
		if err := shoot(c, f, dir); err != nil {
			log.Error("screenshots", "err", err)
			return
		}
		code = 0
	}()
	fy.Run()
	stop()
	return code
}

func shoot(c *controller, f *fakeApp, dir string) error {
	if err := f.StartModel(); err != nil {
		return err
	}
	if err := waitFor(60*time.Second, func() bool { return f.Status().State == service.StateOn }); err != nil {
		return fmt.Errorf("model on: %w", err)
	}
	fyne.DoAndWait(c.showSetup)
	fyne.DoAndWait(c.startInstall)
	var ready bool
	if err := waitFor(60*time.Second, func() bool {
		fyne.DoAndWait(func() {
			ready = c.setup.checked && c.view.Ready && c.snap.Install != nil && c.snap.Install.Progress.Frac > 0.4
		})
		return ready
	}); err != nil {
		return fmt.Errorf("setup window filled: %w", err)
	}
	if err := capture(filepath.Join(dir, "setup.png")); err != nil {
		return err
	}
	fyne.DoAndWait(func() { c.setup.win.Hide(); c.showSettings() })
	if err := capture(filepath.Join(dir, "settings.png")); err != nil {
		return err
	}
	fyne.DoAndWait(func() { c.settings.win.Hide(); c.showAbout() })
	if err := capture(filepath.Join(dir, "about.png")); err != nil {
		return err
	}
	// A desktop without a tray icon: the setup window with its note.
	fyne.DoAndWait(func() { c.about.Hide(); c.trayMissing(errNoTrayHost) })
	return capture(filepath.Join(dir, "setup-notray.png"))
}

// capture saves what the X display shows (the one window open), once
// fyne has drawn it: the window is on the screen (the picture is not
// the empty black screen, and has the colours of a rendered window)
// and two shots in a row, 200 ms apart, are the same (layout, fonts
// and images are done). The X server's pixels are read, not fyne's GL
// buffer, so the picture is what a person would see.
func capture(path string) error {
	display := &desktoptest.Display{Name: os.Getenv("DISPLAY")}
	var last *image.NRGBA
	err := waitFor(60*time.Second, func() bool {
		time.Sleep(200 * time.Millisecond) // between two shots compared
		shot, err := display.Screenshot()
		if err != nil {
			return false
		}
		img := desktoptest.Crop(shot)
		settled := img.Bounds() != shot.Bounds() && distinctColours(img) >= 50 && last != nil && sameImage(img, last)
		last = img
		return settled
	})
	if err != nil {
		return fmt.Errorf("%s: the window did not settle on the screen: %w", filepath.Base(path), err)
	}
	fh, err := os.Create(path)
	if err != nil {
		return err
	}
	defer fh.Close()
	return png.Encode(fh, last)
}

// sameImage reports whether a and b have the same bounds and pixels.
func sameImage(a, b *image.NRGBA) bool {
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

func waitFor(d time.Duration, cond func() bool) error {
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			return fmt.Errorf("not within %v", d)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil
}
