// Package amdxdna speaks the small, read-only part of the amdxdna kernel
// driver's DRM interface that a health check needs: the DRM version and
// the firmware and AIE array facts behind DRM_AMDXDNA_GET_INFO.
//
// The numbers and struct layouts come from the kernel's uapi headers
// (include/uapi/drm/drm.h and include/uapi/drm/amdxdna_accel.h, read at
// torvalds/linux 03c318a). They are encoded by hand, without cgo, and the
// ioctls go through golang.org/x/sys/unix (pinned at v0.50.0 in go.mod, a
// version listed as working in this workplace). The struct encoding is
// portable and unit-tested on any OS; only [Open] needs Linux.
package amdxdna

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"unsafe"
)

// DRM ioctl encoding (asm-generic/ioctl.h): dir<<30 | size<<16 | type<<8 | nr.
const (
	iocWrite     = 1
	iocRead      = 2
	drmIoctlBase = 'd'
	// drmCommandBase is DRM_COMMAND_BASE: driver-private ioctls start here.
	drmCommandBase = 0x40
	// drmAmdxdnaGetInfo is DRM_AMDXDNA_GET_INFO in enum amdxdna_drm_ioctl_id.
	drmAmdxdnaGetInfo = 7
)

// iowr builds the number of a read-write DRM ioctl, like DRM_IOWR.
func iowr(nr, size uintptr) uintptr {
	return (iocRead|iocWrite)<<30 | size<<16 | drmIoctlBase<<8 | nr
}

// Sizes of the uapi structs on 64-bit Linux.
const (
	drmVersionSize  = 64 // struct drm_version
	getInfoSize     = 16 // struct amdxdna_drm_get_info
	firmwareSize    = 16 // struct amdxdna_drm_query_firmware_version
	aieMetadataSize = 64 // struct amdxdna_drm_query_aie_metadata
)

// Ioctl request numbers.
var (
	// IoctlVersion is DRM_IOCTL_VERSION (0xC0406400).
	IoctlVersion = iowr(0x00, drmVersionSize)
	// IoctlGetInfo is DRM_IOCTL_AMDXDNA_GET_INFO (0xC0106447).
	IoctlGetInfo = iowr(drmCommandBase+drmAmdxdnaGetInfo, getInfoSize)
)

// GET_INFO parameters (enum amdxdna_drm_get_param).
const (
	QueryAIEMetadata     = 1
	QueryFirmwareVersion = 8
)

// DriverName is the DRM driver name amdxdna reports through DRM_IOCTL_VERSION.
const DriverName = "amdxdna_accel_driver"

// DRMVersion is what DRM_IOCTL_VERSION returns.
type DRMVersion struct {
	Major int    `json:"major"`
	Minor int    `json:"minor"`
	Patch int    `json:"patch"`
	Name  string `json:"name"`
	Date  string `json:"date,omitempty"`
	Desc  string `json:"desc,omitempty"`
}

// String gives "name major.minor.patch".
func (v DRMVersion) String() string {
	return fmt.Sprintf("%s %d.%d.%d", v.Name, v.Major, v.Minor, v.Patch)
}

// FirmwareVersion is struct amdxdna_drm_query_firmware_version.
type FirmwareVersion struct {
	Major uint32 `json:"major"`
	Minor uint32 `json:"minor"`
	Patch uint32 `json:"patch"`
	Build uint32 `json:"build"`
}

// String gives the version as the driver's sysfs fw_version prints it.
func (v FirmwareVersion) String() string {
	return fmt.Sprintf("%d.%d.%d.%d", v.Major, v.Minor, v.Patch, v.Build)
}

// AIEMetadata is the part of struct amdxdna_drm_query_aie_metadata a check
// needs: the array shape and the AIE hardware version.
type AIEMetadata struct {
	ColSize      uint32 `json:"col_size"`
	Cols         uint16 `json:"cols"`
	Rows         uint16 `json:"rows"`
	VersionMajor uint32 `json:"version_major"`
	VersionMinor uint32 `json:"version_minor"`
}

// drmVersion mirrors struct drm_version on 64-bit Linux: three ints, then
// (length, pointer) pairs for name, date and description. Go lays it out
// exactly like C does: int32 at 0, 4, 8, padding to 16, then 8-byte words.
// The pointers are unsafe.Pointer, not uintptr, so that the buffers they
// point to are known to the garbage collector and cannot move or be freed
// before the ioctl has filled them.
type drmVersion struct {
	Major, Minor, Patch int32
	_                   int32
	NameLen             uint64
	Name                unsafe.Pointer
	DateLen             uint64
	Date                unsafe.Pointer
	DescLen             uint64
	Desc                unsafe.Pointer
}

// getInfo mirrors struct amdxdna_drm_get_info (the user pointer as above).
type getInfo struct {
	Param      uint32
	BufferSize uint32
	Buffer     unsafe.Pointer
}

// decodeFirmware reads struct amdxdna_drm_query_firmware_version.
func decodeFirmware(b []byte) (FirmwareVersion, error) {
	if len(b) < firmwareSize {
		return FirmwareVersion{}, fmt.Errorf("firmware version: %d bytes, want %d", len(b), firmwareSize)
	}
	le := binary.LittleEndian
	return FirmwareVersion{le.Uint32(b[0:]), le.Uint32(b[4:]), le.Uint32(b[8:]), le.Uint32(b[12:])}, nil
}

// decodeAIEMetadata reads struct amdxdna_drm_query_aie_metadata: u32
// col_size at 0, u16 cols at 4, u16 rows at 6, u32 version major/minor at 8.
func decodeAIEMetadata(b []byte) (AIEMetadata, error) {
	if len(b) < 16 {
		return AIEMetadata{}, fmt.Errorf("aie metadata: %d bytes, want %d", len(b), aieMetadataSize)
	}
	le := binary.LittleEndian
	return AIEMetadata{
		ColSize:      le.Uint32(b[0:]),
		Cols:         le.Uint16(b[4:]),
		Rows:         le.Uint16(b[6:]),
		VersionMajor: le.Uint32(b[8:]),
		VersionMinor: le.Uint32(b[12:]),
	}, nil
}

// cString cuts a kernel-filled buffer at its first NUL byte.
func cString(b []byte) string {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	return string(b)
}
