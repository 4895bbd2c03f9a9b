package check

import (
	"errors"
	"strings"

	"github.com/npuchat/npuchat/npu/amdxdna"
	"golang.org/x/sys/unix"
)

// liveLinux is the running Linux system.
type liveLinux struct{}

// newLiveLinux returns the running system's LinuxSystem.
func newLiveLinux() (LinuxSystem, error) { return liveLinux{}, nil }

// sysErr turns a unix.Errno anywhere in err into an Errno.
func sysErr(err error) error {
	var e unix.Errno
	if errors.As(err, &e) {
		if name := unix.ErrnoName(e); name != "" {
			return Errno(name)
		}
	}
	return err
}

func (liveLinux) Uname() (Uname, error) {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return Uname{}, sysErr(err)
	}
	return Uname{Release: unix.ByteSliceToString(u.Release[:]), Machine: unix.ByteSliceToString(u.Machine[:])}, nil
}

func (liveLinux) Memlock() (Rlimit, error) {
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_MEMLOCK, &rl); err != nil {
		return Rlimit{}, sysErr(err)
	}
	conv := func(v uint64) Limit {
		if v == unix.RLIM_INFINITY {
			return Unlimited
		}
		return Limit(v)
	}
	return Rlimit{Cur: conv(rl.Cur), Max: conv(rl.Max)}, nil
}

func (liveLinux) Access(path string) error {
	return sysErr(unix.Access(path, unix.R_OK|unix.W_OK))
}

func (liveLinux) Open(path string) (Device, error) {
	d, err := amdxdna.Open(path)
	if err != nil {
		return nil, sysErr(err)
	}
	return liveDevice{d}, nil
}

// liveDevice converts the ioctl errors of an amdxdna.Device to Errno.
type liveDevice struct{ d *amdxdna.Device }

func (l liveDevice) Version() (amdxdna.DRMVersion, error) {
	v, err := l.d.Version()
	return v, sysErr(err)
}

func (l liveDevice) Firmware() (amdxdna.FirmwareVersion, error) {
	v, err := l.d.Firmware()
	return v, sysErr(err)
}

func (l liveDevice) AIEMetadata() (amdxdna.AIEMetadata, error) {
	v, err := l.d.AIEMetadata()
	return v, sysErr(err)
}

func (l liveDevice) Close() error { return l.d.Close() }

// KernelLog reads /dev/kmsg without blocking, keeping the NPU's lines.
// Reading it needs root where kernel.dmesg_restrict is set (the default on
// most distributions); that is reported as EPERM.
func (liveLinux) KernelLog() ([]string, error) {
	fd, err := unix.Open("/dev/kmsg", unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, sysErr(err)
	}
	defer unix.Close(fd)
	var lines []string
	buf := make([]byte, 8192)
	for range 100000 {
		n, err := unix.Read(fd, buf)
		if err == unix.EPIPE { // a record was overwritten; read on
			continue
		}
		if err != nil || n <= 0 {
			break
		}
		// A record is "prio,seq,usec,flags;message\n" plus continuation lines.
		rec := string(buf[:n])
		if i := strings.IndexByte(rec, ';'); i >= 0 {
			rec = rec[i+1:]
		}
		msg, _, _ := strings.Cut(rec, "\n")
		if npuLogLine(msg) {
			lines = append(lines, msg)
		}
	}
	return lines, nil
}
