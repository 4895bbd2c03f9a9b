//go:build !linux

package check

import (
	"errors"
	"runtime"
)

func newLiveLinux() (LinuxSystem, error) {
	return nil, errors.New("the Linux checks need Linux to read the live system (this is " + runtime.GOOS + "); pass --sysroot with a recorded tree")
}
