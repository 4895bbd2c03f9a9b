package gui

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"fyne.io/fyne/v2/test"

	"github.com/npuchat/npuchat/app"
	"github.com/npuchat/npuchat/engine/testmodel"
	"github.com/npuchat/npuchat/eventbus/eventbustest"
	"github.com/npuchat/npuchat/models/library"
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
	// menuShows waits for the menu the controller sets on the host to
	// satisfy cond, looking again at each change (a minute bounds a
	// failure).
	menuShows := func(what string, cond func(m []string) bool) {
		t.Helper()
		bound := time.After(time.Minute)
		for {
			next := host.next()
			if cond(menu()) {
				return
			}
			select {
			case <-next:
			case <-bound:
				t.Fatalf("awaiting %s for a minute; menu %q, status %+v", what, menu(), a.Status())
			}
		}
	}
	menuShows("the model submenu", func(m []string) bool {
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
		events, stop := a.Subscribe()
		eventbustest.Expect(t, events, eventbustest.Is(name+" loaded", func(ev service.Event) bool {
			return ev.Status.Model == name && ev.Status.State == service.StateOn
		}))
		stop()
		menuShows(name+" marked in the menu", func(m []string) bool { return slices.Contains(m, "  ● "+name+" (CPU only)") })
	}
	if m := menu(); !slices.Contains(m, "  ○ alpha (CPU only)") {
		t.Errorf("alpha still marked after switching to beta: %q", m)
	}
}

// TestModelMenuFollowsTheLibrary: a model added to the library behind
// the tray's back (on the chat page: no service event) shows in the
// Model submenu when the library announces it, and goes when it is
// removed; the
// loaded model's mark follows the service's status at once, before any
// read of the library; a library that lists nothing says so.
func TestModelMenuFollowsTheLibrary(t *testing.T) {
	f := newFakeApp(t.Cleanup)
	lib := &fakeLibrary{models: []library.Model{{Name: "minicpm5:2b", Engines: []string{"npu", "cpu"}}}}
	h := harnessFor(t, test.NewTempApp(t), f, &libraryApp{f, lib})
	// sub is the Model submenu's lines (run on the UI thread, as
	// eventually runs its condition).
	sub := func() []string {
		h.host.mu.Lock()
		all := labels(h.host.menu, "")
		h.host.mu.Unlock()
		var out []string
		for _, l := range all {
			if strings.HasPrefix(l, "  ") {
				out = append(out, strings.TrimPrefix(l, "  "))
			}
		}
		return out
	}
	want := func(what string, lines ...string) {
		t.Helper()
		h.eventually(what, func() bool { return slices.Equal(sub(), lines) })
	}
	tail := []string{"---", labelAddFile, labelAddFolder}
	want("the library read", append([]string{"○ minicpm5:2b (NPU and CPU)"}, tail...)...)

	lib.set(func(ms []library.Model) []library.Model {
		return append(ms, library.Model{Name: "gamma", Engines: []string{"cpu"}})
	})
	want("gamma, added on the page", append([]string{"○ minicpm5:2b (NPU and CPU)", "○ gamma (CPU only)"}, tail...)...)

	h.tap() // the model on: marked from the status, not a library read
	want("the loaded model marked", append([]string{"● minicpm5:2b (NPU and CPU)", "○ gamma (CPU only)"}, tail...)...)

	lib.set(func([]library.Model) []library.Model { return nil })
	want("an empty library", append([]string{"No model installed (off)"}, tail...)...)
}

// TestInstallIsNotOfferedForAModelYouAdded: with a model the user added
// served, the menu's Install is off and the setup window says why
// instead of offering to install or update it; with NPU Chat's own
// model it is offered again.
func TestInstallIsNotOfferedForAModelYouAdded(t *testing.T) {
	f := newFakeApp(t.Cleanup)
	f.report = notReady()
	lib := &fakeLibrary{models: []library.Model{{Name: "minicpm5:2b", Source: library.SourceAdded, Path: "/home/u/m.gguf", Engines: []string{"cpu"}}}}
	h := harnessFor(t, test.NewTempApp(t), f, &libraryApp{f, lib})
	h.eventually("Install off", func() bool {
		h.host.mu.Lock()
		defer h.host.mu.Unlock()
		return slices.Contains(labels(h.host.menu, ""), labelInstall+" (off)")
	})
	h.click(labelCheck)
	want := "minicpm5:2b is a model you added (/home/u/m.gguf): there is nothing to install or update."
	h.eventually("the setup window's word", func() bool {
		s := h.c.setup
		return s != nil && s.installLine.Text == want && s.installBtn.Disabled()
	})

	lib.set(func(ms []library.Model) []library.Model { ms[0].Source = library.SourceNPUChat; return ms })
	h.eventually("Install offered for NPU Chat's own model", func() bool {
		h.host.mu.Lock()
		menu := labels(h.host.menu, "")
		h.host.mu.Unlock()
		s := h.c.setup
		return slices.Contains(menu, labelInstall) && !s.installBtn.Disabled() && strings.HasPrefix(s.installLine.Text, "minicpm5:2b: install it")
	})
}

// TestLibraryReadsDoNotRebuildTheMenu: a library change that leaves
// what the menu lists as it was (another model's file touched, the same
// list read again) rebuilds nothing (a rebuild gives every entry a new
// ID on Linux, and closes a menu being browsed on some panels); one
// that changes it rebuilds the menu.
func TestLibraryReadsDoNotRebuildTheMenu(t *testing.T) {
	f := newFakeApp(t.Cleanup)
	lib := &fakeLibrary{models: []library.Model{{Name: "minicpm5:2b", Source: library.SourceNPUChat, Engines: []string{"npu", "cpu"}}}}
	h := harnessFor(t, test.NewTempApp(t), f, &libraryApp{f, lib})
	h.tap()
	// On, marked, and no rebuild left to come from the load's progress.
	h.eventually("on, marked and drawn", func() bool {
		h.host.mu.Lock()
		defer h.host.mu.Unlock()
		return h.c.view.Ready && !h.c.menuDue && slices.Contains(labels(h.host.menu, ""), "  ● minicpm5:2b (NPU and CPU)")
	})
	var reads, before int
	h.ui.wait(func() {
		reads = h.c.libraryReads
		h.host.mu.Lock()
		before = h.host.menus
		h.host.mu.Unlock()
	})
	for i := 1; i <= 3; i++ {
		lib.set(func(ms []library.Model) []library.Model { return slices.Clone(ms) })
		h.eventually(fmt.Sprintf("read %d taken in", i), func() bool { return h.c.libraryReads >= reads+i })
	}
	h.ui.wait(func() {
		h.host.mu.Lock()
		defer h.host.mu.Unlock()
		if h.host.menus != before || h.c.menuDue {
			t.Errorf("the menu was rebuilt %d times (one due: %v) by reads that changed nothing", h.host.menus-before, h.c.menuDue)
		}
	})

	lib.set(func(ms []library.Model) []library.Model {
		return append(ms, library.Model{Name: "gamma", Engines: []string{"cpu"}})
	})
	h.eventually("a changed list rebuilt", func() bool {
		h.host.mu.Lock()
		defer h.host.mu.Unlock()
		return h.host.menus > before && slices.Contains(labels(h.host.menu, ""), "  ○ gamma (CPU only)")
	})
}
