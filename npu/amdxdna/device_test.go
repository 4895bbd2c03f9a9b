package amdxdna

import (
	"encoding/binary"
	"errors"
	"syscall"
	"testing"
	"unsafe"
)

// The request numbers the uapi headers produce on x86_64 (research/npu.md;
// TestLayoutMatchesC recomputes them with the C compiler).
func TestIoctlNumbers(t *testing.T) {
	if IoctlVersion != 0xC0406400 {
		t.Errorf("DRM_IOCTL_VERSION = %#x, want 0xC0406400", IoctlVersion)
	}
	if IoctlGetInfo != 0xC0106447 {
		t.Errorf("DRM_IOCTL_AMDXDNA_GET_INFO = %#x, want 0xC0106447", IoctlGetInfo)
	}
	if s := unsafe.Sizeof(drmVersion{}); s != drmVersionSize {
		t.Errorf("sizeof drm_version = %d, want %d", s, drmVersionSize)
	}
	if s := unsafe.Sizeof(getInfo{}); s != getInfoSize {
		t.Errorf("sizeof amdxdna_drm_get_info = %d, want %d", s, getInfoSize)
	}
}

// fakeKernel answers the two ioctls by writing raw bytes at the C offsets,
// the way the driver does, so the test checks the Go layout against C's.
func fakeKernel(t *testing.T, fwErr error) IoctlFunc {
	return func(fd int, req uintptr, arg unsafe.Pointer) error {
		if fd != 7 {
			t.Errorf("fd = %d, want 7", fd)
		}
		switch req {
		case 0xC0406400:
			raw := (*[64]byte)(arg)
			le := binary.LittleEndian
			le.PutUint32(raw[0:], 0)
			le.PutUint32(raw[4:], 6)
			le.PutUint32(raw[8:], 1)
			fill := func(lenOff, ptrOff int, s string) {
				n := le.Uint64(raw[lenOff:])
				p := *(*unsafe.Pointer)(unsafe.Pointer(&raw[ptrOff]))
				buf := unsafe.Slice((*byte)(p), n)
				copy(buf, s)
				le.PutUint64(raw[lenOff:], uint64(len(s)))
			}
			fill(16, 24, "amdxdna_accel_driver")
			fill(32, 40, "20240124")
			fill(48, 56, "AMD XDNA")
			return nil
		case 0xC0106447:
			raw := (*[16]byte)(arg)
			le := binary.LittleEndian
			param, size := le.Uint32(raw[0:]), le.Uint32(raw[4:])
			buf := unsafe.Slice((*byte)(*(*unsafe.Pointer)(unsafe.Pointer(&raw[8]))), size)
			switch param {
			case 8:
				if fwErr != nil {
					return fwErr
				}
				for i, v := range []uint32{1, 1, 2, 65} {
					le.PutUint32(buf[4*i:], v)
				}
			case 1:
				le.PutUint32(buf[0:], 0x400000)
				le.PutUint16(buf[4:], 8)
				le.PutUint16(buf[6:], 6)
				le.PutUint32(buf[8:], 2)
				le.PutUint32(buf[12:], 1)
			default:
				return syscall.EINVAL
			}
			return nil
		}
		return syscall.ENOTTY
	}
}

func TestDeviceQueries(t *testing.T) {
	closed := false
	d := NewDevice(7, fakeKernel(t, nil), func(fd int) error { closed = true; return nil })
	v, err := d.Version()
	if err != nil {
		t.Fatal(err)
	}
	if want := (DRMVersion{Major: 0, Minor: 6, Patch: 1, Name: DriverName, Date: "20240124", Desc: "AMD XDNA"}); v != want {
		t.Errorf("Version = %+v, want %+v", v, want)
	}
	fw, err := d.Firmware()
	if err != nil {
		t.Fatal(err)
	}
	if fw.String() != "1.1.2.65" {
		t.Errorf("Firmware = %s, want 1.1.2.65", fw)
	}
	md, err := d.AIEMetadata()
	if err != nil {
		t.Fatal(err)
	}
	if want := (AIEMetadata{ColSize: 0x400000, Cols: 8, Rows: 6, VersionMajor: 2, VersionMinor: 1}); md != want {
		t.Errorf("AIEMetadata = %+v, want %+v", md, want)
	}
	if err := d.Close(); err != nil || !closed {
		t.Errorf("Close: err %v, closed %v", err, closed)
	}
}

func TestDeviceErrorsKeepErrno(t *testing.T) {
	d := NewDevice(7, fakeKernel(t, syscall.ENOTTY), nil)
	_, err := d.Firmware()
	if !errors.Is(err, syscall.ENOTTY) {
		t.Fatalf("Firmware error %v does not wrap ENOTTY", err)
	}
}

func TestDecodeShortBuffers(t *testing.T) {
	if _, err := decodeFirmware(make([]byte, 3)); err == nil {
		t.Error("decodeFirmware accepted 3 bytes")
	}
	if _, err := decodeAIEMetadata(make([]byte, 8)); err == nil {
		t.Error("decodeAIEMetadata accepted 8 bytes")
	}
}
