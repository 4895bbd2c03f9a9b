package tray

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/npuchat/npuchat/engine/testmodel"
	"github.com/npuchat/npuchat/gui/desktoptest"
)

// TestTrayModelMenuOverDBus runs the real npuchat binary on a desktop of
// its own and drives its Model submenu as a panel does: two small GGUF
// models the test writes are added to the library through the page's
// API (POST /api/library, which sends the tray no event: the tray must
// find them itself), the menu read with com.canonical.dbusmenu's
// GetLayout lists both with what can run them, and the "clicked" Event
// on one loads it (/api/status says it is on, a chat is answered by it,
// the menu marks it); the other then switches without a restart. The
// menu as read is saved as .artifacts/gui/tray-models-menu.txt.
func TestTrayModelMenuOverDBus(t *testing.T) {
	dir := t.TempDir()
	exe := buildNPUChat(t)
	home := filepath.Join(dir, "home")
	runtimeDir := filepath.Join(dir, "run")
	models := filepath.Join(home, "models")
	bin := filepath.Join(dir, "bin")
	for _, d := range []string{home, runtimeDir, models, bin} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	paths := map[string]string{}
	for i, name := range []string{"alpha", "beta"} {
		w, err := testmodel.Random(uint64(10+i), testmodel.Qwen3Small())
		if err != nil {
			t.Fatal(err)
		}
		paths[name] = filepath.Join(models, name+".gguf")
		if err := testmodel.WriteGGUF(paths[name], w, testmodel.F32); err != nil {
			t.Fatal(err)
		}
	}

	// xdg-open records the chat page's one-time link (Open chat), which
	// gives the test the page's session, as it gives the person's browser.
	opened := filepath.Join(dir, "opened")
	if err := os.WriteFile(filepath.Join(bin, "xdg-open"), []byte(fmt.Sprintf("#!/bin/sh\necho \"$1\" >> %q\n", opened)), 0o755); err != nil {
		t.Fatal(err)
	}
	display := desktoptest.StartXvfb(t)
	bus := desktoptest.StartSessionBus(t)
	shell := desktoptest.StartShell(t, bus)
	addr := freeAddr(t)
	cmd := exec.Command(exe, "--engine", "cpu", "--addr", addr)
	cmd.Env = []string{
		"PATH=" + bin + ":" + os.Getenv("PATH"), "HOME=" + home, "LANG=en_US.UTF-8",
		"DISPLAY=" + display.Name, "DBUS_SESSION_BUS_ADDRESS=" + bus, "XDG_RUNTIME_DIR=" + runtimeDir,
		"XDG_CONFIG_HOME=" + filepath.Join(home, ".config"), "XDG_DATA_HOME=" + filepath.Join(home, ".local/share"),
		"XDG_CACHE_HOME=" + filepath.Join(home, ".cache"), "FLM_MODEL_PATH=" + filepath.Join(home, "flm"),
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
	// The page, opened from the tray: its one-time link gives the
	// session cookie.
	if err := item.Click(menu.Find("Open chat")); err != nil {
		t.Fatal(err)
	}
	var link string
	desktoptest.Eventually(t, 60*time.Second, "the chat page opened", func() error {
		b, err := os.ReadFile(opened)
		if err != nil {
			return err
		}
		if link = strings.TrimSpace(string(b)); !strings.HasPrefix(link, base+"/open?t=") {
			return fmt.Errorf("opened %q, want a one-time link on %s/", link, base)
		}
		return nil
	})
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	page := &http.Client{Jar: jar}
	if resp, err := page.Get(link); err != nil {
		t.Fatal(err)
	} else if resp.Body.Close(); resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", link, resp.Status)
	}
	// Added as the page adds them: the tray hears nothing of it.
	for _, name := range []string{"alpha", "beta"} {
		body, _ := json.Marshal(map[string]any{"path": paths[name], "use": false})
		req, _ := http.NewRequest("POST", base+"/api/library", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Origin", base)
		resp, err := page.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("POST /api/library %s: %d %s", name, resp.StatusCode, b)
		}
	}

	// modelMenu reads the menu until its status line is status ("":
	// any) and the Model submenu holds want (each line as Lines writes
	// it, indented under "Model").
	modelMenu := func(what, status string, want ...string) *desktoptest.MenuNode {
		t.Helper()
		var menu *desktoptest.MenuNode
		desktoptest.Eventually(t, 60*time.Second, what, func() error {
			m, err := item.Menu()
			if err != nil {
				return err
			}
			lines := m.Lines()
			if len(lines) == 0 || lines[len(lines)-1] != "Quit" {
				return fmt.Errorf("a menu being rebuilt:\n%s", strings.Join(lines, "\n"))
			}
			if status != "" && lines[0] != status+" (disabled)" {
				return fmt.Errorf("the status line is %q, want %q", lines[0], status)
			}
			sub := submenu(lines, "Model")
			for _, w := range want {
				if !contains(sub, w) {
					return fmt.Errorf("the Model submenu has no %q:\n%s", w, strings.Join(lines, "\n"))
				}
			}
			menu = m
			return nil
		})
		return menu
	}
	menu = modelMenu("both models in the Model submenu", "Off", "○ alpha (CPU only)", "○ beta (CPU only)", "Add a GGUF file…", "Add a model folder…")
	if err := saveText("tray-models-menu.txt", strings.Join(menu.Lines(), "\n")+"\n"); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct{ name, other string }{{"alpha", "beta"}, {"beta", "alpha"}} {
		clickUntil(t, item, &output, "○ "+tc.name+" (CPU only)", func() error { return wantModel(base, tc.name, "loading", "on") })
		desktoptest.Eventually(t, 120*time.Second, tc.name+" on in /api/status", func() error {
			return wantModel(base, tc.name, "on")
		})
		menu = modelMenu(tc.name+" marked in the menu, and on", "On: CPU", "● "+tc.name+" (CPU only)", "○ "+tc.other+" (CPU only)")
		// The model the click loaded answers.
		req := fmt.Sprintf(`{"model":%q,"max_tokens":2,"temperature":0,"messages":[{"role":"user","content":"hi"}]}`, tc.name)
		resp, err := http.Post(base+"/v1/chat/completions", "application/json", strings.NewReader(req))
		if err != nil {
			t.Fatal(err)
		}
		var answer struct {
			Model string `json:"model"`
		}
		err = json.NewDecoder(resp.Body).Decode(&answer)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 || answer.Model != tc.name {
			t.Fatalf("chat with %s: %d %v, answered by %q", tc.name, resp.StatusCode, err, answer.Model)
		}
		if err := wantModel(base, tc.name, "on"); err != nil {
			t.Fatalf("after the chat: %v", err) // no load of another model behind the menu's back
		}
	}

	var quitErr error
	clickUntil(t, item, &output, "Quit", func() error {
		select {
		case quitErr = <-exited:
			return nil
		default:
			return errors.New("still running")
		}
	})
	if quitErr != nil {
		t.Fatalf("npuchat after Quit: %v", quitErr)
	}
	noFyneThreadErrors(t, output.String())
}

// clickUntil clicks the entry labelled label in the menu as read now
// until done holds. fyne rebuilds the whole tray menu on each change,
// with new entry IDs, and a click on an ID from the layout before is
// lost, as a panel's would be before it read the new layout; systray
// then logs "systray error: no menu item with ID …" to out, and only
// then is the menu read and clicked again (three clicks at most). done
// is awaited up to a minute after a click, a bound on a failure only.
func clickUntil(t *testing.T, item *desktoptest.Item, out *lockedBuffer, label string, done func() error) {
	t.Helper()
	const lost = "systray error: no menu item with ID"
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	var err error
	for try := 0; try < 3; try++ {
		m, rerr := item.Menu()
		if rerr != nil {
			t.Fatal(rerr)
		}
		e := m.Find(label)
		if e == nil {
			t.Fatalf("no %q in the menu:\n%s", label, strings.Join(m.Lines(), "\n"))
		}
		seen := strings.Count(out.String(), lost)
		if err := item.Click(e); err != nil {
			t.Fatal(err)
		}
		deadline := time.After(time.Minute)
		for err = done(); err != nil && strings.Count(out.String(), lost) == seen; err = done() {
			select {
			case <-tick.C:
			case <-deadline:
				t.Fatalf("the click on %q did nothing within a minute, and was not lost: %v", label, err)
			}
		}
		if err == nil {
			return
		}
		t.Logf("the click on %q was lost (the menu was rebuilt): clicking the menu as read again", label)
	}
	t.Fatalf("three clicks on %q were lost: %v", label, err)
}

// submenu is the lines under a submenu's label (Lines indents them by
// two spaces), unindented.
func submenu(lines []string, label string) []string {
	var out []string
	in := false
	for _, l := range lines {
		switch {
		case l == label:
			in = true
		case in && strings.HasPrefix(l, "  "):
			out = append(out, strings.TrimPrefix(strings.TrimSuffix(l, " (disabled)"), "  "))
		case in:
			return out
		}
	}
	return out
}

func contains(lines []string, s string) bool {
	for _, l := range lines {
		if l == s {
			return true
		}
	}
	return false
}

// wantModel checks /api/status: the model named, in one of the states
// named.
func wantModel(base, model string, states ...string) error {
	resp, err := http.Get(base + "/api/status")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var st struct {
		State string `json:"state"`
		Model string `json:"model"`
	}
	if err := json.Unmarshal(body, &st); err != nil {
		return fmt.Errorf("/api/status: %v: %s", err, body)
	}
	if !contains(states, st.State) || st.Model != model {
		return fmt.Errorf("/api/status says %s %s: %s", st.Model, st.State, body)
	}
	return nil
}

// saveText writes a text artifact beside the screenshots.
func saveText(name, text string) error {
	dir := os.Getenv("NPUCHAT_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join("..", "..", ".artifacts")
	}
	dir = filepath.Join(dir, "gui")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644)
}
