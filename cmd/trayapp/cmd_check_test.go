package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const trees = "../../npu/check/testdata/trees"

func runCheckCmd(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	env := &Env{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb, Getenv: func(string) string { return "" }}
	code := run(context.Background(), env, append([]string{"check"}, args...))
	return code, out.String(), errb.String()
}

// jsonReport is the JSON contract of `npuchat check --json`.
type jsonReport struct {
	Ready   bool   `json:"ready"`
	OS      string `json:"os"`
	Summary string `json:"summary"`
	Checks  []struct {
		ID, Title, Group, Status, Found, Need, Fix string
	} `json:"checks"`
}

func TestCheckCommand(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		code     int
		contains string
	}{
		{"ready tree", []string{"--sysroot", filepath.Join(trees, "strix-halo-ready")}, 0, "Ready: the Strix / Strix Halo NPU"},
		{"permission tree", []string{"--sysroot", filepath.Join(trees, "permission-denied")}, 1, "sudo usermod -aG render $USER"},
		{"phoenix tree", []string{"--sysroot", filepath.Join(trees, "phoenix-xdna1")}, 1, "XDNA 1 is not supported by FastFlowLM"},
		{"windows tree", []string{"--sysroot", filepath.Join(trees, "windows-old-driver")}, 1, "older than 32.0.203.304"},
		{"bad flag", []string{"--frobnicate"}, 2, ""},
		{"extra argument", []string{"now"}, 2, ""},
		{"not a tree", []string{"--sysroot", t.TempDir()}, 2, ""},
		{"both roots", []string{"--sysroot", "x", "--record", "y"}, 2, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut := runCheckCmd(t, tt.args...)
			if code != tt.code {
				t.Errorf("exit %d, want %d\nstdout: %s\nstderr: %s", code, tt.code, out, errOut)
			}
			if !strings.Contains(out, tt.contains) {
				t.Errorf("output lacks %q:\n%s", tt.contains, out)
			}
			if tt.code == 2 && errOut == "" {
				t.Error("an error without a message on stderr")
			}
		})
	}
}

// TestCheckThisMachine runs the live checks. The workplace has no NPU, so
// this is exit 1 and "No usable NPU" here; on a machine with one, the exit
// code must still agree with the verdict.
func TestCheckThisMachine(t *testing.T) {
	code, out, errOut := runCheckCmd(t, "--no-xrt")
	switch {
	case code == 0 && strings.Contains(out, "\nReady: "):
	case code == 1 && (strings.Contains(out, "\nNo usable NPU") || strings.Contains(out, "\nNot ready")):
	default:
		t.Errorf("exit %d does not match the report:\n%s\n%s", code, out, errOut)
	}
	if _, err := os.Stat("/sys/bus/pci/devices"); err == nil && !strings.Contains(out, "L1") {
		t.Errorf("no L1 line:\n%s", out)
	}
}

func TestCheckJSON(t *testing.T) {
	code, out, _ := runCheckCmd(t, "--json", "--sysroot", filepath.Join(trees, "memlock-low"))
	if code != 1 {
		t.Fatalf("exit %d, want 1", code)
	}
	var r jsonReport
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	found := false
	for _, c := range r.Checks {
		if c.ID == "L13" {
			found = c.Status == "fail" && strings.Contains(c.Fix, "memlock unlimited")
		}
	}
	if r.Ready || r.OS != "linux" || !found {
		t.Errorf("report: %+v", r)
	}
}

func TestCheckRecord(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "rec")
	code, out, errOut := runCheckCmd(t, "--no-xrt", "--record", dir)
	if code != 1 || !strings.Contains(errOut, "tar czf") {
		t.Fatalf("record: exit %d\n%s\n%s", code, out, errOut)
	}
	code2, out2, _ := runCheckCmd(t, "--sysroot", dir)
	if code2 != code || out2 != out {
		t.Errorf("replay differs: exit %d vs %d\n%s\n---\n%s", code2, code, out2, out)
	}
}

// TestCheckXRTChild runs the XRT probe child in process.
func TestCheckXRTChild(t *testing.T) {
	code, out, _ := runCheckCmd(t, xrtProbeChild, "/nonexistent/libxrt_coreutil.so.2")
	if code != 0 || !strings.Contains(out, `"loaded":false`) {
		t.Errorf("child: exit %d, %s", code, out)
	}
}

// wineTools finds wine and the MinGW compiler, which scripts/setup
// installs (scripts/setup.d/npu.apt). Missing tools fail the test.
func wineTools(t *testing.T) (wine, mingw string) {
	t.Helper()
	for _, c := range []string{"wine64", "wine", "/usr/lib/wine/wine64"} {
		if p, err := exec.LookPath(c); err == nil {
			wine = p
			break
		}
	}
	mingw, _ = exec.LookPath("x86_64-w64-mingw32-gcc")
	if wine == "" || mingw == "" {
		t.Fatalf("wine64 and gcc-mingw-w64-x86-64-win32 are needed: run scripts/setup (found wine %q, mingw %q)", wine, mingw)
	}
	return wine, mingw
}

// wine is a Wine prefix ready to run Go programs: Wine 8 lacks
// bcryptprimitives.dll, which Go 1.22+ needs at start-up (ProcessPrng),
// so a small one is built with MinGW that forwards to bcrypt's
// BCryptGenRandom.
type wine struct {
	t     *testing.T
	exe   string
	mingw string
	env   []string
}

func newWine(t *testing.T) *wine {
	t.Helper()
	exe, mingw := wineTools(t)
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = t.TempDir()
	}
	prefix := filepath.Join(cache, "npuchat-test-wine")
	w := &wine{t: t, exe: exe, mingw: mingw,
		env: append(os.Environ(), "WINEPREFIX="+prefix, "WINEDEBUG=-all", "WINEDLLOVERRIDES=mscoree,mshtml=")}
	sys32 := filepath.Join(prefix, "drive_c", "windows", "system32")
	if _, err := os.Stat(sys32); err != nil {
		w.run(5*time.Minute, "wineboot", "--init")
	}
	w.compile(filepath.Join(sys32, "bcryptprimitives.dll"), "testdata/bcryptprimitives.c", "-lbcrypt")
	return w
}

// run runs a program under Wine and returns its exit code and output.
func (w *wine) run(timeout time.Duration, args ...string) (int, string, string) {
	t := w.t
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, w.exe, args...)
	cmd.Env = w.env
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("wine %v: timed out after %s\n%s", args, timeout, errb.String())
	}
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("wine %v: %v", args, err)
	}
	return code, out.String(), errb.String()
}

// compile builds a Windows DLL with MinGW.
func (w *wine) compile(out string, args ...string) {
	w.t.Helper()
	cmd := exec.Command(w.mingw, append([]string{"-shared", "-O2", "-o", out}, args...)...)
	if b, err := cmd.CombinedOutput(); err != nil {
		w.t.Fatalf("mingw %v: %v\n%s", args, err, b)
	}
}

// TestWindowsPartsUnderWine runs the Windows code of the single-instance
// lock (LockFileEx, the loopback channel, across processes), of launch
// at login (the real HKCU Run value), of the free-memory check and of
// the install's file-in-use hint under Wine: their own tests, built with
// GOOS=windows.
func TestWindowsPartsUnderWine(t *testing.T) {
	w := newWine(t)
	for pkg, run := range map[string]string{
		"instance":  ".",                              // all of it
		"autostart": "Registry|RealRunKey|CommandExe", // the XDG file is Linux's
		"models":    "FileInUse",                      // the update's "stop serving" hint
		"app":       "WindowsMemAvailable",            // GlobalMemoryStatusEx
	} {
		exe := filepath.Join(t.TempDir(), pkg+".test.exe")
		build := exec.Command("go", "test", "-c", "-o", exe, "../../"+pkg)
		build.Env = append(os.Environ(), "GOOS=windows", "GOARCH=amd64", "CGO_ENABLED=0")
		if b, err := build.CombinedOutput(); err != nil {
			t.Fatalf("GOOS=windows go test -c ./%s: %v\n%s", pkg, err, b)
		}
		code, out, errOut := w.run(2*time.Minute, exe, "-test.v", "-test.run", run)
		if code != 0 || !strings.Contains(out, "--- PASS") || strings.Contains(out, "--- FAIL") || strings.Contains(out, "--- SKIP") {
			t.Errorf("%s's tests under Wine: exit %d\n%s\n%s", pkg, code, out, errOut)
		}
	}
}

// TestCheckUnderWine builds npuchat.exe and runs `npuchat check --json`
// under Wine: with no NPU it must report one cleanly (exit 1), and its
// XRT probe child must load a fake xrt_coreutil.dll through the real
// Windows code path.
func TestCheckUnderWine(t *testing.T) {
	w := newWine(t)
	tmp := t.TempDir()
	exe := filepath.Join(tmp, "npuchat.exe")
	build := exec.Command("go", "build", "-o", exe, ".")
	build.Env = append(os.Environ(), "GOOS=windows", "GOARCH=amd64", "CGO_ENABLED=0")
	if b, err := build.CombinedOutput(); err != nil {
		t.Fatalf("GOOS=windows go build: %v\n%s", err, b)
	}
	runWine, compile := w.run, w.compile
	code, out, errOut := runWine(2*time.Minute, exe, "check", "--json")
	if code != 1 {
		t.Fatalf("npuchat.exe check --json: exit %d, want 1\n%s\n%s", code, out, errOut)
	}
	var r jsonReport
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	if r.Ready || r.OS != "windows" || len(r.Checks) != 5 || r.Checks[0].ID != "W1" || r.Checks[0].Status != "fail" {
		t.Errorf("report under wine: %+v", r)
	}

	// A Windows recording replays on Linux with the same report.
	rec := filepath.Join(tmp, "winrec")
	code, out, errOut = runWine(2*time.Minute, exe, "check", "--no-xrt", "--record", `Z:`+strings.ReplaceAll(rec, "/", `\`))
	if code != 1 {
		t.Fatalf("npuchat.exe check --record: exit %d\n%s\n%s", code, out, errOut)
	}
	code2, out2, _ := runCheckCmd(t, "--sysroot", rec)
	if code2 != 1 || strings.ReplaceAll(out, "\r\n", "\n") != out2 {
		t.Errorf("replaying the Windows recording on Linux: exit %d\n%s\n--- recorded under wine:\n%s", code2, out2, out)
	}

	fake := filepath.Join(tmp, "fake_xrt.dll")
	compile(fake, "-DFAKE_MODE=0", "../../npu/xrt/testdata/fakexrt.c")
	code, out, errOut = runWine(time.Minute, exe, "check", xrtProbeChild, `Z:`+strings.ReplaceAll(fake, "/", `\`), "--open")
	if code != 0 || !strings.Contains(out, `"loaded":true`) || !strings.Contains(out, `"version":"2.19.7"`) || !strings.Contains(out, `"device_opened":true`) {
		t.Errorf("probe of fake xrt_coreutil.dll: exit %d\n%s\n%s", code, out, errOut)
	}
	code, out, _ = runWine(time.Minute, exe, "check", xrtProbeChild, "xrt_coreutil.dll")
	if code != 0 || !strings.Contains(out, `"loaded":false`) {
		t.Errorf("probe of the missing xrt_coreutil.dll: exit %d\n%s", code, out)
	}
}
