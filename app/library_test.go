package app

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/npuchat/npuchat/engine/testmodel"
	"github.com/npuchat/npuchat/enginekind"
	"github.com/npuchat/npuchat/models/library"
	"github.com/npuchat/npuchat/service"
)

// tinyGGUF writes a small random GGUF model at path.
func tinyGGUF(t *testing.T, path string, seed uint64) {
	t.Helper()
	w, err := testmodel.Random(seed, testmodel.Qwen3Small())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := testmodel.WriteGGUF(path, w, testmodel.F32); err != nil {
		t.Fatal(err)
	}
}

func libraryNamed(ms []library.Model, name string) (library.Model, bool) {
	for _, m := range ms {
		if m.Name == name {
			return m, true
		}
	}
	return library.Model{}, false
}

// TestLibraryAddSwitchForgetRemembered: two models added from the home
// folder are listed (CPU, their format and size), switching loads each
// without a restart and the loaded one is marked; the added models and
// the chosen one are there again after a restart; forgetting keeps the
// file; paths outside the home and models folders are refused.
func TestLibraryAddSwitchForgetRemembered(t *testing.T) {
	env := testEnv(t)
	env["NPUCHAT_ENGINE"] = "cpu"
	ctx := context.Background()
	one := filepath.Join(env["HOME"], "models", "One.gguf")
	tinyGGUF(t, one, 1)
	hf := filepath.Join(env["HOME"], "hf-tiny")
	w, _ := testmodel.Random(2, testmodel.Qwen3Small())
	if err := testmodel.WriteHF(hf, w, testmodel.HFOptions{}); err != nil {
		t.Fatal(err)
	}
	outside := filepath.Join(t.TempDir(), "outside.gguf")
	tinyGGUF(t, outside, 3)

	a := newApp(t, env, Flags{})
	m1, err := a.AddModel(ctx, "~/models/One.gguf")
	if err != nil {
		t.Fatal(err)
	}
	if m1.Name != "one" || m1.Format != library.FormatGGUF || m1.Size == 0 || m1.Remove != "forget" || len(m1.Engines) != 1 || m1.Engines[0] != "cpu" {
		t.Errorf("added: %+v", m1)
	}
	m2, err := a.AddModel(ctx, hf)
	if err != nil {
		t.Fatal(err)
	}
	if m2.Format != library.FormatHF {
		t.Errorf("HF folder: %+v", m2)
	}
	if again, err := a.AddModel(ctx, one); err != nil || again.Name != "one" {
		t.Errorf("the same file added twice: %+v, %v", again, err)
	}
	for _, bad := range []string{outside, filepath.Join(env["HOME"], "..", filepath.Base(filepath.Dir(outside)), "outside.gguf"), "relative.gguf"} {
		if _, err := a.AddModel(ctx, bad); err == nil {
			t.Errorf("AddModel(%s) accepted a path outside the folders", bad)
		}
	}
	link := filepath.Join(env["HOME"], "link.gguf")
	if err := os.Symlink(outside, link); err != nil {
		t.Fatal(err)
	}
	if _, err := a.AddModel(ctx, link); !errors.Is(err, library.ErrOutside) {
		t.Errorf("a link out of the home: %v, want ErrOutside", err)
	}

	for _, name := range []string{"one", m2.Name} {
		if err := a.UseModel(ctx, name); err != nil {
			t.Fatal(err)
		}
		st := waitState(t, a, service.StateOn)
		if st.Model != name {
			t.Fatalf("switched to %s, serving %s", name, st.Model)
		}
		m, _ := libraryNamed(a.Library(ctx), name)
		if !m.Loaded {
			t.Errorf("%s is loaded but not marked: %+v", name, m)
		}
	}
	a.Shutdown(ctx)

	b := newApp(t, env, Flags{})
	if b.Model() != m2.Name {
		t.Errorf("after a restart the model is %q, want %q", b.Model(), m2.Name)
	}
	for _, name := range []string{"one", m2.Name} {
		if _, ok := libraryNamed(b.Library(ctx), name); !ok {
			t.Errorf("%s forgotten by a restart", name)
		}
	}
	if err := b.RemoveModel(ctx, "one"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(one); err != nil {
		t.Errorf("forgetting deleted the user's file: %v", err)
	}
	if _, ok := libraryNamed(b.Library(ctx), "one"); ok {
		t.Error("one still listed after Forget")
	}
	if err := b.UseModel(ctx, "one"); err == nil {
		t.Error("a forgotten model can still be used")
	}
}

// TestFastFlowLMCatalogModelsEnginesAndOffers: FastFlowLM's own models
// are offered beside MiniCPM5-2B, each with what can run it; one the CPU
// engine cannot compute is served by the NPU only (never a CPU fallback
// that cannot load it) and, with no FastFlowLM here, not offered for
// install; none of them is listed as installed, nor by /v1/models.
func TestFastFlowLMCatalogModelsEnginesAndOffers(t *testing.T) {
	env := testEnv(t)
	env["PATH"] = filepath.Join(env["HOME"], "no-bin")
	a := newApp(t, env, Flags{})
	offers := map[string]library.Offer{}
	for _, o := range a.Offers(context.Background()) {
		offers[o.Name] = o
	}
	if len(offers) != 38 {
		t.Fatalf("%d offers, want MiniCPM5-2B and FastFlowLM's 37", len(offers))
	}
	for _, tc := range []struct {
		name        string
		engines     []enginekind.Kind
		installable bool
	}{
		{"minicpm5:2b", []enginekind.Kind{enginekind.NPU, enginekind.CPU}, true},
		{"qwen3:0.6b", []enginekind.Kind{enginekind.NPU, enginekind.CPU}, true},
		{"llama3.2:1b", []enginekind.Kind{enginekind.NPU}, false},
		{"qwen2.5-it:3b", []enginekind.Kind{enginekind.NPU}, false},
		{"gemma3:4b", []enginekind.Kind{enginekind.NPU}, false},
	} {
		if got := a.engines(tc.name); !slices.Equal(got, tc.engines) {
			t.Errorf("%s: engines %v, want %v", tc.name, got, tc.engines)
		}
		o := offers[tc.name]
		if o.Installable != tc.installable || o.Installed || (tc.installable == (o.CPUNote != "")) {
			t.Errorf("%s: offer %+v, want installable %v", tc.name, o, tc.installable)
		}
	}
	if lib := a.Library(context.Background()); len(lib) != 0 {
		t.Errorf("the library lists %+v before anything is installed", lib)
	}
	for _, d := range a.mgr.Models() {
		if d.Installed {
			t.Errorf("%s is listed as installed", d.Name)
		}
	}
}

// TestLibraryChangesAreAnnounced: whatever changes the library (a model
// added or forgotten on the page, another switched to) is announced on
// WatchLibrary, with the current model, so that the tray never polls.
func TestLibraryChangesAreAnnounced(t *testing.T) {
	env := testEnv(t)
	env["NPUCHAT_ENGINE"] = "cpu"
	ctx := context.Background()
	one := filepath.Join(env["HOME"], "models", "one.gguf")
	tinyGGUF(t, one, 1)
	a := newApp(t, env, Flags{})
	changes, stop := a.WatchLibrary()
	defer stop()
	next := func(what string) library.Changed {
		t.Helper()
		select {
		case c := <-changes:
			return c
		default:
			t.Fatalf("%s announced nothing", what)
		}
		return library.Changed{}
	}
	if _, err := a.AddModel(ctx, filepath.Join(t.TempDir(), "x.gguf")); err == nil {
		t.Fatal("a path outside the folders was added")
	}
	if _, err := a.AddModel(ctx, one); err != nil {
		t.Fatal(err)
	}
	if c := next("add"); c.Current != "minicpm5:2b" {
		t.Errorf("after the add: %+v", c)
	}
	if err := a.UseModel(ctx, "one"); err != nil {
		t.Fatal(err)
	}
	if c := next("a switch"); c.Current != "one" || a.Model() != "one" {
		t.Errorf("after the switch: %+v, model %q", c, a.Model())
	}
	if err := a.RemoveModel(ctx, "one"); err != nil {
		t.Fatal(err)
	}
	next("forget")
	if _, ok := libraryNamed(a.Library(ctx), "one"); ok {
		t.Error("one still listed after forgetting it")
	}
}

// TestAModelFileDeletedWhileCurrent: the file of the current model is
// deleted after it was added; starting it says the file is gone and
// where (not "not found", not the engine's open error), the library
// lists it with that note and announces the change, and asking for it
// again says the same without loading anything.
func TestAModelFileDeletedWhileCurrent(t *testing.T) {
	env := testEnv(t)
	env["NPUCHAT_ENGINE"] = "cpu"
	ctx := context.Background()
	one := filepath.Join(env["HOME"], "models", "one.gguf")
	tinyGGUF(t, one, 1)
	a := newApp(t, env, Flags{})
	if _, err := a.AddModel(ctx, one); err != nil {
		t.Fatal(err)
	}
	changes, stop := a.WatchLibrary()
	defer stop()
	if err := a.UseModel(ctx, "one"); err != nil {
		t.Fatal(err)
	}
	next := func(what string) {
		t.Helper()
		select {
		case <-changes:
		case <-time.After(time.Minute): // a bound on a failure only
			t.Fatalf("%s announced nothing", what)
		}
	}
	next("the switch")
	// UseModel also loads it: switch it off, then take its file away
	if err := a.StopModel(ctx); err != nil {
		t.Fatal(err)
	}
	if st := a.Status(); st.State != service.StateOff {
		t.Fatalf("after StopModel: %s", st.State)
	}
	if err := os.Remove(one); err != nil {
		t.Fatal(err)
	}
	if err := a.StartModel(); err != nil {
		t.Fatal(err)
	}
	st := waitState(t, a, service.StateError)
	if !strings.Contains(st.Error, "gone from "+one) {
		t.Errorf("starting a model whose file is gone: %q, want it to say the file is gone from %s", st.Error, one)
	}
	next("the rescan that found the file gone")
	m, ok := libraryNamed(a.Library(ctx), "one")
	if !ok || !strings.Contains(m.Note, "gone") {
		t.Errorf("listed as %+v (%v), want the note that its file is gone", m, ok)
	}
	err := a.UseModel(ctx, "one")
	if err == nil || !strings.Contains(err.Error(), "gone from "+one) || !errors.Is(err, service.ErrUnknownModel) {
		t.Errorf("using it again: %v, want that its file is gone (and the unknown-model 404)", err)
	}
}
