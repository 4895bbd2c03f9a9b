package main

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/npuchat/npuchat/app"
	"github.com/npuchat/npuchat/gui"
	"github.com/npuchat/npuchat/models/hub/hubtest"
	"github.com/npuchat/npuchat/service/install"
	"github.com/npuchat/npuchat/service/install/installtest"
)

// The tray's view of the app is gui.App.
var _ gui.App = trayApp{}

// installRig is an app whose model installs from a fake hub into a
// FastFlowLM root.
func installRig(t *testing.T) *app.App {
	t.Helper()
	fake := hubtest.New(installtest.Repo, "main", installtest.StubFiles())
	t.Cleanup(fake.Close)
	base := t.TempDir()
	root := filepath.Join(base, "flm")
	os.MkdirAll(filepath.Join(root, "xclbins"), 0o755)
	os.WriteFile(filepath.Join(root, "flm"), []byte("#!/bin/sh\nif [ \"$1\" = version ] && [ \"$2\" = --json ]; then echo '{\"version\": \"0.9.45\"}'; else exit 3; fi\n"), 0o755)
	sys, err := os.ReadFile("../../models/flm/testdata/flm_v0.9.45.input.json")
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(root, "model_list.json"), sys, 0o644)
	env := map[string]string{
		"HOME": filepath.Join(base, "home"), "NPUCHAT_DATA": filepath.Join(base, "data"),
		"NPUCHAT_CONFIG": filepath.Join(base, "settings.json"), "HF_ENDPOINT": fake.URL(),
	}
	a, err := app.New(context.Background(), app.Options{Getenv: func(k string) string { return env[k] },
		Flags: app.Flags{Addr: "127.0.0.1:0", FLMRoot: root}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Shutdown(context.Background()) })
	return a
}

// TestTrayInstallsThroughTheSharedRunner: the tray's "Install model…"
// runs the page's install runner (app.App.InstallModel, tested in app
// with its cancel), with progress in the tray's words, and the model is
// installed afterwards.
func TestTrayInstallsThroughTheSharedRunner(t *testing.T) {
	a := installRig(t)
	if a.ModelInstalled() {
		t.Fatal("installed before the install")
	}
	var mu sync.Mutex
	var seen []gui.InstallProgress
	err := trayApp{a}.InstallModel(context.Background(), func(p gui.InstallProgress) {
		mu.Lock()
		seen = append(seen, p)
		mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	if !a.ModelInstalled() {
		t.Fatal("not installed after the tray's install")
	}
	if st := a.Installs().Status(); st.State != install.StateDone || st.Model != "minicpm5:2b" {
		t.Fatalf("runner %+v", st)
	}
	mu.Lock()
	defer mu.Unlock()
	downloading, whole := false, false
	frac := 0.0
	for _, p := range seen {
		downloading = downloading || strings.HasPrefix(p.Message, "downloading ")
		// The bar is the whole download's, never going back between files.
		whole = whole || p.FilesTotal > 1 && p.Total > 0 && p.Bytes <= p.Total
		if p.Frac < frac {
			t.Errorf("the install's bar went back from %v to %v (%+v)", frac, p.Frac, p)
		}
		frac = max(frac, p.Frac)
	}
	if len(seen) == 0 || !downloading || !whole || seen[len(seen)-1].Message != "installed" {
		t.Fatalf("progress %+v", seen)
	}
}
