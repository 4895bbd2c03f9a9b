package app

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/npuchat/npuchat/eventbus/eventbustest"
	"github.com/npuchat/npuchat/models/hub/hubtest"
	"github.com/npuchat/npuchat/service"
	"github.com/npuchat/npuchat/service/install"
	"github.com/npuchat/npuchat/service/install/installtest"
)

// installRig is an app whose model installs from a fake hub into a
// FastFlowLM root.
func installRig(t *testing.T) *App {
	t.Helper()
	fake := hubtest.New(installtest.Repo, "main", installtest.StubFiles())
	t.Cleanup(fake.Close)
	base := t.TempDir()
	root := filepath.Join(base, "flm")
	os.MkdirAll(filepath.Join(root, "xclbins"), 0o755)
	os.WriteFile(filepath.Join(root, "flm"), []byte("#!/bin/sh\nif [ \"$1\" = version ] && [ \"$2\" = --json ]; then echo '{\"version\": \"0.9.45\"}'; else exit 3; fi\n"), 0o755)
	sys, err := os.ReadFile("../models/flm/testdata/flm_v0.9.45.input.json")
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(root, "model_list.json"), sys, 0o644)
	env := map[string]string{
		"HOME": filepath.Join(base, "home"), "NPUCHAT_DATA": filepath.Join(base, "data"),
		"NPUCHAT_CONFIG": filepath.Join(base, "settings.json"), "HF_ENDPOINT": fake.URL(),
	}
	a, err := New(context.Background(), Options{Getenv: func(k string) string { return env[k] },
		Flags: Flags{Addr: "127.0.0.1:0", FLMRoot: root}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Shutdown(context.Background()) })
	return a
}

// installEvents collects the install statuses the service's events
// carry (what the tray and the page follow) until one ends an install.
func installEvents(t *testing.T, a *App) (wait func() []install.Status) {
	t.Helper()
	events, stop := a.Subscribe()
	done := make(chan []install.Status, 1)
	go func() {
		defer stop()
		var seen []install.Status
		for ev := range events {
			if ev.Type == service.EventInstall && ev.Install != nil {
				seen = append(seen, *ev.Install)
				if ev.Install.State.Ended() {
					done <- seen
					return
				}
			}
		}
		done <- seen
	}()
	return func() []install.Status {
		t.Helper()
		select {
		case seen := <-done:
			return seen
		case <-time.After(60 * time.Second):
			t.Fatal("no install event ended an install within 60 s")
		}
		return nil
	}
}

// TestStartInstall: the install runs on the page's runner (one install
// at a time for both) and returns at once; the service's install events
// carry each status of it, ending with the model installed; an install
// of the model already running (the page's) is followed rather than
// refused, with one end.
func TestStartInstall(t *testing.T) {
	for _, pageFirst := range []bool{false, true} {
		name := "alone"
		if pageFirst {
			name = "the page's install running"
		}
		t.Run(name, func(t *testing.T) {
			a := installRig(t)
			if a.ModelInstalled() {
				t.Fatal("installed before the install")
			}
			wait := installEvents(t, a)
			if pageFirst {
				if err := a.Installs().Start(a.Model()); err != nil {
					t.Fatal(err)
				}
			}
			if err := a.StartInstall(); err != nil {
				t.Fatal(err)
			}
			seen := wait()
			if len(seen) == 0 || seen[len(seen)-1].State != install.StateDone {
				t.Fatalf("statuses %+v; want the last one done", seen)
			}
			for _, st := range seen {
				if st.Model != "minicpm5:2b" {
					t.Errorf("a status of another model: %+v", st)
				}
			}
			if !a.ModelInstalled() {
				t.Fatal("not installed after the install")
			}
			if st := a.Installs().Status(); st.State != install.StateDone || st.Model != "minicpm5:2b" {
				t.Fatalf("runner %+v", st)
			}
		})
	}
}

// TestPageInstallStartsTheModelInTheServer: an install the page asks
// for (POST /api/models/{name}/install) switches the model on when it
// ends, in the server, with no POST /api/model/start from the browser
// (a tab closed meanwhile no longer leaves it off); the tray's install,
// which asks for no start, leaves the model as it was.
func TestPageInstallStartsTheModelInTheServer(t *testing.T) {
	for _, page := range []bool{true, false} {
		t.Run(map[bool]string{true: "page", false: "tray"}[page], func(t *testing.T) {
			a := installRig(t)
			if page {
				cookie := pageSession(t, a)
				req := httptest.NewRequest("POST", "http://127.0.0.1/api/models/minicpm5:2b/install", nil)
				req.AddCookie(cookie)
				rec := httptest.NewRecorder()
				a.WebServer().Handler().ServeHTTP(rec, req)
				if rec.Code != 202 {
					t.Fatalf("POST install: %d %s", rec.Code, rec.Body)
				}
			} else if err := a.StartInstall(); err != nil {
				t.Fatal(err)
			}
			select { // the install, and its OnDone, are over
			case <-a.Installs().Finished():
			case <-time.After(60 * time.Second):
				t.Fatal("awaiting the install's end and its OnDone: not over after 60 s")
			}
			if st := a.Installs().Status(); st.State != install.StateDone {
				t.Fatalf("the install ended %+v, want done", st)
			}
			if page {
				// The stub files do not load: started is loading, then error.
				events, stop := a.Subscribe()
				defer stop()
				eventbustest.Expect(t, events, eventbustest.Is("the model switched on", func(ev service.Event) bool {
					return ev.Status.Enabled && ev.Status.Model == "minicpm5:2b" && ev.Status.State != service.StateOff
				}))
				return
			}
			if st := a.Status(); st.State != service.StateOff {
				t.Fatalf("the tray's install switched the model on: %+v", st)
			}
		})
	}
}
