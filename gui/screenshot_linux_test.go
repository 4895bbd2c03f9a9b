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
	"strings"
	"testing"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/widget"

	"github.com/npuchat/npuchat/gui/desktoptest"
	"github.com/npuchat/npuchat/service"
	"github.com/npuchat/npuchat/service/install"
	"github.com/npuchat/npuchat/service/install/installtest"
)

// fyneThreadError starts the line fyne 2.7.1 logs (internal/async)
// when a call that must run on fyne's goroutine runs on another, or
// fyne.DoAndWait is called from fyne's own.
const fyneThreadError = "Error in Fyne call thread"

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
// (setup.png, settings.png, about.png, menu.png, menu-models.png, and
// setup-notray.png with setup-notray-details.png (the fallback unfolded)
// on a desktop without a tray icon, under .artifacts/gui, and the same
// in fyne's light theme under .artifacts/gui/light) for a person
// to look at, and the tray's file dialogs (add-file.png,
// add-file-models.png, add-folder.png, settings-models-folder.png),
// driven as a person does: into the models folder, a file or folder
// picked, Add, and the tray adds and switches to what was picked (or
// the settings' field takes the folder); it checks that each has its size and is not blank, that
// the window without a tray fits a 768 px screen with Open the chat in
// view, and that fyne logged no call-thread error, through the quit.
func TestWindowScreenshots(t *testing.T) {
	display := desktoptest.StartXvfb(t)
	// fyne's two themes: dark (its default, what Xvfb gets) into gui/,
	// light into gui/light/.
	for _, theme := range []struct{ name, sub string }{{"dark", "gui"}, {"light", filepath.Join("gui", "light")}} {
		t.Run(theme.name, func(t *testing.T) {
			out := artifactsDir(t, theme.sub)
			home := t.TempDir()
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), shotsEnv+"="+out, "DISPLAY="+display.Name, "HOME="+home, "FYNE_THEME="+theme.name,
				"XDG_CONFIG_HOME="+filepath.Join(home, ".config"), "XDG_DATA_HOME="+filepath.Join(home, ".local/share"),
				"XDG_CACHE_HOME="+filepath.Join(home, ".cache"), "DBUS_SESSION_BUS_ADDRESS=disabled:", "WAYLAND_DISPLAY=")
			b, err := cmd.CombinedOutput()
			t.Logf("screenshot child:\n%s", b)
			if err != nil {
				t.Fatalf("screenshot child: %v", err)
			}
			if n := strings.Count(string(b), fyneThreadError); n > 0 {
				t.Errorf("fyne logged %d call-thread errors (a fyne call off fyne's goroutine); see the child's output above", n)
			}
			for _, name := range []string{"setup.png", "setup-install-failed.png", "setup-install-failed-details.png", "settings.png", "about.png", "menu.png",
				"menu-models.png", "add-file.png", "add-file-models.png", "add-folder.png", "settings-models-folder.png", "setup-notray.png", "setup-notray-details.png"} {
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
				least := 200
				if name == "menu-models.png" {
					least = 100 // three models and two lines to add one
				}
				if b := img.Bounds(); b.Dx() < least || b.Dy() < least {
					t.Errorf("%s is %v", name, b)
				}
				if colours := distinctColours(img); colours < 50 {
					t.Errorf("%s has %d colours: blank, not a rendered window", name, colours)
				}
				t.Logf("saved %s", path)
			}
		})
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
// ready, the model on the CPU after a fallback, and an install at 42%;
// then it quits as the tray menu's Quit does, and the app's context
// ends as the command's does after the tray returns. What fyne logs
// goes to stderr, which TestWindowScreenshots reads.
func screenshotChild(dir string) int {
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	fy := newFyneApp("1.2.3")
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
	f.install = func(publish func(install.Status)) error {
		publish(install.Status{State: install.StateRunning, Phase: "download", File: "model.q4nx", Bytes: 310_000_000, Total: 900_000_000,
			Rate: 12_300_000, Files: 2, FilesTotal: 9, OverallBytes: 1_100_000_000, OverallTotal: 2_600_000_000, OverallETASeconds: 230})
		return nil
	}
	lib, err := dialogFiles(os.Getenv("HOME"))
	if err != nil {
		log.Error("screenshots", "err", err)
		return 1
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	host := &fakeHost{}
	c, runLoop := startTray(ctx, fy, &libraryApp{f, lib}, host, Options{Logger: log}, func() error { return nil })
	c.notify = func(n Notice) { log.Info("notice", "title", n.Title, "body", n.Body) }
	c.openURL = func(*url.URL) error { return nil }
	shot := make(chan error, 1)
	go func() {
		shot <- shoot(c, fy, dir)
		// Quit, as systray runs a menu item: from its goroutine, on
		// fyne's, waiting.
		var quit func()
		fyne.DoAndWait(func() {
			host.mu.Lock()
			defer host.mu.Unlock()
			quit = findItem(host.menu, labelQuit)
		})
		fyne.DoAndWait(quit)
	}()
	runLoop()
	// As runTray: the app's context ends once the tray returned, and
	// the model stops; whatever reaches the tray now must not touch
	// fyne off its goroutine.
	cancel()
	f.StopModel(context.Background())
	time.Sleep(500 * time.Millisecond)
	if err := <-shot; err != nil {
		log.Error("screenshots", "err", err)
		return 1
	}
	return 0
}

func shoot(c *controller, fy fyne.App, dir string) error {
	if err := c.app.StartModel(); err != nil {
		return err
	}
	if err := waitFor(60*time.Second, func() bool { return c.app.Status().State == service.StateOn }); err != nil {
		return fmt.Errorf("model on: %w", err)
	}
	fyne.DoAndWait(c.showSetup)
	fyne.DoAndWait(c.startInstall)
	var ready bool
	if err := waitFor(60*time.Second, func() bool {
		fyne.DoAndWait(func() {
			ready = c.setup.checked && c.view.Ready && c.snap.Install != nil && installFrac(*c.snap.Install) > 0.4
		})
		return ready
	}); err != nil {
		return fmt.Errorf("setup window filled: %w", err)
	}
	if _, err := capture(filepath.Join(dir, "setup.png")); err != nil {
		return err
	}
	// A failed install: its sentence, the whole error folded under
	// Details (opened for the second shot).
	var was *install.Status
	fyne.DoAndWait(func() {
		was = c.snap.Install
		failed := installtest.Statuses()["failed unreachable"]
		c.snap.Install = &failed
		c.redraw()
		c.setup.scroll.ScrollToBottom()
	})
	if _, err := capture(filepath.Join(dir, "setup-install-failed.png")); err != nil {
		return err
	}
	fyne.DoAndWait(func() { c.setup.installDetailFold.Open(0); c.setup.relayout(); c.setup.scroll.ScrollToBottom() })
	if _, err := capture(filepath.Join(dir, "setup-install-failed-details.png")); err != nil {
		return err
	}
	fyne.DoAndWait(func() { c.snap.Install = was; c.redraw(); c.setup.scroll.ScrollToTop() })
	fyne.DoAndWait(func() { c.setup.win.Hide(); c.showSettings() })
	if _, err := capture(filepath.Join(dir, "settings.png")); err != nil {
		return err
	}
	fyne.DoAndWait(func() { c.settings.win.Hide(); c.showAbout() })
	if _, err := capture(filepath.Join(dir, "about.png")); err != nil {
		return err
	}
	// The tray menu, as fyne draws a menu (a panel draws it in its own
	// style, with the same items, marks and disabled lines).
	var menuWin fyne.Window
	fyne.DoAndWait(func() {
		c.about.Hide()
		menuWin = fy.NewWindow("tray menu")
		m := widget.NewMenu(c.menu)
		menuWin.SetContent(m)
		menuWin.Resize(m.MinSize())
		menuWin.Show()
	})
	if _, err := capture(filepath.Join(dir, "menu.png")); err != nil {
		return err
	}
	// Its Model submenu: the library's models, the loaded one marked.
	var models *fyne.Menu
	if err := waitFor(30*time.Second, func() bool {
		fyne.DoAndWait(func() {
			models = nil
			for _, it := range c.menu.Items {
				if it.Label == labelModels && it.ChildMenu != nil && len(it.ChildMenu.Items) > 0 &&
					strings.HasPrefix(it.ChildMenu.Items[0].Label, radioOn) {
					models = it.ChildMenu
				}
			}
		})
		return models != nil
	}); err != nil {
		return fmt.Errorf("the Model submenu with the loaded model marked: %w", err)
	}
	fyne.DoAndWait(func() {
		m := widget.NewMenu(models)
		menuWin.SetContent(m)
		menuWin.Resize(m.MinSize())
	})
	if _, err := capture(filepath.Join(dir, "menu-models.png")); err != nil {
		return err
	}
	fyne.DoAndWait(func() { menuWin.Hide() })
	if err := shootDialogs(c, dir); err != nil {
		return err
	}
	// A desktop without a tray icon: the setup window with its note,
	// the chat first, on a 768 px high screen.
	fyne.DoAndWait(func() { c.trayMissing(errNoTrayHost) })
	img, err := capture(filepath.Join(dir, "setup-notray.png"))
	if err != nil {
		return err
	}
	if h := img.Bounds().Dy(); h > maxWindowHeight {
		return fmt.Errorf("setup-notray.png is %d px high: more than the %d px a 768 px screen has for a window", h, maxWindowHeight)
	}
	var chatBottom, visible float32
	fyne.DoAndWait(func() {
		btn := c.setup.chatBtn
		chatBottom = fy.Driver().AbsolutePositionForObject(btn).Y + btn.Size().Height
		visible = c.setup.win.Canvas().Size().Height
	})
	if chatBottom > visible {
		return fmt.Errorf("without a tray, Open the chat is at %v px, below the window's %v px", chatBottom, visible)
	}
	// The fallback's whole error, unfolded under its sentence.
	var detail string
	fyne.DoAndWait(func() {
		detail = c.setup.serveDetail.text.Text
		c.setup.serveDetail.fold.Open(0)
		c.setup.relayout()
	})
	if !strings.Contains(detail, "npu backend: load minicpm5:2b on npu:") {
		return fmt.Errorf("the serve line's Details hold %q, not the fallback's whole error", detail)
	}
	_, err = capture(filepath.Join(dir, "setup-notray-details.png"))
	return err
}

// maxWindowHeight is the tallest a window may be to fit on a 768 px
// high screen under a desktop's top bar and its title bar.
const maxWindowHeight = 768 - 80

// capture saves what the X display shows (the one window open), once
// fyne has drawn it: the window is on the screen (the picture is not
// the empty black screen, and has the colours of a rendered window)
// and two shots in a row, 200 ms apart, are the same (layout, fonts
// and images are done). The X server's pixels are read, not fyne's GL
// buffer, so the picture is what a person would see.
func capture(path string) (*image.NRGBA, error) {
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
		return nil, fmt.Errorf("%s: the window did not settle on the screen: %w", filepath.Base(path), err)
	}
	fh, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	return last, png.Encode(fh, last)
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
