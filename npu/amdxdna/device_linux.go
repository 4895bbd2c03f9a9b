package amdxdna

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// Open opens an accel node read-write, as XRT and FastFlowLM do. The open
// itself binds the process to the NPU through the IOMMU (SVA/PASID), so
// its error says a lot: EACCES is a permission problem, ENODEV, EOPNOTSUPP,
// EINVAL or ENOSPC an IOMMU one. The error is the bare unix.Errno.
func Open(path string) (*Device, error) {
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	return NewDevice(fd, Ioctl, unix.Close), nil
}

// Ioctl is the ioctl(2) system call, returning the bare unix.Errno.
func Ioctl(fd int, req uintptr, arg unsafe.Pointer) error {
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), req, uintptr(arg))
	if errno != 0 {
		return errno
	}
	return nil
}
