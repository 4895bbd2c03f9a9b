package tray

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/npuchat/npuchat/engine/testmodel"
	"github.com/npuchat/npuchat/gui"
	"github.com/npuchat/npuchat/gui/desktoptest"
)

// TestTrayOverDBus runs the real npuchat binary on a desktop of its own
// (Xvfb and a session bus) and drives its tray as a panel does, over the
// D-Bus protocols fyne.io/systray speaks: the item registers with our
// StatusNotifierWatcher, we read its menu over com.canonical.dbusmenu,
// Activate it (the left click) and see the model go on in /api/status,
// in the status line, in the icon and in a notification, chat with it,
// click again and see the chat page opened, click "Stop serving" and
// see it off, toggle "Launch at login", then click "Quit" and see the
// process exit 0. The model is a small generated one on the CPU engine.
func TestTrayOverDBus(t *testing.T) {
	dir := t.TempDir()
	exe := buildNPUChat(t)
	w, err := testmodel.Random(3, testmodel.Qwen3Small())
	if err != nil {
		t.Fatal(err)
	}
	modelDir := filepath.Join(dir, "tiny-qwen")
	if err := testmodel.WriteHF(modelDir, w, testmodel.HFOptions{}); err != nil {
		t.Fatal(err)
	}

	display := desktoptest.StartXvfb(t)
	bus := desktoptest.StartSessionBus(t)
	shell := desktoptest.StartShell(t, bus)

	addr := freeAddr(t)
	home := filepath.Join(dir, "home")
	runtimeDir := filepath.Join(dir, "run")
	for _, d := range []string{home, runtimeDir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	// xdg-open records what it is asked to open (the chat page).
	bin := filepath.Join(dir, "bin")
	opened := filepath.Join(dir, "opened")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bin, "xdg-open"), []byte(fmt.Sprintf("#!/bin/sh\necho \"$1\" >> %q\n", opened)), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "--model", modelDir, "--name", "tiny", "--engine", "cpu", "--addr", addr)
	cmd.Env = []string{
		"PATH=" + bin + ":" + os.Getenv("PATH"), "HOME=" + home, "LANG=en_US.UTF-8",
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

	item, err := shell.WaitItem(120 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + addr
	desktoptest.Eventually(t, 60*time.Second, "the API listening with the model off", func() error {
		return wantState(base, "off")
	})
	menu := waitMenu(t, item, "Off")
	for _, label := range []string{"Start serving", "Open chat", "Install or update model…", "Check NPU…",
		"Launch at login", "Open logs folder", "About NPU Chat", "Quit"} {
		if menu.Find(label) == nil {
			t.Errorf("the menu has no %q:\n%s", label, strings.Join(menu.Lines(), "\n"))
		}
	}
	// The engines, a radio group under their heading: the CPU chosen.
	if lines := menu.Lines(); !slices.Contains(lines, "Engine (disabled)") || !slices.Contains(lines, "● CPU") ||
		!slices.Contains(lines, "○ NPU") || !slices.Contains(lines, "○ Auto (NPU, else CPU)") {
		t.Errorf("the engines are not a radio group with the CPU chosen:\n%s", strings.Join(lines, "\n"))
	}
	// The item's title is the app's name, not its ID.
	if title, err := item.Prop("Title"); err != nil || title.Value() != gui.AppName {
		t.Errorf("the tray item's title is %v (%v), want %q", title, err, gui.AppName)
	}
	checkIcon(t, item, gui.IconOff)
	if tt, err := item.Tooltip(); err != nil || !strings.Contains(tt, "off") {
		t.Errorf("tooltip %q, %v", tt, err)
	}

	// The left click starts serving.
	if err := item.Activate(); err != nil {
		t.Fatal(err)
	}
	desktoptest.Eventually(t, 120*time.Second, "/api/status on", func() error { return wantState(base, "on") })
	menu = waitMenu(t, item, "On: CPU")
	if menu.Find("Stop serving") == nil || menu.Find("Start serving") != nil {
		t.Errorf("menu when on:\n%s", strings.Join(menu.Lines(), "\n"))
	}
	checkIcon(t, item, gui.IconOn)
	if tt, err := item.Tooltip(); err != nil || !strings.Contains(tt, "tiny on the CPU") {
		t.Errorf("tooltip when on %q, %v", tt, err)
	}
	desktoptest.Eventually(t, 60*time.Second, "the ready notification", func() error {
		for _, n := range shell.Notifications() {
			if n.Summary == "NPU Chat is ready" && strings.Contains(n.Body, "tiny is on") {
				return nil
			}
		}
		return fmt.Errorf("notifications %+v", shell.Notifications())
	})

	// A chat request is answered by the model the click started.
	resp, err := http.Post(base+"/v1/chat/completions", "application/json",
		strings.NewReader(`{"model":"tiny","max_tokens":4,"temperature":0,"messages":[{"role":"user","content":"hello"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	var answer struct {
		Choices []struct {
			Message struct{ Content string } `json:"message"`
		} `json:"choices"`
		Usage struct {
			CompletionTokens int `json:"completion_tokens"`
		} `json:"usage"`
	}
	err = json.NewDecoder(resp.Body).Decode(&answer)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 200 || len(answer.Choices) != 1 || answer.Usage.CompletionTokens == 0 {
		t.Fatalf("chat: %d %v %+v", resp.StatusCode, err, answer)
	}

	// The left click, now that the model is on, opens the chat.
	if err := item.Activate(); err != nil {
		t.Fatal(err)
	}
	desktoptest.Eventually(t, 60*time.Second, "the chat page opened", func() error {
		b, err := os.ReadFile(opened)
		if err != nil {
			return err
		}
		if got := strings.TrimSpace(string(b)); !strings.HasPrefix(got, base+"/open?t=") {
			return fmt.Errorf("opened %q, want a one-time link on %s/", got, base)
		}
		return nil
	})

	// "Stop serving" switches the model off.
	// Clicks go to the menu as read at the moment (clickUntil): the
	// menu is rebuilt with new IDs on each change of state.
	clickUntil(t, item, &output, "Stop serving", func() error { return wantState(base, "off") })
	desktoptest.Eventually(t, 60*time.Second, "/api/status off", func() error { return wantState(base, "off") })
	menu = waitMenu(t, item, "Off")
	checkIcon(t, item, gui.IconOff)

	// "Launch at login" writes the XDG autostart entry, and its check
	// mark is that entry; removed behind the tray's back, the next
	// click writes it again.
	entry := filepath.Join(home, ".config", "autostart", "npuchat.desktop")
	clickUntil(t, item, &output, "Launch at login", func() error { _, err := os.Stat(entry); return err })
	desktoptest.Eventually(t, 60*time.Second, "the autostart entry and its check mark", func() error {
		b, err := os.ReadFile(entry)
		if err != nil {
			return err
		}
		if !strings.Contains(string(b), "\nExec=\""+exe+"\" --hidden\n") {
			return fmt.Errorf("entry without Exec=\"%s\" --hidden:\n%s", exe, b)
		}
		m, err := item.Menu()
		if err != nil {
			return err
		}
		if n := m.Find("Launch at login"); n == nil || !n.Checked {
			return fmt.Errorf("no check mark:\n%s", strings.Join(m.Lines(), "\n"))
		}
		menu = m
		return nil
	})
	clickUntil(t, item, &output, "Launch at login", func() error {
		if _, err := os.Stat(entry); !os.IsNotExist(err) {
			return fmt.Errorf("%s: %v", entry, err)
		}
		return nil
	})
	desktoptest.Eventually(t, 60*time.Second, "the autostart entry removed", func() error {
		if _, err := os.Stat(entry); !os.IsNotExist(err) {
			return fmt.Errorf("%s: %v", entry, err)
		}
		return nil
	})
	desktoptest.Eventually(t, 60*time.Second, "the check mark gone", func() error {
		m := waitMenu(t, item, "Off")
		if n := m.Find("Launch at login"); n == nil || n.Checked {
			return fmt.Errorf("check mark after disabling:\n%s", strings.Join(m.Lines(), "\n"))
		}
		menu = m
		return nil
	})

	// The windows open from the menu (and stay open for Quit: closing
	// windows as the app quits is where fyne calls went off fyne's
	// goroutine).
	for _, label := range []string{"Check NPU…", "Settings…", "About NPU Chat"} {
		m, err := item.Menu() // as it is now
		if err != nil {
			t.Fatal(err)
		}
		if err := item.Click(m.Find(label)); err != nil {
			t.Fatal(err)
		}
	}
	desktoptest.Eventually(t, 60*time.Second, "a window on the screen", func() error {
		img, err := display.Screenshot()
		if err != nil {
			return err
		}
		if shot := desktoptest.Crop(img); shot.Bounds() == img.Bounds() {
			return errors.New("no window on the screen")
		}
		return nil
	})

	// "Quit" ends the process, with exit status 0. The bound only ends
	// a hang; how soon it exits is no pass condition.
	if m, err := item.Menu(); err != nil {
		t.Fatal(err)
	} else if err := item.Click(m.Find("Quit")); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("npuchat after Quit: %v", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("awaiting npuchat's exit after Quit: still running after 60 s")
	}
	if _, err := http.Get(base + "/api/status"); err == nil {
		t.Fatal("the API still answers after Quit")
	}
	noFyneThreadErrors(t, output.String())
}

// waitMenu reads the tray's menu until its first line is status.
func waitMenu(t *testing.T, item *desktoptest.Item, status string) *desktoptest.MenuNode {
	t.Helper()
	var menu *desktoptest.MenuNode
	desktoptest.Eventually(t, 60*time.Second, "the status line "+status, func() error {
		m, err := item.Menu()
		if err != nil {
			return err
		}
		lines := m.Lines()
		// systray rebuilds the menu item by item: a whole one ends
		// with Quit.
		if len(lines) == 0 || lines[0] != status+" (disabled)" || !slices.Contains(lines, "● CPU") || lines[len(lines)-1] != "Quit" {
			return fmt.Errorf("menu:\n%s", strings.Join(lines, "\n"))
		}
		menu = m
		return nil
	})
	t.Logf("menu:\n%s", strings.Join(menu.Lines(), "\n"))
	return menu
}

// checkIcon compares the item's icon pixmap with the tray icon of a
// state (the PNG gui embeds), pixel by pixel.
func checkIcon(t *testing.T, item *desktoptest.Item, want gui.Icon) {
	t.Helper()
	img, err := png.Decode(bytes.NewReader(gui.TrayIcon(want).Content()))
	if err != nil {
		t.Fatal(err)
	}
	desktoptest.Eventually(t, 60*time.Second, "the "+string(want)+" icon", func() error {
		w, h, argb, err := item.Pixmap()
		if err != nil {
			return err
		}
		if w != img.Bounds().Dx() || h != img.Bounds().Dy() || len(argb) != 4*w*h {
			return fmt.Errorf("pixmap %dx%d (%d bytes), want %v", w, h, len(argb), img.Bounds())
		}
		return samePixmap(img, argb)
	})
}

// samePixmap compares every pixel. (The tray icons are opaque or
// transparent pixel by pixel, since fyne.io/systray v1.12.2 garbles the
// colour of semi-transparent ones; see tools/icons.)
func samePixmap(img image.Image, argb []byte) error {
	b := img.Bounds()
	for y := 0; y < b.Dy(); y++ {
		for x := 0; x < b.Dx(); x++ {
			c := color.NRGBAModel.Convert(img.At(b.Min.X+x, b.Min.Y+y)).(color.NRGBA)
			p := argb[4*(y*b.Dx()+x):]
			if p[0] != c.A || (c.A != 0 && (p[1] != c.R || p[2] != c.G || p[3] != c.B)) {
				return fmt.Errorf("pixel %d,%d is ARGB %v, want the icon's %v", x, y, p[:4], c)
			}
		}
	}
	return nil
}

func wantState(base, state string) error {
	resp, err := http.Get(base + "/api/status")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var st struct {
		State string `json:"state"`
	}
	if err := json.Unmarshal(body, &st); err != nil {
		return fmt.Errorf("/api/status: %v: %s", err, body)
	}
	if st.State != state {
		return fmt.Errorf("/api/status says %s: %s", st.State, body)
	}
	return nil
}

func freeAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// lockedBuffer collects a process's output from two pipes.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
