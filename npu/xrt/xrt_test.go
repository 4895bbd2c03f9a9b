package xrt

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The child side of ChildProber in tests: the test binary re-executes
// itself with XRT_TEST_CHILD=1 and runs RunChild on its arguments.
func TestMain(m *testing.M) {
	if os.Getenv("XRT_TEST_CHILD") == "1" {
		os.Exit(RunChild(context.Background(), os.Args[1:], os.Stdout))
	}
	os.Exit(m.Run())
}

// buildFake compiles testdata/fakexrt.c into a shared library with the
// given -D flags. cc comes from build-essential, which scripts/setup
// installs; without it the test fails rather than skips.
func buildFake(t *testing.T, name string, defs ...string) string {
	t.Helper()
	cc, err := exec.LookPath("cc")
	if err != nil {
		t.Fatalf("cc not found: run scripts/setup (build-essential) to build the fake XRT library")
	}
	out := filepath.Join(t.TempDir(), name)
	args := append([]string{"-shared", "-fPIC", "-o", out, "testdata/fakexrt.c"}, defs...)
	if b, err := exec.Command(cc, args...).CombinedOutput(); err != nil {
		t.Fatalf("cc %v: %v\n%s", args, err, b)
	}
	return out
}

func TestProbeInProcess(t *testing.T) {
	ok := buildFake(t, "libxrt_coreutil.so.2", "-DFAKE_MODE=0")
	null := buildFake(t, "libnull.so", "-DFAKE_MODE=1")
	old := buildFake(t, "libold.so", "-DFAKE_MODE=0", "-DNO_VERSION")
	tests := []struct {
		name    string
		path    string
		open    bool
		want    Result
		errPart string
	}{
		{"loads and opens", ok, true, Result{Library: ok, Loaded: true, Version: "2.19.7", DeviceTried: true, DeviceOpened: true}, ""},
		{"loads without open", ok, false, Result{Library: ok, Loaded: true, Version: "2.19.7"}, ""},
		{"no device", null, true, Result{Library: null, Loaded: true, Version: "2.19.7", DeviceTried: true,
			DeviceError: "xrtDeviceOpen(0) returned NULL: XRT found no device with index 0"}, ""},
		{"missing library", "/nonexistent/libxrt_coreutil.so.2", true, Result{Library: "/nonexistent/libxrt_coreutil.so.2"}, "No such file"},
		{"no version API", old, true, Result{Library: old}, "xrtVersionMajor is missing"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := InProcess{}.Probe(context.Background(), tt.path, tt.open)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(got.LoadError, tt.errPart) {
				t.Errorf("LoadError %q does not contain %q", got.LoadError, tt.errPart)
			}
			got.LoadError = ""
			if got != tt.want {
				t.Errorf("got %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestChildProber(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("XRT_TEST_CHILD", "1")
	p := ChildProber{Command: []string{exe}, Timeout: 5 * time.Second}

	ok := buildFake(t, "libok.so", "-DFAKE_MODE=0")
	r, err := p.Probe(context.Background(), ok, true)
	if err != nil || !r.DeviceOpened || r.Version != "2.19.7" {
		t.Errorf("healthy library: %+v, %v", r, err)
	}

	crash := buildFake(t, "libcrash.so", "-DFAKE_MODE=2")
	r, err = p.Probe(context.Background(), crash, true)
	if err == nil || !strings.Contains(err.Error(), "child failed") {
		t.Errorf("crashing library: want a child failure, got %+v, %v", r, err)
	}

	hang := buildFake(t, "libhang.so", "-DFAKE_MODE=3")
	p.Timeout = 1 * time.Second
	// The library never returns: only the probe's timeout ends the
	// child, and the error says so (nothing is timed here).
	r, err = p.Probe(context.Background(), hang, true)
	if err == nil || !strings.Contains(err.Error(), "hung") {
		t.Errorf("hanging library: want a timeout, got %+v, %v", r, err)
	}
}

func TestRunChildBadArguments(t *testing.T) {
	var sb strings.Builder
	if code := RunChild(context.Background(), nil, &sb); code != 2 || !strings.Contains(sb.String(), "no library") {
		t.Errorf("no args: code %d, out %q", code, sb.String())
	}
}
