package library

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/npuchat/npuchat/config"
)

func write(t *testing.T, p, s string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestResolveStaysInsideRoots: "..", links and absolute paths that lead
// out of the roots are refused; paths inside (also through a link that
// stays inside) are accepted.
func TestResolveStaysInsideRoots(t *testing.T) {
	base := t.TempDir()
	home := filepath.Join(base, "home")
	models := filepath.Join(base, "models")
	outside := filepath.Join(base, "outside")
	write(t, filepath.Join(home, "m", "a.gguf"), "GGUF")
	write(t, filepath.Join(models, "b.gguf"), "GGUF")
	write(t, filepath.Join(outside, "secret.gguf"), "GGUF")
	if err := os.Symlink(outside, filepath.Join(home, "out")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(models, "b.gguf"), filepath.Join(home, "b-link.gguf")); err != nil {
		t.Fatal(err)
	}
	r := Roots{home, models}
	for _, tc := range []struct {
		path string
		ok   bool
	}{
		{filepath.Join(home, "m", "a.gguf"), true},
		{"~/m/a.gguf", true},
		{filepath.Join(models, "b.gguf"), true},
		{filepath.Join(home, "b-link.gguf"), true},
		{filepath.Join(home, "..", "outside", "secret.gguf"), false},
		{"~/../outside/secret.gguf", false},
		{filepath.Join(home, "out", "secret.gguf"), false},
		{filepath.Join(outside, "secret.gguf"), false},
		{"/etc/passwd", false},
		{"m/a.gguf", false},
		{"", false},
		{filepath.Join(home, "missing.gguf"), false},
	} {
		got, err := r.Resolve(tc.path, home)
		if tc.ok != (err == nil) {
			t.Errorf("Resolve(%q) = %q, %v; want ok=%v", tc.path, got, err, tc.ok)
		}
		if err == nil && strings.HasPrefix(got, outside) {
			t.Errorf("Resolve(%q) led outside: %s", tc.path, got)
		}
	}
	_, err := r.Resolve(filepath.Join(home, "out", "secret.gguf"), home)
	if !errors.Is(err, ErrOutside) {
		t.Errorf("link out: %v, want ErrOutside", err)
	}
}

func TestListShowsModelsAndFoldersOnly(t *testing.T) {
	home := t.TempDir()
	outside := t.TempDir()
	write(t, filepath.Join(home, "a.gguf"), "GGUF....")
	write(t, filepath.Join(home, "notes.txt"), "x")
	write(t, filepath.Join(home, ".hidden", "x.gguf"), "GGUF")
	write(t, filepath.Join(home, "hf", "config.json"), "{}")
	write(t, filepath.Join(home, "hf", "model.safetensors"), "x")
	write(t, filepath.Join(home, "hf", "tokenizer.json"), "{}")
	write(t, filepath.Join(home, "flm", "config.json"), "{}")
	write(t, filepath.Join(home, "flm", "model.q4nx"), "x")
	write(t, filepath.Join(home, "sub", "deeper.gguf"), "GGUF")
	os.Symlink(outside, filepath.Join(home, "escape"))
	l, err := Roots{home}.List("", home)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, it := range l.Items {
		got[it.Name] = it.Kind
	}
	want := map[string]string{"a.gguf": "gguf", "hf": "safetensors", "flm": "q4nx", "sub": "dir"}
	if len(got) != len(want) {
		t.Errorf("items %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: kind %q, want %q (all: %v)", k, got[k], v, got)
		}
	}
	if l.Parent != "" {
		t.Errorf("the root has a parent %q; it must not lead out", l.Parent)
	}
	sub, err := Roots{home}.List(filepath.Join(home, "sub"), home)
	if err != nil || sub.Parent == "" || len(sub.Items) != 1 {
		t.Errorf("sub: %+v, %v", sub, err)
	}
	if _, err := (Roots{home}).List(filepath.Join(home, ".."), home); err == nil {
		t.Error("listing the home's parent was allowed")
	}
}

func TestDetect(t *testing.T) {
	d := t.TempDir()
	write(t, filepath.Join(d, "ok.gguf"), "GGUFxxxx")
	write(t, filepath.Join(d, "bad.gguf"), "nope")
	write(t, filepath.Join(d, "half", "config.json"), "{}")
	for _, tc := range []struct {
		p, want, errPart string
	}{
		{"ok.gguf", FormatGGUF, ""},
		{"bad.gguf", "", "not a GGUF file"},
		{"half", "", "no weights"},
		{".", "", "no config.json"},
	} {
		got, err := Detect(filepath.Join(d, tc.p))
		if got != tc.want || (tc.errPart != "" && (err == nil || !strings.Contains(err.Error(), tc.errPart))) {
			t.Errorf("Detect(%s) = %q, %v; want %q, %q", tc.p, got, err, tc.want, tc.errPart)
		}
	}
}

// TestLegacyLibraryFileMoves: the library.json of earlier versions
// moves into the settings once (renamed after, so a model forgotten
// later never comes back from it); a damaged one stays for a person to
// fix, and the library works without it.
func TestLegacyLibraryFileMoves(t *testing.T) {
	for _, damaged := range []bool{false, true} {
		d := t.TempDir()
		model := filepath.Join(d, "m.gguf")
		write(t, model, "GGUF")
		legacy := filepath.Join(d, "data", "library.json")
		body := `{"models": [{"name": "m", "path": "` + filepath.ToSlash(model) + `", "format": "gguf", "added": "2026-01-02T03:04:05Z"}]}`
		if damaged {
			body = "{broken"
		}
		write(t, legacy, body)
		store := config.NewStore(&config.Config{SettingsPath: filepath.Join(d, "settings.json")})
		t.Cleanup(store.Close)
		l := New(context.Background(), Options{Store: store, LegacyFile: legacy, Home: d})
		_, resolveErr := l.Resolve("m")
		_, statErr := os.Stat(legacy)
		if damaged {
			if resolveErr == nil || statErr != nil || len(store.Get().AddedModels) != 0 {
				t.Errorf("damaged: resolve %v, file %v, settings %+v", resolveErr, statErr, store.Get().AddedModels)
			}
			continue
		}
		got := store.Get().AddedModels
		if len(got) != 1 || got[0].Name != "m" || got[0].Path != filepath.FromSlash(filepath.ToSlash(model)) || !got[0].Added.Equal(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)) {
			t.Errorf("settings after the move: %+v", got)
		}
		if resolveErr != nil || !errors.Is(statErr, os.ErrNotExist) {
			t.Errorf("moved: resolve %v, old file %v", resolveErr, statErr)
		}
		if b, err := os.ReadFile(filepath.Join(d, "settings.json")); err != nil || !strings.Contains(string(b), `"added_models"`) {
			t.Errorf("the settings file does not keep the model: %s, %v", b, err)
		}
		if err := l.Forget(context.Background(), "m"); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(model); err != nil {
			t.Errorf("forget deleted the model file: %v", err)
		}
		l2 := New(context.Background(), Options{Store: store, LegacyFile: legacy, Home: d})
		if _, err := l2.Resolve("m"); err == nil {
			t.Error("a forgotten model came back from the old file")
		}
	}
}

func TestNameFor(t *testing.T) {
	taken := map[string]bool{"tiny": true}
	n, _ := NameFor("/x/Tiny.gguf", func(s string) bool { return taken[s] })
	if n != "tiny-2" {
		t.Errorf("got %q", n)
	}
	n, _ = NameFor("/x/My Model", func(string) bool { return false })
	if n != "my-model" {
		t.Errorf("got %q", n)
	}
}

// TestLegacyMoveHalfDone: the models of library.json reached the
// settings but the file could not be renamed (something is in the way of
// library.json.moved): the file, whose models the settings now hold, is
// removed instead, so that a model forgotten after never comes back from
// it at the next start; what was in the way is left alone.
func TestLegacyMoveHalfDone(t *testing.T) {
	d := t.TempDir()
	model := filepath.Join(d, "m.gguf")
	write(t, model, "GGUF")
	legacy := filepath.Join(d, "data", "library.json")
	write(t, legacy, `{"models": [{"name": "m", "path": "`+filepath.ToSlash(model)+`", "format": "gguf"}]}`)
	inTheWay := filepath.Join(legacy+".moved", "keep")
	write(t, inTheWay, "not ours")
	store := config.NewStore(&config.Config{SettingsPath: filepath.Join(d, "settings.json")})
	t.Cleanup(store.Close)
	l := New(context.Background(), Options{Store: store, LegacyFile: legacy, Home: d})
	if _, err := l.Resolve("m"); err != nil {
		t.Fatalf("the moved model: %v", err)
	}
	if b, err := os.ReadFile(inTheWay); err != nil || string(b) != "not ours" {
		t.Errorf("what was in the way: %q, %v", b, err)
	}
	if err := l.Forget(context.Background(), "m"); err != nil {
		t.Fatal(err)
	}
	l2 := New(context.Background(), Options{Store: store, LegacyFile: legacy, Home: d})
	if _, err := l2.Resolve("m"); err == nil {
		t.Errorf("a forgotten model came back from the old file (settings %+v)", store.Get().AddedModels)
	}
}

// TestLegacyNameInUseIsKept: a model of library.json whose name an
// added model of another file already has (library.json written again by
// an earlier version after the move) is moved under a name of its own,
// not dropped with the file renamed after it.
func TestLegacyNameInUseIsKept(t *testing.T) {
	d := t.TempDir()
	a, b := filepath.Join(d, "a.gguf"), filepath.Join(d, "b.gguf")
	write(t, a, "GGUF")
	write(t, b, "GGUF")
	legacy := filepath.Join(d, "data", "library.json")
	write(t, legacy, `{"models": [{"name": "m", "path": "`+filepath.ToSlash(b)+`", "format": "gguf"}]}`)
	store := config.NewStore(&config.Config{SettingsPath: filepath.Join(d, "settings.json")})
	t.Cleanup(store.Close)
	if _, err := store.Update(context.Background(), func(s *config.Settings) error {
		s.AddedModels = []config.AddedModel{{Name: "m", Path: a, Format: FormatGGUF}}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	New(context.Background(), Options{Store: store, LegacyFile: legacy, Home: d})
	paths := map[string]string{}
	for _, m := range store.Get().AddedModels {
		paths[m.Path] = m.Name
	}
	if paths[a] != "m" || paths[b] == "" || paths[b] == "m" {
		t.Errorf("added models after the move: %+v, want m for %s and a name of its own for %s", store.Get().AddedModels, a, b)
	}
}
