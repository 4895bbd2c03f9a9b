//go:build windows

package app

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/windows"
)

// memoryStatusEx is MEMORYSTATUSEX.
type memoryStatusEx struct {
	length               uint32
	memoryLoad           uint32
	totalPhys            uint64
	availPhys            uint64
	totalPageFile        uint64
	availPageFile        uint64
	totalVirtual         uint64
	availVirtual         uint64
	availExtendedVirtual uint64
}

// windowsMemAvailable is the physical memory free now
// (GlobalMemoryStatusEx's ullAvailPhys, what Task Manager calls
// available), in bytes.
func windowsMemAvailable() (int64, error) {
	st := memoryStatusEx{}
	st.length = uint32(unsafe.Sizeof(st))
	proc := windows.NewLazySystemDLL("kernel32.dll").NewProc("GlobalMemoryStatusEx")
	if r, _, err := proc.Call(uintptr(unsafe.Pointer(&st))); r == 0 {
		return 0, fmt.Errorf("GlobalMemoryStatusEx: %w", err)
	}
	return int64(st.availPhys), nil
}
