package check

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"

	"github.com/npuchat/npuchat/config"
	"github.com/npuchat/npuchat/npu/xrt"
)

// Options configure [Run] and [Record].
type Options struct {
	// Root is "" or "/" for the live system, or a tree written by [Record]
	// (with its npucheck.json), which is then replayed.
	Root string
	// GOOS picks the checks for the live system ("linux" or "windows");
	// empty means runtime.GOOS. A recorded tree uses its own.
	GOOS string
	// XRT loads the XRT runtime. Use [xrt.ChildProber] so that a broken
	// XRT cannot take the caller down. Nil: XRT is only looked for on disk
	// (L14), and L16 and W5 are skipped. Ignored for a recorded tree.
	XRT xrt.Prober
	// ModelBytes is the size of the model to run; memlock (L13) must allow
	// it plus 512 MiB. Zero checks FastFlowLM's validate minimum (100 MiB).
	ModelBytes int64
	// Getenv reads XILINX_XRT (where XRT lives in a custom prefix); nil
	// reads nothing.
	Getenv func(string) string

	// FS, Linux and Windows replace the live system (tests); nil uses it.
	FS      FS
	Linux   LinuxSystem
	Windows WindowsSystem
}

// seams are the resolved sources of one run.
type seams struct {
	goos    string
	fs      FS
	linux   LinuxSystem
	windows WindowsSystem
	xrt     xrt.Prober
	getenv  func(string) string
	rec     *Recording
}

func resolve(opts Options) (*seams, error) {
	s := &seams{goos: opts.GOOS, fs: opts.FS, linux: opts.Linux, windows: opts.Windows, xrt: opts.XRT, getenv: opts.Getenv}
	if s.getenv == nil {
		s.getenv = func(string) string { return "" }
	}
	if opts.Root != "" && filepath.Clean(opts.Root) != string(filepath.Separator) {
		f := DirFS(opts.Root)
		rec, err := readRecording(f)
		if err != nil {
			return nil, fmt.Errorf("check %s: %w", opts.Root, err)
		}
		s.goos, s.fs, s.rec = rec.GOOS, f, rec
		if rec.Linux == nil {
			rec.Linux = &LinuxRecording{}
		}
		if rec.Windows == nil {
			rec.Windows = &WindowsRecording{}
		}
		s.linux, s.windows = replayLinux{rec.Linux}, replayWindows{rec.Windows}
		s.xrt = nil
		if rec.XRT != nil {
			s.xrt = replayXRT(rec.XRT)
		}
		s.getenv = func(k string) string { return rec.Env[k] }
		return s, nil
	}
	if s.goos == "" {
		s.goos = runtime.GOOS
	}
	if s.fs == nil {
		s.fs = DirFS("/")
	}
	var err error
	switch s.goos {
	case "linux":
		if s.linux == nil {
			s.linux, err = newLiveLinux()
		}
	case "windows":
		if s.windows == nil {
			s.windows, err = newLiveWindows()
		}
	}
	return s, err
}

// Run checks whether the NPU can run a model and returns the report. The
// error is for a run that could not happen at all (a recorded tree that
// cannot be read); every problem of the machine is a check in the report.
func Run(ctx context.Context, opts Options) (*Report, error) {
	s, err := resolve(opts)
	if err != nil {
		return nil, err
	}
	return s.run(ctx, opts.ModelBytes), nil
}

func (s *seams) run(ctx context.Context, modelBytes int64) *Report {
	switch s.goos {
	case "linux":
		return runLinux(ctx, s.fs, s.linux, s.xrt, s.getenv, modelBytes)
	case "windows":
		return runWindows(ctx, s.windows, s.xrt)
	}
	r := &Report{OS: s.goos, Checks: []Check{{ID: "OS", Title: "Operating system", Group: GroupHardware,
		Status: Fail, Found: s.goos + ": AMD NPUs work only on Linux and Windows",
		Need: "Linux or Windows on a Ryzen AI machine", required: true}}}
	r.finish()
	return r
}

// Record runs the checks on the live system like [Run] and writes what
// they read into dir, which must not exist yet: the files (sysfs, procfs,
// /lib entries; nothing else, and no file contents outside those paths)
// and npucheck.json with the system-call and XRT answers. [Run] with
// Options.Root = dir replays it and gives the same report.
func Record(ctx context.Context, dir string, opts Options) (*Report, error) {
	if opts.Root != "" && filepath.Clean(opts.Root) != string(filepath.Separator) {
		return nil, errors.New("record: records the live system; Options.Root must be empty")
	}
	if _, err := os.Lstat(dir); err == nil {
		return nil, fmt.Errorf("record: %s already exists; give a new folder", dir)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("record: %w", err)
	}
	s, err := resolve(opts)
	if err != nil {
		return nil, err
	}
	rfs := newRecordingFS(s.fs)
	s.fs = rfs
	rec := &Recording{Format: 1, GOOS: s.goos}
	if x := s.getenv("XILINX_XRT"); x != "" {
		rec.Env = map[string]string{"XILINX_XRT": x}
	}
	switch s.goos {
	case "linux":
		rec.Linux = &LinuxRecording{}
		s.linux = &recordingLinux{inner: s.linux, r: rec.Linux}
		s.linux.Uname() // always recorded: a bug report needs the kernel even without an NPU
	case "windows":
		rec.Windows = &WindowsRecording{}
		s.windows = &recordingWindows{inner: s.windows, r: rec.Windows}
	}
	if s.xrt != nil {
		rec.XRT = map[string]XRTAnswer{}
		s.xrt = &recordingXRT{inner: s.xrt, m: rec.XRT}
	}
	report := s.run(ctx, opts.ModelBytes)

	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return nil, fmt.Errorf("record: %w", err)
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), "."+filepath.Base(dir)+".tmp-")
	if err != nil {
		return nil, fmt.Errorf("record: %w", err)
	}
	defer os.RemoveAll(tmp)
	if err := os.Chmod(tmp, 0o755); err != nil {
		return nil, fmt.Errorf("record: %w", err)
	}
	if err := rfs.writeTree(tmp); err != nil {
		return nil, fmt.Errorf("record: write tree: %w", err)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(rec); err != nil {
		return nil, fmt.Errorf("record: %w", err)
	}
	if err := config.WriteFileAtomic(filepath.Join(tmp, RecordingFile), buf.Bytes(), 0o644); err != nil {
		return nil, fmt.Errorf("record: %w", err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		return nil, fmt.Errorf("record: %w", err)
	}
	return report, nil
}
