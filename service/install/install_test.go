package install_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/npuchat/npuchat/config"
	"github.com/npuchat/npuchat/models"
	"github.com/npuchat/npuchat/models/hub/hubtest"
	"github.com/npuchat/npuchat/service/install"
	"github.com/npuchat/npuchat/service/install/installtest"
)

func newRunner(t *testing.T, hub *hubtest.Server) (*install.Runner, *config.Config) {
	t.Helper()
	env := installtest.Env(hub, t.TempDir())
	cfg, err := config.Load(config.MapEnv(env), "linux")
	if err != nil {
		t.Fatal(err)
	}
	r := install.New(install.Options{NewInstaller: func() (*models.Installer, error) {
		in, err := models.NewInstaller(cfg, models.Options{Getenv: config.MapEnv(env), GOOS: "linux"})
		if err != nil {
			return nil, err
		}
		in.Hub.Sleep = func(ctx context.Context, d time.Duration) error { return ctx.Err() }
		in.Free = func(string) (uint64, error) { return 100 << 30, nil }
		return in, nil
	}})
	t.Cleanup(r.Close)
	return r, cfg
}

func waitFor(t *testing.T, ch <-chan install.Status, what string, ok func(install.Status) bool) install.Status {
	t.Helper()
	timeout := time.After(60 * time.Second)
	for {
		select {
		case st := <-ch:
			if ok(st) {
				return st
			}
		case <-timeout:
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

func TestInstallCancelResume(t *testing.T) {
	hub := installtest.Start(t)
	hub.AddFaults("model.q4nx", hubtest.Fault{Delay: time.Millisecond})
	r, cfg := newRunner(t, hub)
	ch, stop := r.Subscribe()
	defer stop()

	if err := r.Start("minicpm5:2b"); err != nil {
		t.Fatal(err)
	}
	if err := r.Start("minicpm5:2b"); !errors.Is(err, install.ErrBusy) {
		t.Fatalf("second install while one runs: %v, want ErrBusy", err)
	}
	st := waitFor(t, ch, "download progress", func(s install.Status) bool {
		return s.File == "model.q4nx" && s.Bytes > 20_000 && s.Bytes < s.Total
	})
	if st.State != install.StateRunning || st.Total == 0 {
		t.Fatalf("progress: %+v", st)
	}
	if err := r.Cancel(context.Background(), "minicpm5:2b"); err != nil {
		t.Fatal(err)
	}
	if st := r.Status(); st.State != install.StateCancelled || !strings.Contains(st.Message, "resume") {
		t.Fatalf("after cancel: %+v", st)
	}
	if _, err := models.Locate(cfg, "minicpm5:2b"); err == nil {
		t.Fatal("a cancelled install left the model installed")
	}
	if err := r.Cancel(context.Background(), "minicpm5:2b"); !errors.Is(err, install.ErrNotRunning) {
		t.Fatalf("cancel with nothing running: %v", err)
	}

	// Resume: the download continues from the partial file.
	if err := r.Start("minicpm5:2b"); err != nil {
		t.Fatal(err)
	}
	st = waitFor(t, ch, "the install to end", func(s install.Status) bool {
		return s.State == install.StateDone || s.State == install.StateFailed
	})
	if st.State != install.StateDone {
		t.Fatalf("resumed install: %+v", st)
	}
	if _, err := models.Locate(cfg, "minicpm5:2b"); err != nil {
		t.Fatalf("installed model not found: %v", err)
	}
	var ranges []string
	for _, q := range hub.Requests() {
		if strings.HasSuffix(q.Path, "/model.q4nx") && q.Range != "" {
			ranges = append(ranges, q.Range)
		}
	}
	if len(ranges) == 0 || ranges[0] == "bytes=0-" {
		t.Fatalf("the second run did not resume the partial download: ranges %v", ranges)
	}
}

func TestInstallErrors(t *testing.T) {
	hub := installtest.Start(t)
	r, _ := newRunner(t, hub)
	if err := r.Start("no-such-model"); err == nil || !strings.Contains(err.Error(), "unknown model") {
		t.Fatalf("unknown model: %v", err)
	}
	hub.AddFaults("@tree", hubtest.Fault{Status: 404}, hubtest.Fault{Status: 404}, hubtest.Fault{Status: 404}, hubtest.Fault{Status: 404}, hubtest.Fault{Status: 404})
	ch, stop := r.Subscribe()
	defer stop()
	if err := r.Start("minicpm5:2b"); err != nil {
		t.Fatal(err)
	}
	st := waitFor(t, ch, "the install to fail", func(s install.Status) bool { return s.State != install.StateRunning })
	if st.State != install.StateFailed || st.Error == "" {
		t.Fatalf("install from a hub that refuses: %+v", st)
	}
}
