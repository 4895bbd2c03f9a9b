//go:build windows

package hub

import "golang.org/x/sys/windows"

// FreeSpace is the free space available to the caller
// (GetDiskFreeSpaceEx).
func FreeSpace(dir string) (uint64, error) {
	p, err := windows.UTF16PtrFromString(dir)
	if err != nil {
		return 0, err
	}
	var avail, total, free uint64
	if err := windows.GetDiskFreeSpaceEx(p, &avail, &total, &free); err != nil {
		return 0, err
	}
	return avail, nil
}
