package gui

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"fyne.io/fyne/v2/test"

	"github.com/npuchat/npuchat/app"
	"github.com/npuchat/npuchat/engine/testmodel"
	"github.com/npuchat/npuchat/service"
)

// The assembled app has the model library the tray's section uses.
var _ ModelLibrary = (*app.App)(nil)

// TestModelMenuListsAndSwitches: with the real app and two small GGUF
// models added to its library, the tray's Model submenu lists both with
// what can run them; choosing one loads it (the service serves it and
// the menu marks it), choosing the other switches without a restart.
func TestModelMenuListsAndSwitches(t *testing.T) {
	home := t.TempDir()
	env := map[string]string{"HOME": home, "NPUCHAT_DATA": filepath.Join(home, "data"), "FLM_MODEL_PATH": filepath.Join(home, "flm"),
		"XDG_CONFIG_HOME": filepath.Join(home, ".config"), "NPUCHAT_ENGINE": "cpu"}
	a, err := app.New(context.Background(), app.Options{Getenv: func(k string) string { return env[k] },
		Flags: app.Flags{Addr: "127.0.0.1:0"}, Logger: slog.New(slog.DiscardHandler), Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Shutdown(context.Background()) })
	for i, name := range []string{"alpha", "beta"} {
		w, err := testmodel.Random(uint64(i+1), testmodel.Qwen3Small())
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(home, "models", name+".gguf")
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := testmodel.WriteGGUF(p, w, testmodel.F32); err != nil {
			t.Fatal(err)
		}
		if _, err := a.AddModel(context.Background(), p); err != nil {
			t.Fatal(err)
		}
	}

	host := &fakeHost{}
	ui := newUIThread(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	c := newController(ctx, newLoop(test.NewTempApp(t)), a, host, testLogger(t))
	c.do = ui.do
	c.notify = func(Notice) {}
	var stop func()
	ui.wait(func() { stop = c.start() })
	t.Cleanup(stop)
	menu := func() []string {
		var out []string
		ui.wait(func() {
			host.mu.Lock()
			defer host.mu.Unlock()
			out = labels(host.menu, "")
		})
		return out
	}
	eventually := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s; menu %q, status %+v", what, menu(), a.Status())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	eventually("the model submenu", func() bool {
		m := menu()
		return slices.Contains(m, labelModels) && slices.Contains(m, "  ○ alpha (CPU only)") && slices.Contains(m, "  ○ beta (CPU only)") &&
			slices.Contains(m, "  "+labelAddFile) && slices.Contains(m, "  "+labelAddFolder)
	})
	for _, name := range []string{"alpha", "beta"} {
		var action func()
		ui.wait(func() {
			host.mu.Lock()
			defer host.mu.Unlock()
			action = findItem(host.menu, "○ "+name+" (CPU only)")
		})
		if action == nil {
			t.Fatalf("no item for %s in %q", name, menu())
		}
		ui.wait(action)
		eventually(name+" loaded", func() bool {
			st := a.Status()
			return st.Model == name && st.State == service.StateOn
		})
		eventually(name+" marked in the menu", func() bool { return slices.Contains(menu(), "  ● "+name+" (CPU only)") })
	}
	if m := menu(); !slices.Contains(m, "  ○ alpha (CPU only)") {
		t.Errorf("alpha still marked after switching to beta: %q", m)
	}
}
