package check

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/npuchat/npuchat/npu/amdxdna"
	"github.com/npuchat/npuchat/npu/xrt"
)

// Errno is a system error by its C name ("EACCES"), the same on every OS,
// so that recorded answers replay exactly and the checks can tell a
// permission problem from an IOMMU one.
type Errno string

// Error gives the name and, for the errors the checks care about, what it means.
func (e Errno) Error() string {
	if t, ok := errnoText[e]; ok {
		return string(e) + " (" + t + ")"
	}
	return string(e)
}

var errnoText = map[Errno]string{
	"EACCES": "permission denied", "EPERM": "operation not permitted",
	"ENOENT": "no such file or directory", "ENODEV": "no such device",
	"EOPNOTSUPP": "operation not supported", "EINVAL": "invalid argument",
	"ENOSPC": "no space left on device", "ENOTTY": "inappropriate ioctl for device",
	"EBUSY": "device or resource busy", "EIO": "input/output error",
}

// errnoOf returns the Errno in err's chain, or "".
func errnoOf(err error) Errno {
	var e Errno
	if errors.As(err, &e) {
		return e
	}
	return ""
}

// Uname is the part of uname(2) the checks use.
type Uname struct {
	Release string `json:"release"`
	Machine string `json:"machine"`
}

// Unlimited is RLIM_INFINITY.
const Unlimited Limit = ^Limit(0)

// Limit is a resource limit in bytes; JSON writes Unlimited as "unlimited".
type Limit uint64

// MarshalJSON writes a number or "unlimited".
func (l Limit) MarshalJSON() ([]byte, error) {
	if l == Unlimited {
		return []byte(`"unlimited"`), nil
	}
	return []byte(strconv.FormatUint(uint64(l), 10)), nil
}

// UnmarshalJSON reads a number or "unlimited".
func (l *Limit) UnmarshalJSON(b []byte) error {
	if string(b) == `"unlimited"` {
		*l = Unlimited
		return nil
	}
	v, err := strconv.ParseUint(string(b), 10, 64)
	if err != nil {
		return fmt.Errorf("limit %s: want a number or \"unlimited\"", b)
	}
	*l = Limit(v)
	return nil
}

// String gives "unlimited" or the size in MiB.
func (l Limit) String() string {
	if l == Unlimited {
		return "unlimited"
	}
	return fmt.Sprintf("%d MiB", uint64(l)>>20)
}

// Rlimit is a soft (Cur) and hard (Max) limit.
type Rlimit struct {
	Cur Limit `json:"cur"`
	Max Limit `json:"max"`
}

// Device is an open amdxdna accel node; [amdxdna.Device] on Linux.
type Device interface {
	Version() (amdxdna.DRMVersion, error)
	Firmware() (amdxdna.FirmwareVersion, error)
	AIEMetadata() (amdxdna.AIEMetadata, error)
	Close() error
}

// LinuxSystem is what the Linux checks learn from system calls rather
// than from files. Errors that carry an errno carry it as an [Errno].
type LinuxSystem interface {
	Uname() (Uname, error)
	// Memlock is getrlimit(RLIMIT_MEMLOCK).
	Memlock() (Rlimit, error)
	// Access is access(path, R_OK|W_OK) for the calling user.
	Access(path string) error
	// Open opens an accel node read-write.
	Open(path string) (Device, error)
	// KernelLog returns this boot's kernel log lines that mention the NPU.
	KernelLog() ([]string, error)
}

// WindowsSystem is what the Windows checks learn from SetupAPI and the registry.
type WindowsSystem interface {
	// Devices returns the present devices with an AMD NPU hardware id.
	Devices() ([]WinDevice, error)
}

// WinDevice is one device as SetupAPI and the registry describe it.
type WinDevice struct {
	InstanceID  string   `json:"instance_id,omitempty"`
	HardwareIDs []string `json:"hardware_ids"`
	ClassGUID   string   `json:"class_guid"`
	Class       string   `json:"class"`
	Description string   `json:"description"`
	// Status and Problem come from CM_Get_DevNode_Status.
	Status      uint32 `json:"status"`
	Problem     uint32 `json:"problem"`
	StatusError string `json:"status_error,omitempty"`
	// DriverKey is SPDRP_DRIVER: the key under
	// HKLM\SYSTEM\CurrentControlSet\Control\Class holding DriverVersion.
	DriverKey          string `json:"driver_key,omitempty"`
	DriverVersion      string `json:"driver_version,omitempty"`
	DriverVersionError string `json:"driver_version_error,omitempty"`
}

// RecordingFile is the name of the system-call answers in a recorded tree.
const RecordingFile = "npucheck.json"

// Recording holds the answers of the system calls and of the XRT probe
// for one run; with the files beside it, it replays that run.
type Recording struct {
	// Format is 1.
	Format int    `json:"format"`
	GOOS   string `json:"goos"`
	// Note says what the tree is (for test scenarios).
	Note    string            `json:"note,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	Linux   *LinuxRecording   `json:"linux,omitempty"`
	Windows *WindowsRecording `json:"windows,omitempty"`
	// XRT maps "load LIBRARY" and "open LIBRARY" to the probe's answer;
	// null when no probe ran.
	XRT map[string]XRTAnswer `json:"xrt"`
}

// LinuxRecording holds the Linux system-call answers.
type LinuxRecording struct {
	Uname       *Uname                     `json:"uname,omitempty"`
	UnameError  string                     `json:"uname_error,omitempty"`
	Memlock     *Rlimit                    `json:"memlock,omitempty"`
	MemlockErr  string                     `json:"memlock_error,omitempty"`
	Access      map[string]string          `json:"access,omitempty"`
	Devices     map[string]DeviceRecording `json:"devices,omitempty"`
	KernelLog   []string                   `json:"kernel_log,omitempty"`
	KernelLogEr string                     `json:"kernel_log_error,omitempty"`
}

// DeviceRecording holds what opening one accel node and its ioctls answered.
type DeviceRecording struct {
	OpenError     string                   `json:"open_error,omitempty"`
	Version       *amdxdna.DRMVersion      `json:"drm_version,omitempty"`
	VersionError  string                   `json:"drm_version_error,omitempty"`
	Firmware      *amdxdna.FirmwareVersion `json:"firmware,omitempty"`
	FirmwareError string                   `json:"firmware_error,omitempty"`
	AIE           *amdxdna.AIEMetadata     `json:"aie_metadata,omitempty"`
	AIEError      string                   `json:"aie_metadata_error,omitempty"`
}

// WindowsRecording holds the SetupAPI and registry answers.
type WindowsRecording struct {
	Devices      []WinDevice `json:"devices"`
	DevicesError string      `json:"devices_error,omitempty"`
}

// XRTAnswer is one recorded XRT probe.
type XRTAnswer struct {
	Result xrt.Result `json:"result"`
	Error  string     `json:"error,omitempty"`
}

// errString and errFrom convert errors to and from their recorded form.
// An error carrying an Errno is recorded by the errno's name alone, so that
// it replays as the same Errno; the checks add their own context.
func errString(err error) string {
	if err == nil {
		return ""
	}
	if e := errnoOf(err); e != "" {
		return string(e)
	}
	return err.Error()
}

func errFrom(s string) error {
	if s == "" {
		return nil
	}
	if len(s) > 1 && s[0] == 'E' && isUpper(s) {
		return Errno(s)
	}
	return errors.New(s)
}

func isUpper(s string) bool {
	for _, r := range s {
		if (r < 'A' || r > 'Z') && (r < '0' || r > '9') {
			return false
		}
	}
	return true
}

// ---- replay ----

// replayLinux answers from a LinuxRecording.
type replayLinux struct{ r *LinuxRecording }

var errNotRecorded = errors.New("not recorded")

func (s replayLinux) Uname() (Uname, error) {
	if s.r.Uname == nil {
		return Uname{}, firstErr(errFrom(s.r.UnameError), errNotRecorded)
	}
	return *s.r.Uname, nil
}

func (s replayLinux) Memlock() (Rlimit, error) {
	if s.r.Memlock == nil {
		return Rlimit{}, firstErr(errFrom(s.r.MemlockErr), errNotRecorded)
	}
	return *s.r.Memlock, nil
}

func (s replayLinux) Access(path string) error {
	v, ok := s.r.Access[path]
	if !ok {
		return fmt.Errorf("access %s: %w", path, errNotRecorded)
	}
	return errFrom(v)
}

func (s replayLinux) Open(path string) (Device, error) {
	d, ok := s.r.Devices[path]
	if !ok {
		return nil, fmt.Errorf("open %s: %w", path, errNotRecorded)
	}
	if err := errFrom(d.OpenError); err != nil {
		return nil, err
	}
	return replayDevice{d}, nil
}

func (s replayLinux) KernelLog() ([]string, error) {
	if err := errFrom(s.r.KernelLogEr); err != nil {
		return nil, err
	}
	return s.r.KernelLog, nil
}

type replayDevice struct{ d DeviceRecording }

func (r replayDevice) Version() (amdxdna.DRMVersion, error) {
	if r.d.Version == nil {
		return amdxdna.DRMVersion{}, firstErr(errFrom(r.d.VersionError), errNotRecorded)
	}
	return *r.d.Version, nil
}

func (r replayDevice) Firmware() (amdxdna.FirmwareVersion, error) {
	if r.d.Firmware == nil {
		return amdxdna.FirmwareVersion{}, firstErr(errFrom(r.d.FirmwareError), errNotRecorded)
	}
	return *r.d.Firmware, nil
}

func (r replayDevice) AIEMetadata() (amdxdna.AIEMetadata, error) {
	if r.d.AIE == nil {
		return amdxdna.AIEMetadata{}, firstErr(errFrom(r.d.AIEError), errNotRecorded)
	}
	return *r.d.AIE, nil
}

func (replayDevice) Close() error { return nil }

type replayWindows struct{ r *WindowsRecording }

func (s replayWindows) Devices() ([]WinDevice, error) {
	return s.r.Devices, errFrom(s.r.DevicesError)
}

// replayXRT answers XRT probes from a recording.
type replayXRT map[string]XRTAnswer

func xrtKey(library string, open bool) string {
	if open {
		return "open " + library
	}
	return "load " + library
}

func (m replayXRT) Probe(ctx context.Context, library string, open bool) (xrt.Result, error) {
	a, ok := m[xrtKey(library, open)]
	if !ok {
		return xrt.Result{}, fmt.Errorf("xrt probe of %s: %w", library, errNotRecorded)
	}
	return a.Result, errFrom(a.Error)
}

func firstErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

// ---- recording ----

// recordingLinux passes calls through to a live system and writes the
// answers into a LinuxRecording.
type recordingLinux struct {
	inner LinuxSystem
	mu    sync.Mutex
	r     *LinuxRecording
}

func (s *recordingLinux) Uname() (Uname, error) {
	u, err := s.inner.Uname()
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.r.UnameError = errString(err)
	} else {
		s.r.Uname = &u
	}
	return u, err
}

func (s *recordingLinux) Memlock() (Rlimit, error) {
	l, err := s.inner.Memlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.r.MemlockErr = errString(err)
	} else {
		s.r.Memlock = &l
	}
	return l, err
}

func (s *recordingLinux) Access(path string) error {
	err := s.inner.Access(path)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.r.Access == nil {
		s.r.Access = map[string]string{}
	}
	s.r.Access[path] = errString(err)
	return err
}

func (s *recordingLinux) Open(path string) (Device, error) {
	d, err := s.inner.Open(path)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.r.Devices == nil {
		s.r.Devices = map[string]DeviceRecording{}
	}
	rec := &recordingDevice{inner: d, path: path, owner: s}
	s.r.Devices[path] = DeviceRecording{OpenError: errString(err)}
	if err != nil {
		return nil, err
	}
	return rec, nil
}

func (s *recordingLinux) KernelLog() ([]string, error) {
	lines, err := s.inner.KernelLog()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.r.KernelLog, s.r.KernelLogEr = lines, errString(err)
	return lines, err
}

type recordingDevice struct {
	inner Device
	path  string
	owner *recordingLinux
}

func (d *recordingDevice) update(f func(*DeviceRecording)) {
	d.owner.mu.Lock()
	defer d.owner.mu.Unlock()
	rec := d.owner.r.Devices[d.path]
	f(&rec)
	d.owner.r.Devices[d.path] = rec
}

func (d *recordingDevice) Version() (amdxdna.DRMVersion, error) {
	v, err := d.inner.Version()
	d.update(func(r *DeviceRecording) {
		if err != nil {
			r.VersionError = errString(err)
		} else {
			r.Version = &v
		}
	})
	return v, err
}

func (d *recordingDevice) Firmware() (amdxdna.FirmwareVersion, error) {
	v, err := d.inner.Firmware()
	d.update(func(r *DeviceRecording) {
		if err != nil {
			r.FirmwareError = errString(err)
		} else {
			r.Firmware = &v
		}
	})
	return v, err
}

func (d *recordingDevice) AIEMetadata() (amdxdna.AIEMetadata, error) {
	v, err := d.inner.AIEMetadata()
	d.update(func(r *DeviceRecording) {
		if err != nil {
			r.AIEError = errString(err)
		} else {
			r.AIE = &v
		}
	})
	return v, err
}

func (d *recordingDevice) Close() error { return d.inner.Close() }

type recordingWindows struct {
	inner WindowsSystem
	r     *WindowsRecording
}

func (s *recordingWindows) Devices() ([]WinDevice, error) {
	d, err := s.inner.Devices()
	s.r.Devices, s.r.DevicesError = d, errString(err)
	return d, err
}

type recordingXRT struct {
	inner xrt.Prober
	mu    sync.Mutex
	m     map[string]XRTAnswer
}

func (p *recordingXRT) Probe(ctx context.Context, library string, open bool) (xrt.Result, error) {
	r, err := p.inner.Probe(ctx, library, open)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.m[xrtKey(library, open)] = XRTAnswer{Result: r, Error: errString(err)}
	return r, err
}

// readRecording reads npucheck.json from a recorded tree.
func readRecording(f FS) (*Recording, error) {
	b, err := f.ReadFile("/" + RecordingFile)
	if err != nil {
		return nil, fmt.Errorf("not a recorded system tree (%s missing): %w", RecordingFile, err)
	}
	var r Recording
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("read %s: %w", RecordingFile, err)
	}
	if r.Format != 1 {
		return nil, fmt.Errorf("read %s: format %d, this npuchat reads format 1", RecordingFile, r.Format)
	}
	if r.GOOS != "linux" && r.GOOS != "windows" {
		return nil, fmt.Errorf("read %s: goos %q, want linux or windows", RecordingFile, r.GOOS)
	}
	return &r, nil
}
