package check

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// copyTree copies a directory tree, symlinks included.
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.Walk(src, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		out := filepath.Join(dst, rel)
		switch {
		case info.Mode()&os.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(target, out)
		case info.IsDir():
			return os.MkdirAll(out, 0o755)
		default:
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			return os.WriteFile(out, b, 0o644)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
}

func reportJSON(t *testing.T, r *Report) string {
	t.Helper()
	var b bytes.Buffer
	if err := WriteJSON(&b, r); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestRecordRoundTrip records a replayed tree (files through DirFS, system
// calls and XRT from its npucheck.json) and checks that the new tree gives
// the same report, and that it holds only what the checks read.
func TestRecordRoundTrip(t *testing.T) {
	for _, name := range []string{"strix-halo-ready", "permission-denied", "xrt-plugin-missing", "windows-old-driver"} {
		t.Run(name, func(t *testing.T) {
			src := filepath.Join(t.TempDir(), "src")
			copyTree(t, filepath.Join(treesDir, name), src)
			// Files the checks never read must not be copied.
			secret := filepath.Join(src, "etc", "shadow")
			if err := os.MkdirAll(filepath.Dir(secret), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(secret, []byte("root:secret"), 0o600); err != nil {
				t.Fatal(err)
			}
			want, err := Run(context.Background(), Options{Root: src})
			if err != nil {
				t.Fatal(err)
			}
			rec, err := readRecording(DirFS(src))
			if err != nil {
				t.Fatal(err)
			}
			opts := Options{GOOS: rec.GOOS, FS: DirFS(src), XRT: replayXRT(rec.XRT),
				Getenv: func(k string) string { return rec.Env[k] }}
			if rec.GOOS == "linux" {
				opts.Linux = replayLinux{rec.Linux}
			} else {
				opts.Windows = replayWindows{rec.Windows}
			}
			dst := filepath.Join(t.TempDir(), "nested", "recorded")
			got, err := Record(context.Background(), dst, opts)
			if err != nil {
				t.Fatal(err)
			}
			if a, b := reportJSON(t, want), reportJSON(t, got); a != b {
				t.Fatalf("Record's own report differs:\n%s\n%s", a, b)
			}
			replayed, err := Run(context.Background(), Options{Root: dst})
			if err != nil {
				t.Fatal(err)
			}
			if a, b := reportJSON(t, want), reportJSON(t, replayed); a != b {
				t.Fatalf("replaying the recorded tree differs:\n%s\n%s", a, b)
			}
			if _, err := os.Stat(filepath.Join(dst, "etc", "shadow")); err == nil {
				t.Error("Record copied /etc/shadow, which no check reads")
			}
			if _, err := Record(context.Background(), dst, opts); err == nil || !strings.Contains(err.Error(), "already exists") {
				t.Errorf("Record over an existing folder: %v", err)
			}
		})
	}
}

func TestRunRejectsBadTrees(t *testing.T) {
	dir := t.TempDir()
	if _, err := Run(context.Background(), Options{Root: dir}); err == nil || !strings.Contains(err.Error(), "npucheck.json missing") {
		t.Errorf("empty folder: %v", err)
	}
	for content, want := range map[string]string{
		`{"format": 2, "goos": "linux"}`: "format 2",
		`{"format": 1, "goos": "plan9"}`: "goos",
		`{"format": 1,`:                  "read npucheck.json",
	} {
		if err := os.WriteFile(filepath.Join(dir, RecordingFile), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := Run(context.Background(), Options{Root: dir}); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want it to mention %q", content, err, want)
		}
	}
}

// TestLiveMachine runs the checks on this machine, which has no NPU: the
// report must say so, never panic, and record and replay identically.
func TestLiveMachine(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Fatalf("this test runs the live Linux checks; run it on Linux")
	}
	r, err := Run(context.Background(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range r.Checks {
		if c.ID == "" || c.Title == "" || c.Status == "" || c.Found == "" || c.Need == "" {
			t.Errorf("incomplete check %+v", c)
		}
	}
	if r.NPU == nil {
		if c := r.Check("L1"); c == nil || c.Status != Fail || r.Ready || !strings.HasPrefix(r.Summary, "No usable NPU") {
			t.Errorf("no NPU here, but: %s; L1 %+v", r.Summary, c)
		}
	}
	dst := filepath.Join(t.TempDir(), "live")
	recorded, err := Record(context.Background(), dst, Options{})
	if err != nil {
		t.Fatal(err)
	}
	replayed, err := Run(context.Background(), Options{Root: dst})
	if err != nil {
		t.Fatal(err)
	}
	if a, b := reportJSON(t, recorded), reportJSON(t, replayed); a != b {
		t.Errorf("live record and replay differ:\n%s\n%s", a, b)
	}
	b, err := os.ReadFile(filepath.Join(dst, RecordingFile))
	if err != nil {
		t.Fatal(err)
	}
	var rec Recording
	if err := json.Unmarshal(b, &rec); err != nil || rec.GOOS != "linux" {
		t.Errorf("recording: %v, goos %q", err, rec.GOOS)
	}
}
