package install_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/npuchat/npuchat/config"
	"github.com/npuchat/npuchat/eventbus/eventbustest"
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
	seen := eventbustest.Expect(t, ch, eventbustest.Is(what, ok))
	return seen[len(seen)-1]
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
	if st.State != install.StateFailed || st.Failure == nil || !strings.Contains(st.Failure.Sentence, "HTTP 404") ||
		!strings.Contains(st.Failure.Detail, "404 Not Found") {
		t.Fatalf("install from a hub that refuses: %+v", st)
	}
	if w := st.Words(); w.Action != "Retry" || w.Problem != st.Failure.Sentence || w.Detail != st.Failure.Detail {
		t.Fatalf("words of an install that downloaded nothing: %+v", w)
	}
}

// TestUnreachableHubFailsInWordsAndLogs: with the hub unreachable the
// install fails with a sentence naming the cause, the whole error as its
// detail, Retry (nothing was downloaded), and a line in the log.
func TestUnreachableHubFailsInWordsAndLogs(t *testing.T) {
	env := installtest.Env(nil, t.TempDir()) // nothing listens at its hub
	cfg, err := config.Load(config.MapEnv(env), "linux")
	if err != nil {
		t.Fatal(err)
	}
	var log strings.Builder
	var logMu sync.Mutex
	r := install.New(install.Options{
		NewInstaller: func() (*models.Installer, error) {
			in, err := models.NewInstaller(cfg, models.Options{Getenv: config.MapEnv(env), GOOS: "linux"})
			if err == nil {
				in.Hub.Sleep = func(ctx context.Context, d time.Duration) error { return ctx.Err() }
			}
			return in, err
		},
		Logger: slog.New(slog.NewTextHandler(lockedWriter{&logMu, &log}, nil)),
	})
	t.Cleanup(r.Close)
	ch, stop := r.Subscribe()
	defer stop()
	if err := r.Start("minicpm5:2b"); err != nil {
		t.Fatal(err)
	}
	st := waitFor(t, ch, "the install to fail", func(s install.Status) bool { return s.State != install.StateRunning })
	w := st.Words()
	if st.State != install.StateFailed || !strings.HasPrefix(w.Problem, "NPU Chat cannot reach Hugging Face at http://127.0.0.1:1.") ||
		!strings.Contains(w.Detail, "connection refused") || w.Action != "Retry" || w.Line != "Nothing was downloaded." {
		t.Fatalf("status %+v, words %+v", st, w)
	}
	logMu.Lock()
	if !strings.Contains(log.String(), "install failed: NPU Chat cannot reach Hugging Face") || !strings.Contains(log.String(), "connection refused") {
		t.Fatalf("log:\n%s", log.String())
	}
	logMu.Unlock()

	// An earlier run left part of a download: the same failure offers
	// Resume, and says what is kept.
	staging := filepath.Join(cfg.ModelsDir, ".npuchat-staging", "MiniCPM5-2B-NPU2")
	if err := os.MkdirAll(staging, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(staging, "model.q4nx.part"), make([]byte, 5000), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := r.Start("minicpm5:2b"); err != nil {
		t.Fatal(err)
	}
	st = waitFor(t, ch, "the second install to fail", func(s install.Status) bool { return s.State == install.StateFailed })
	if w := st.Words(); w.Action != "Resume" || st.Kept() != 5000 || !strings.Contains(w.Line, "5.0 kB") {
		t.Fatalf("with 5000 bytes from an earlier run: status %+v, words %+v", st, w)
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

// TestProgressCoversTheWholeInstall: besides the file downloading now,
// the status says how many files the install downloads, the bytes of
// all of them (never going back), and the time left for all of them; a
// resumed install counts what it had.
func TestProgressCoversTheWholeInstall(t *testing.T) {
	hub := installtest.Start(t)
	var all int64
	for _, f := range installtest.Files(t) {
		all += int64(len(f.Content))
	}
	hub.AddFaults("model.q4nx", hubtest.Fault{Delay: time.Millisecond})
	r, _ := newRunner(t, hub)
	ch, stop := r.Subscribe()
	defer stop()
	if err := r.Start("minicpm5:2b"); err != nil {
		t.Fatal(err)
	}
	files := len(installtest.Files(t))
	st := waitFor(t, ch, "model.q4nx half way", func(s install.Status) bool {
		return s.File == "model.q4nx" && s.Bytes > s.Total/3 && s.Bytes < s.Total
	})
	// Without FastFlowLM the kernels are not downloaded: some of the
	// repository's files, more than model.q4nx.
	if st.FilesTotal < 2 || st.FilesTotal > files || st.OverallTotal <= st.Total || st.OverallTotal > all ||
		st.OverallBytes < st.Bytes || st.OverallBytes >= st.OverallTotal || st.OverallETASeconds <= 0 {
		t.Fatalf("whole install: %+v (the repository: %d files, %d bytes)", st, files, all)
	}
	if err := r.Cancel(context.Background(), "minicpm5:2b"); err != nil {
		t.Fatal(err)
	}
	had := r.Status().OverallBytes
	waitFor(t, ch, "the cancel", func(s install.Status) bool { return s.State == install.StateCancelled })

	if err := r.Start("minicpm5:2b"); err != nil {
		t.Fatal(err)
	}
	var last int64 = -1
	st = waitFor(t, ch, "the resumed install to end", func(s install.Status) bool {
		if s.State == install.StateRunning && s.FilesTotal > 0 {
			if s.OverallBytes < last {
				t.Errorf("the whole install's bytes went back: %d then %d", last, s.OverallBytes)
			}
			if last < 0 && s.OverallBytes < had {
				t.Errorf("the resumed install starts from %d bytes; it had %d", s.OverallBytes, had)
			}
			last = s.OverallBytes
		}
		return s.State != install.StateRunning
	})
	if st.State != install.StateDone || st.OverallBytes != st.OverallTotal || st.OverallTotal == 0 || st.Files != st.FilesTotal {
		t.Fatalf("done: %+v", st)
	}
}
