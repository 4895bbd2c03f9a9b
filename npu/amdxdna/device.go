package amdxdna

import (
	"fmt"
	"runtime"
	"unsafe"
)

// IoctlFunc performs one ioctl on fd with a pointer to the request struct.
// On Linux it is the ioctl(2) system call; tests pass a fake that fills
// the struct the way the kernel does.
type IoctlFunc func(fd int, req uintptr, arg unsafe.Pointer) error

// Device is an open amdxdna accel node (/dev/accel/accelN).
type Device struct {
	fd    int
	ioctl IoctlFunc
	close func(fd int) error
}

// NewDevice wraps an already open file descriptor; ioctl and closeFn do
// the system calls. [Open] is the usual way to get a Device.
func NewDevice(fd int, ioctl IoctlFunc, closeFn func(fd int) error) *Device {
	return &Device{fd: fd, ioctl: ioctl, close: closeFn}
}

// Close closes the file descriptor.
func (d *Device) Close() error {
	if d.close == nil {
		return nil
	}
	return d.close(d.fd)
}

// Version runs DRM_IOCTL_VERSION.
func (d *Device) Version() (DRMVersion, error) {
	name, date, desc := make([]byte, 128), make([]byte, 128), make([]byte, 128)
	v := &drmVersion{
		NameLen: uint64(len(name)), Name: unsafe.Pointer(&name[0]),
		DateLen: uint64(len(date)), Date: unsafe.Pointer(&date[0]),
		DescLen: uint64(len(desc)), Desc: unsafe.Pointer(&desc[0]),
	}
	err := d.ioctl(d.fd, IoctlVersion, unsafe.Pointer(v))
	runtime.KeepAlive(v)
	if err != nil {
		return DRMVersion{}, fmt.Errorf("DRM_IOCTL_VERSION: %w", err)
	}
	return DRMVersion{
		Major: int(v.Major), Minor: int(v.Minor), Patch: int(v.Patch),
		Name: cString(name[:min(int(v.NameLen), len(name))]),
		Date: cString(date[:min(int(v.DateLen), len(date))]),
		Desc: cString(desc[:min(int(v.DescLen), len(desc))]),
	}, nil
}

// getInfo runs DRM_IOCTL_AMDXDNA_GET_INFO for param into a buffer of size bytes.
func (d *Device) getInfo(param uint32, size int) ([]byte, error) {
	buf := make([]byte, size)
	gi := &getInfo{Param: param, BufferSize: uint32(size), Buffer: unsafe.Pointer(&buf[0])}
	err := d.ioctl(d.fd, IoctlGetInfo, unsafe.Pointer(gi))
	runtime.KeepAlive(gi)
	if err != nil {
		return nil, err
	}
	return buf, nil
}

// Firmware runs GET_INFO with DRM_AMDXDNA_QUERY_FIRMWARE_VERSION.
func (d *Device) Firmware() (FirmwareVersion, error) {
	b, err := d.getInfo(QueryFirmwareVersion, firmwareSize)
	if err != nil {
		return FirmwareVersion{}, fmt.Errorf("DRM_AMDXDNA_GET_INFO(QUERY_FIRMWARE_VERSION): %w", err)
	}
	return decodeFirmware(b)
}

// AIEMetadata runs GET_INFO with DRM_AMDXDNA_QUERY_AIE_METADATA.
func (d *Device) AIEMetadata() (AIEMetadata, error) {
	b, err := d.getInfo(QueryAIEMetadata, aieMetadataSize)
	if err != nil {
		return AIEMetadata{}, fmt.Errorf("DRM_AMDXDNA_GET_INFO(QUERY_AIE_METADATA): %w", err)
	}
	return decodeAIEMetadata(b)
}
