//go:build !windows

package check

import (
	"errors"
	"runtime"
)

func newLiveWindows() (WindowsSystem, error) {
	return nil, errors.New("the Windows checks need Windows to read the live system (this is " + runtime.GOOS + "); pass --sysroot with a recorded tree")
}
