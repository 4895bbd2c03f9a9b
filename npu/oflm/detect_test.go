package oflm

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/npuchat/npuchat/npu/check"
)

// fileInfo is a regular file for Locator.Stat.
type fileInfo struct{ name string }

func (f fileInfo) Name() string       { return f.name }
func (f fileInfo) Size() int64        { return 1 }
func (f fileInfo) Mode() fs.FileMode  { return 0o755 }
func (f fileInfo) ModTime() time.Time { return time.Time{} }
func (f fileInfo) IsDir() bool        { return false }
func (f fileInfo) Sys() any           { return nil }

func TestFind(t *testing.T) {
	tests := []struct {
		name       string
		goos       string
		configured string
		files      []string
		onPath     string
		registry   string
		want       Found
		wantErr    string
	}{
		{name: "configured", goos: "linux", configured: "/src/oflm/build/src/oflm", files: []string{"/src/oflm/build/src/oflm", "/usr/bin/oflm"},
			want: Found{Path: "/src/oflm/build/src/oflm", How: "configured"}},
		{name: "configured but missing", goos: "linux", configured: "/nowhere/oflm", files: []string{"/usr/bin/oflm"},
			wantErr: "the configured oflm /nowhere/oflm does not exist"},
		{name: "PATH first", goos: "linux", onPath: "/home/u/bin/oflm", files: []string{"/opt/openflowlm/bin/oflm"},
			want: Found{Path: "/home/u/bin/oflm", How: "PATH"}},
		{name: "Linux package prefix", goos: "linux", files: []string{"/opt/openflowlm/bin/oflm", "/usr/bin/oflm"},
			want: Found{Path: "/opt/openflowlm/bin/oflm", How: "packaged"}},
		{name: "Linux /usr/bin", goos: "linux", files: []string{"/usr/bin/oflm"},
			want: Found{Path: "/usr/bin/oflm", How: "packaged"}},
		{name: "Windows Program Files", goos: "windows", files: []string{`C:\Program Files\oflm\oflm.exe`},
			want: Found{Path: `C:\Program Files\oflm\oflm.exe`, How: "packaged"}},
		{name: "Windows registry", goos: "windows", registry: `D:\Tools\oflm\`, files: []string{`D:\Tools\oflm\oflm.exe`},
			want: Found{Path: `D:\Tools\oflm\oflm.exe`, How: "registry"}},
		{name: "none on Linux", goos: "linux",
			wantErr: "looked in PATH, /opt/openflowlm/bin/oflm, /usr/bin/oflm; install it as " + InstallLink},
		{name: "none on Windows", goos: "windows",
			wantErr: `looked in PATH, C:\Program Files\oflm\oflm.exe, HKLM\Software\OpenFlowLM\oflm\InstallFolder`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := Locator{
				GOOS: tt.goos,
				LookPath: func(file string) (string, error) {
					if tt.onPath != "" && filepath.Base(tt.onPath) == file {
						return tt.onPath, nil
					}
					return "", errors.New("not on PATH")
				},
				Stat: func(name string) (os.FileInfo, error) {
					for _, f := range tt.files {
						if f == name {
							return fileInfo{name}, nil
						}
					}
					return nil, os.ErrNotExist
				},
				InstallFolder: func() (string, error) {
					if tt.registry == "" {
						return "", errors.New("no such key")
					}
					return tt.registry, nil
				},
			}
			got, err := l.Find(tt.configured)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Find = %+v, %v; want an error with %q", got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("Find = %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
}

func TestVersion(t *testing.T) {
	v, err := Version(context.Background(), fakeExe)
	if err != nil || v != "0.1.0" {
		t.Fatalf("Version = %q, %v", v, err)
	}
	if _, err := Version(context.Background(), filepath.Join(t.TempDir(), "oflm")); err == nil {
		t.Error("Version of a missing oflm succeeded")
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name, mode, platform string
		ready, windows       bool
		problems             []string
	}{
		{name: "Linux ready", ready: true},
		{name: "Linux not ready", mode: "notready",
			problems: []string{"no AMD NPU found", "memlock limit 8 MB is too low", "libxrt_driver_xdna.so.2"}},
		{name: "Windows ready", platform: "windows", ready: true, windows: true},
		{name: "Windows not ready", mode: "notready", platform: "windows", windows: true,
			problems: []string{"no AMD NPU found", "NPU driver is missing"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("FAKEOFLM_MODE", tt.mode)
			t.Setenv("FAKEOFLM_PLATFORM", tt.platform)
			v, err := Validate(context.Background(), fakeExe)
			if err != nil {
				t.Fatalf("Validate: %v", err)
			}
			if v.Ready != tt.ready || v.Windows() != tt.windows {
				t.Errorf("ready %v windows %v, want %v %v", v.Ready, v.Windows(), tt.ready, tt.windows)
			}
			got := strings.Join(v.Problems(), "; ")
			for _, p := range tt.problems {
				if !strings.Contains(got, p) {
					t.Errorf("problems %q lack %q", got, p)
				}
			}
			if tt.ready && got != "" {
				t.Errorf("problems of a ready machine: %q", got)
			}
		})
	}
}

func TestAssess(t *testing.T) {
	ready := &Validation{Platform: "linux", AMDDeviceFound: true, KernelOK: true, AllFWOK: true, EnoughCols: true,
		MemlockOK: true, RuntimeOK: true, Ready: true}
	runtimeBroken := *ready
	runtimeBroken.RuntimeOK, runtimeBroken.RuntimeError = false, "libxrt_driver_xdna.so.2 missing"
	pass := func(ids ...string) *check.Report {
		r := &check.Report{}
		for _, id := range ids {
			r.Checks = append(r.Checks, check.Check{ID: id, Title: "check " + id, Status: check.Pass})
		}
		return r
	}
	renderDenied := pass("L1", "L4", "L13")
	renderDenied.Checks = append(renderDenied.Checks, check.Check{ID: "L5", Title: "Permission on the device node",
		Status: check.Fail, Found: "permission denied on /dev/accel/accel0", Fix: "add yourself to the render group"})
	tests := []struct {
		name     string
		v        *Validation
		rep      *check.Report
		ready    bool
		problems []string
	}{
		{name: "ready", v: ready, rep: pass("L1", "L4", "L5", "L13"), ready: true},
		{name: "validate did not run", rep: pass("L1"), problems: []string{"oflm validate did not run"}},
		{name: "ready but no runtime", v: &runtimeBroken, rep: pass("L1"), problems: []string{"libxrt_driver_xdna.so.2 missing"}},
		{name: "render group", v: ready, rep: renderDenied,
			problems: []string{"[L5] Permission on the device node: permission denied", "Fix: add yourself to the render group"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := Assess(tt.v, tt.rep)
			if r.Ready != tt.ready {
				t.Errorf("ready %v, want %v (%s)", r.Ready, tt.ready, r.Summary())
			}
			for _, p := range tt.problems {
				if !strings.Contains(r.Summary(), p) {
					t.Errorf("summary %q lacks %q", r.Summary(), p)
				}
			}
		})
	}
}

// TestCheckRecordedMachine runs the whole readiness check: the fake's
// validate and NPU Chat's probes of a recorded machine whose memlock limit
// is too low for the model.
func TestCheckRecordedMachine(t *testing.T) {
	t.Setenv("FAKEOFLM_MODE", "")
	t.Setenv("FAKEOFLM_PLATFORM", "")
	r := Check(context.Background(), fakeExe, check.Options{Root: filepath.Join("..", "check", "testdata", "trees", "memlock-low"), ModelBytes: 2e9})
	if r.Ready || r.Version != "0.1.0" {
		t.Fatalf("Check = %+v", r)
	}
	if !strings.Contains(r.Summary(), "[L13] Locked-memory limit (memlock)") {
		t.Errorf("summary %q does not name the memlock check", r.Summary())
	}
	if strings.Contains(r.Summary(), "oflm validate") {
		t.Errorf("summary %q blames validate, which passed", r.Summary())
	}
}

func TestRoute(t *testing.T) {
	tests := []struct {
		name    string
		findErr error
		r       Readiness
		line    string
		fix     string
	}{
		{name: "ready", r: Readiness{Ready: true, Version: "0.1.0"}, line: "MiniCPM5-2B: NPU via oflm (ready)"},
		{name: "not ready", r: Readiness{Problems: []string{"oflm validate: memlock limit 8 MB is too low (set it to unlimited)"}},
			line: "MiniCPM5-2B: NPU via oflm, not ready: oflm validate: memlock limit 8 MB is too low (set it to unlimited)",
			fix:  "Fix what is listed"},
		{name: "configured oflm gone", findErr: errors.New("the configured oflm /x/oflm does not exist or is not a file"),
			line: "MiniCPM5-2B: no NPU route: the configured oflm /x/oflm does not exist", fix: "Set the path of oflm again"},
		{name: "no oflm", findErr: &NotFoundError{Tried: []string{"PATH"}},
			line: "MiniCPM5-2B: no NPU route: oflm (OpenFlowLM-Next), the one route that decodes it on the NPU, is not installed",
			fix:  "Install oflm as " + InstallLink},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rt := Route(tt.findErr, tt.r)
			if !strings.HasPrefix(rt.Line(), tt.line) || rt.Ready != tt.r.Ready {
				t.Errorf("Line = %q (ready %v), want %q", rt.Line(), rt.Ready, tt.line)
			}
			if !strings.Contains(rt.Fix, tt.fix) {
				t.Errorf("Fix = %q, want %q", rt.Fix, tt.fix)
			}
		})
	}
}

// TestProbe: the oflm line of the NPU check, from the executable found to
// the route, on a recorded machine.
func TestProbe(t *testing.T) {
	t.Setenv("FAKEOFLM_MODE", "")
	t.Setenv("FAKEOFLM_PLATFORM", "")
	tree := filepath.Join("..", "check", "testdata", "trees", "memlock-low")
	noPath := Locator{LookPath: func(string) (string, error) { return "", errors.New("not on PATH") },
		Stat: func(name string) (os.FileInfo, error) {
			if name == fakeExe {
				return os.Stat(name)
			}
			return nil, os.ErrNotExist
		}}
	found, r, rt := Probe(context.Background(), noPath, fakeExe, check.Options{Root: tree, ModelBytes: 2e9})
	if found.Path != fakeExe || r.Ready || rt.Via != "oflm" || rt.Ready || !strings.Contains(rt.Status, "[L13]") {
		t.Errorf("Probe with oflm on a machine with low memlock = %+v, %+v, %q", found, r, rt.Line())
	}
	_, r, rt = Probe(context.Background(), noPath, "", check.Options{Root: tree})
	if r.Ready || rt.Via != "" || !strings.Contains(rt.Fix, InstallLink) {
		t.Errorf("Probe without oflm = %+v, %q %q", r, rt.Line(), rt.Fix)
	}
}

// TestLookPathIn: the PATH given is searched in order for an executable
// file; a folder or a file without the executable bit is skipped.
func TestLookPathIn(t *testing.T) {
	a, b, c := t.TempDir(), t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(a, "oflm"), []byte("x"), 0o644) // not executable
	os.Mkdir(filepath.Join(b, "oflm"), 0o755)                  // a folder
	os.WriteFile(filepath.Join(c, "oflm"), []byte("x"), 0o755)
	path := strings.Join([]string{"", a, b, c}, string(os.PathListSeparator))
	if runtime.GOOS == "windows" {
		// No executable bits to read: the first file is taken.
		if got, err := LookPathIn(path, "windows")("oflm"); err != nil || got != filepath.Join(a, "oflm") {
			t.Errorf("windows: %q, %v", got, err)
		}
		return
	}
	if got, err := LookPathIn(path, "linux")("oflm"); err != nil || got != filepath.Join(c, "oflm") {
		t.Errorf("linux: %q, %v", got, err)
	}
	if got, err := LookPathIn(path, "windows")("oflm"); err != nil || got != filepath.Join(a, "oflm") {
		t.Errorf("windows (no executable bit): %q, %v", got, err)
	}
	if _, err := LookPathIn(strings.Join([]string{a, b}, string(os.PathListSeparator)), "linux")("oflm"); err == nil {
		t.Error("found an oflm that is not executable")
	}
}
