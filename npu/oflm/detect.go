package oflm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
)

// InstallLink is where a person learns how to install oflm. NPU Chat
// never downloads or bundles it (its license and packaging are its own).
const InstallLink = "https://github.com/Atomic-Germ/OpenFlowLM-Next#readme"

// Locator finds the oflm executable. The zero value looks at this
// machine; tests replace the seams.
type Locator struct {
	// GOOS picks the packaged locations ("linux" or "windows"); "" is
	// runtime.GOOS.
	GOOS string
	// LookPath searches PATH; nil is exec.LookPath.
	LookPath func(file string) (string, error)
	// Stat reads a file's metadata; nil is os.Stat.
	Stat func(name string) (os.FileInfo, error)
	// InstallFolder reads the MSI's registry value
	// HKLM\Software\OpenFlowLM\oflm\InstallFolder; nil is the live
	// registry on Windows and nothing elsewhere.
	InstallFolder func() (string, error)
}

// Found is an oflm executable and how it was found.
type Found struct {
	Path string
	// How is "configured", "PATH", "packaged" or "registry".
	How string
}

// NotFoundError lists where oflm was looked for.
type NotFoundError struct {
	Tried []string
}

// Error says where oflm was looked for.
func (e *NotFoundError) Error() string {
	return fmt.Sprintf("oflm (OpenFlowLM-Next) is not installed: looked in %s; install it as %s says (NPU Chat does not download it)",
		strings.Join(e.Tried, ", "), InstallLink)
}

func (l Locator) goos() string {
	if l.GOOS != "" {
		return l.GOOS
	}
	return runtime.GOOS
}

// exeName is oflm's file name.
func exeName(goos string) string {
	if goos == "windows" {
		return "oflm.exe"
	}
	return "oflm"
}

// joinOS joins path elements with goos's separator (a Windows path is
// built the same on Linux, for tests).
func joinOS(goos string, elem ...string) string {
	if goos == "windows" {
		return strings.TrimRight(elem[0], `\/`) + `\` + strings.Join(elem[1:], `\`)
	}
	return filepath.Join(elem...)
}

// PackagedPaths are where oflm's packages install it: /opt/openflowlm/bin
// and /usr/bin on Linux (README @105d644), C:\Program Files\oflm on
// Windows (src/wix/oflm.wxs @89e2799).
func PackagedPaths(goos string) []string {
	if goos == "windows" {
		return []string{`C:\Program Files\oflm\oflm.exe`}
	}
	return []string{"/opt/openflowlm/bin/oflm", "/usr/bin/oflm"}
}

// Find returns the oflm to run: configured (a path a person set, e.g. a
// build tree's build/src/oflm) when given, else oflm on PATH, else the
// packaged locations, else (Windows) the folder the MSI recorded in the
// registry. A configured path that is not there is an error of its own:
// it is not silently replaced by another oflm.
func (l Locator) Find(configured string) (Found, error) {
	goos := l.goos()
	stat := l.Stat
	if stat == nil {
		stat = os.Stat
	}
	isFile := func(p string) bool {
		fi, err := stat(p)
		return err == nil && !fi.IsDir()
	}
	if configured != "" {
		if !isFile(configured) {
			return Found{}, fmt.Errorf("the configured oflm %s does not exist or is not a file", configured)
		}
		return Found{Path: configured, How: "configured"}, nil
	}
	var tried []string
	lookPath := l.LookPath
	if lookPath == nil {
		lookPath = exec.LookPath
	}
	if p, err := lookPath(exeName(goos)); err == nil {
		return Found{Path: p, How: "PATH"}, nil
	}
	tried = append(tried, "PATH")
	for _, p := range PackagedPaths(goos) {
		if isFile(p) {
			return Found{Path: p, How: "packaged"}, nil
		}
		tried = append(tried, p)
	}
	if goos == "windows" {
		read := l.InstallFolder
		if read == nil {
			read = liveInstallFolder
		}
		if dir, err := read(); err == nil && dir != "" {
			p := joinOS(goos, dir, exeName(goos))
			if isFile(p) {
				return Found{Path: p, How: "registry"}, nil
			}
			tried = append(tried, p+" (from the registry)")
		} else {
			tried = append(tried, `HKLM\Software\OpenFlowLM\oflm\InstallFolder`)
		}
	}
	return Found{}, &NotFoundError{Tried: tried}
}

// Version runs `oflm version --json` and returns its version
// ({ "version": "0.1.0" }).
func Version(ctx context.Context, exe string) (string, error) {
	out, err := runJSON(ctx, exe, nil, "version", "--json")
	if err != nil {
		return "", fmt.Errorf("oflm version: %w", err)
	}
	var v struct {
		Version string `json:"version"`
	}
	if err := json.Unmarshal(out, &v); err != nil || v.Version == "" {
		return "", fmt.Errorf("oflm version --json: unexpected output %q", snippet(out))
	}
	return v.Version, nil
}

// Validation is what `oflm validate --json` says. Linux and Windows
// report different keys (research/oflm.md §3); the ones a platform does
// not report are zero.
type Validation struct {
	// Linux keys.
	Platform       string          `json:"platform"`
	Kernel         string          `json:"kernel"`
	KernelOK       bool            `json:"kernel_ok"`
	AllFWOK        bool            `json:"all_fw_ok"`
	EnoughCols     bool            `json:"enough_cols"`
	MemlockOK      bool            `json:"memlock_ok"`
	MemlockLimit   json.RawMessage `json:"memlock_limit"`
	RuntimeError   string          `json:"runtime_error"`
	DRMVersion     string          `json:"drm_version"`
	Devices        []Device        `json:"devices"`
	AMDDeviceFound bool            `json:"amd_device_found"`
	RuntimeOK      bool            `json:"runtime_ok"`
	// Windows key.
	NPUDriverOK bool `json:"npu_driver_ok"`
	// Ready is oflm's verdict.
	Ready bool `json:"ready"`
}

// Device is one NPU validate looked at (Linux).
type Device struct {
	Device string `json:"device"`
	FWOK   bool   `json:"fw_ok"`
	Cols   int    `json:"cols"`
}

// Windows says whether the Windows key set was reported.
func (v *Validation) Windows() bool { return v.Platform == "" }

// Problems says, for a person, what validate found wrong (empty when it
// is ready).
func (v *Validation) Problems() []string {
	var p []string
	add := func(ok bool, what string) {
		if !ok {
			p = append(p, what)
		}
	}
	add(v.AMDDeviceFound, "no AMD NPU found")
	if v.Windows() {
		add(v.NPUDriverOK, "the NPU driver is missing or too old")
	} else {
		add(v.KernelOK, "kernel "+v.Kernel+" is older than 6.17")
		add(v.AllFWOK, "NPU firmware older than 1.1")
		add(v.EnoughCols, "fewer than 8 NPU columns")
		add(v.MemlockOK, "memlock limit "+strings.Trim(string(v.MemlockLimit), `"`)+" is too low (set it to unlimited)")
	}
	if !v.RuntimeOK {
		what := "the NPU runtime (XRT) cannot open the device"
		if v.RuntimeError != "" {
			what += ": " + v.RuntimeError
		}
		p = append(p, what)
	}
	if !v.Ready && len(p) == 0 {
		p = append(p, "oflm validate says not ready")
	}
	return p
}

// Validate runs `oflm validate --json`. It exits 1 when not ready; the
// report is read either way.
func Validate(ctx context.Context, exe string) (*Validation, error) {
	out, err := runJSON(ctx, exe, nil, "validate", "--json")
	var ee *exec.ExitError
	if err != nil && !(errors.As(err, &ee) && len(bytes.TrimSpace(out)) > 0) {
		return nil, fmt.Errorf("oflm validate: %w", err)
	}
	var v Validation
	if jerr := json.Unmarshal(out, &v); jerr != nil {
		return nil, fmt.Errorf("oflm validate --json: unexpected output %q: %w", snippet(out), jerr)
	}
	return &v, nil
}

// Listed is one model of `oflm list --json`.
type Listed struct {
	// Tag is the registry tag ("minicpm5:2b"; list reports it as name).
	Tag string `json:"name"`
	// Installed says whether oflm finds every file of the entry.
	Installed bool `json:"installed"`
}

// List runs `oflm list --json` with env added to this process's
// environment (Layout.ServeEnv, so that it reads NPU Chat's registry and
// folder): what oflm itself will serve.
func List(ctx context.Context, exe string, env []string) ([]Listed, error) {
	out, err := runJSON(ctx, exe, env, "list", "--json")
	if err != nil {
		return nil, fmt.Errorf("oflm list: %w", err)
	}
	var l struct {
		Models []Listed `json:"models"`
	}
	if err := json.Unmarshal(out, &l); err != nil {
		return nil, fmt.Errorf("oflm list --json: unexpected output %q: %w", snippet(out), err)
	}
	return l.Models, nil
}

// runJSON runs exe with args, and env added to this process's
// environment, and returns its standard output; the error carries its
// standard error.
func runJSON(ctx context.Context, exe string, env []string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, exe, args...)
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		if s := strings.TrimSpace(stderr.String()); s != "" {
			err = fmt.Errorf("%w: %s", err, snippet([]byte(s)))
		}
		return out, err
	}
	return out, nil
}

func snippet(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}
