// Package xrt probes the Xilinx/AMD runtime (XRT) that FastFlowLM uses to
// reach the NPU: it loads libxrt_coreutil.so.2 (xrt_coreutil.dll on
// Windows), reads the XRT version through the C API of xrt_version.h, and,
// when asked, opens and closes device 0 with xrtDeviceOpen/xrtDeviceClose
// from xrt_device.h. There is no C entry point for device information
// (xrt::device::get_info is C++ only), so opening device 0 is the deepest
// check the C API allows; it is the same call that fails with "No such
// device with index '0'" when the xdna plugin is missing.
//
// Loading a native library runs its constructors, and a broken XRT can
// crash or hang the process that loads it. So [ChildProber] runs [Probe]
// in a child process (npuchat itself, re-executed) under a timeout, and a
// crash or hang becomes a finding, not the end of the caller.
//
// Dependencies: github.com/ebitengine/purego v0.11.3 (Dlopen/Dlsym/SyscallN
// without cgo on Linux; the newest version go-partial.tsv lists as working
// here) and golang.org/x/sys v0.50.0 (LoadLibraryEx on Windows).
package xrt

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"time"
)

// Library file names of XRT's core utility library.
const (
	LinuxLibrary   = "libxrt_coreutil.so.2"
	WindowsLibrary = "xrt_coreutil.dll"
	// LinuxPluginPattern matches the xdna driver plugin that XRT loads from
	// the folder of libxrt_core.so.2; without it XRT sees no NPU.
	LinuxPluginPattern = "libxrt_driver_xdna.so*"
)

// Result is what one probe found. It is also the JSON a child probe prints.
type Result struct {
	// Library is the path or name that was loaded (or tried).
	Library string `json:"library"`
	// Loaded is true when the library loaded and its version was read.
	Loaded bool `json:"loaded"`
	// LoadError says why the library did not load.
	LoadError string `json:"load_error,omitempty"`
	// Version is "major.minor.patch" from xrtVersionMajor/Minor/Patch.
	Version string `json:"version,omitempty"`
	// DeviceTried is true when xrtDeviceOpen(0) was called.
	DeviceTried bool `json:"device_tried"`
	// DeviceOpened is true when xrtDeviceOpen(0) returned a handle.
	DeviceOpened bool `json:"device_opened"`
	// DeviceError says why device 0 did not open (or did not close).
	DeviceError string `json:"device_error,omitempty"`
}

// Prober runs an XRT probe of the library at path. A missing or broken
// library is reported in the Result; the error is for failures of the
// probe itself (for example a child that crashed or timed out).
type Prober interface {
	Probe(ctx context.Context, library string, openDevice bool) (Result, error)
}

// InProcess probes in the calling process. Use it only where a crash of
// the native library may take the process down (a child, or a test).
type InProcess struct{}

// Probe loads library in this process; see [Probe].
func (InProcess) Probe(ctx context.Context, library string, openDevice bool) (Result, error) {
	return Probe(ctx, library, openDevice), nil
}

// ChildProber runs the probe in a child process: Command plus the library
// path and, to open device 0, "--open". The child must run [RunChild] and
// print its JSON on stdout. npuchat's child is
// `npuchat check --xrt-probe-child LIBRARY [--open]`.
type ChildProber struct {
	Command []string
	// Timeout bounds the child; zero means 30 s. XRT enumerates devices
	// and loads plugins on open, which takes well under a second when
	// healthy.
	Timeout time.Duration
}

// Probe runs the child and decodes its result.
func (p ChildProber) Probe(ctx context.Context, library string, openDevice bool) (Result, error) {
	if len(p.Command) == 0 {
		return Result{}, errors.New("xrt probe: no child command")
	}
	timeout := p.Timeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	args := append(append([]string{}, p.Command[1:]...), library)
	if openDevice {
		args = append(args, "--open")
	}
	cmd := exec.CommandContext(ctx, p.Command[0], args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 2 * time.Second
	runErr := cmd.Run()
	if ctx.Err() == context.DeadlineExceeded {
		return Result{Library: library}, fmt.Errorf("xrt probe of %s: no answer within %s (XRT hung)", library, timeout)
	}
	var r Result
	if err := json.Unmarshal(bytes.TrimSpace(stdout.Bytes()), &r); err != nil {
		detail := strings.TrimSpace(stderr.String())
		if len(detail) > 300 {
			detail = detail[len(detail)-300:]
		}
		if runErr != nil {
			return Result{Library: library}, fmt.Errorf("xrt probe of %s: child failed (%v) %s", library, runErr, detail)
		}
		return Result{Library: library}, fmt.Errorf("xrt probe of %s: bad child output: %w", library, err)
	}
	return r, nil
}

// RunChild is the child side of [ChildProber]: args are LIBRARY and an
// optional "--open". It prints the Result as JSON on w and returns the
// exit code (0 when it could probe, 2 on bad arguments).
func RunChild(ctx context.Context, args []string, w io.Writer) int {
	var library string
	open := false
	for _, a := range args {
		switch {
		case a == "--open":
			open = true
		case library == "" && !strings.HasPrefix(a, "-"):
			library = a
		default:
			fmt.Fprintf(w, "{\"load_error\":%q}\n", "bad argument "+a)
			return 2
		}
	}
	if library == "" {
		fmt.Fprintf(w, "{\"load_error\":%q}\n", "no library given")
		return 2
	}
	b, _ := json.Marshal(Probe(ctx, library, open))
	fmt.Fprintf(w, "%s\n", b)
	return 0
}

// symbols is the C API the probe uses, all exported by xrt_coreutil.
var versionSymbols = []string{"xrtVersionMajor", "xrtVersionMinor", "xrtVersionPatch"}

const (
	symDeviceOpen  = "xrtDeviceOpen"
	symDeviceClose = "xrtDeviceClose"
)

// library is a loaded native library: look up a symbol, call it.
type library interface {
	sym(name string) (uintptr, error)
	call(fn uintptr, args ...uintptr) uintptr
}

// probeLoaded runs the probe steps on a loaded library.
func probeLoaded(ctx context.Context, lib library, r Result, openDevice bool) Result {
	var v [3]uintptr
	for i, name := range versionSymbols {
		fn, err := lib.sym(name)
		if err != nil {
			r.LoadError = fmt.Sprintf("loaded, but %s is missing (XRT older than 2023?): %v", name, err)
			return r
		}
		v[i] = lib.call(fn) & 0xffffffff
	}
	r.Loaded = true
	r.Version = fmt.Sprintf("%d.%d.%d", v[0], v[1], v[2])
	if !openDevice || ctx.Err() != nil {
		return r
	}
	open, err := lib.sym(symDeviceOpen)
	if err != nil {
		r.DeviceError = fmt.Sprintf("%s is missing: %v", symDeviceOpen, err)
		return r
	}
	closeFn, err := lib.sym(symDeviceClose)
	if err != nil {
		r.DeviceError = fmt.Sprintf("%s is missing: %v", symDeviceClose, err)
		return r
	}
	r.DeviceTried = true
	h := lib.call(open, 0)
	if h == 0 {
		r.DeviceError = "xrtDeviceOpen(0) returned NULL: XRT found no device with index 0"
		return r
	}
	r.DeviceOpened = true
	if rc := int32(lib.call(closeFn, h)); rc != 0 {
		r.DeviceError = fmt.Sprintf("xrtDeviceClose returned %d", rc)
	}
	return r
}
