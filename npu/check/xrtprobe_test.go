package check

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/npuchat/npuchat/npu/xrt"
)

// The test binary doubles as the XRT probe child, as npuchat does.
func TestMain(m *testing.M) {
	if os.Getenv("CHECK_TEST_XRT_CHILD") == "1" {
		os.Exit(xrt.RunChild(context.Background(), os.Args[1:], os.Stdout))
	}
	os.Exit(m.Run())
}

// TestXRTProbeEndToEnd runs L14–L16 with a real child process loading a
// fake libxrt_coreutil.so.2 (npu/xrt/testdata/fakexrt.c, built with cc):
// an XRT that opens device 0, one that finds no device, and one that
// crashes inside xrtDeviceOpen.
func TestXRTProbeEndToEnd(t *testing.T) {
	cc, err := exec.LookPath("cc")
	if err != nil {
		t.Fatal("cc not found: run scripts/setup (build-essential)")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("CHECK_TEST_XRT_CHILD", "1")
	prober := xrt.ChildProber{Command: []string{exe}, Timeout: 10 * time.Second}
	tests := []struct {
		mode   string
		status Status
		found  string
	}{
		{"0", Pass, "XRT opened and closed device 0"},
		{"1", Fail, "No such device with index '0'"},
		{"2", Fail, "crashed or hung"},
	}
	for _, tt := range tests {
		t.Run("mode "+tt.mode, func(t *testing.T) {
			root := t.TempDir()
			lib := filepath.Join(root, "lib")
			if err := os.MkdirAll(lib, 0o755); err != nil {
				t.Fatal(err)
			}
			so := filepath.Join(lib, xrt.LinuxLibrary)
			if b, err := exec.Command(cc, "-shared", "-fPIC", "-DFAKE_MODE="+tt.mode, "-o", so, "../xrt/testdata/fakexrt.c").CombinedOutput(); err != nil {
				t.Fatalf("cc: %v\n%s", err, b)
			}
			s := strixHalo()
			s.fs.removeAll("/opt/xilinx")
			for _, f := range []string{xrt.LinuxLibrary, "libxrt_core.so.2", "libxrt_driver_xdna.so.2"} {
				s.fs.files[filepath.ToSlash(filepath.Join(lib, f))] = ""
			}
			r, err := Run(context.Background(), Options{GOOS: "linux", FS: s.fs, Linux: s.linux, XRT: prober,
				Getenv: func(k string) string { return map[string]string{"XILINX_XRT": root}[k] }})
			if err != nil {
				t.Fatal(err)
			}
			if c := r.Check("L14"); c.Status != Pass || !strings.Contains(c.Found, "XRT 2.19.7") {
				t.Errorf("L14 = %s %q", c.Status, c.Found)
			}
			if c := r.Check("L16"); c.Status != tt.status || !strings.Contains(c.Found, tt.found) {
				t.Errorf("L16 = %s %q, want %s containing %q", c.Status, c.Found, tt.status, tt.found)
			}
		})
	}
}
