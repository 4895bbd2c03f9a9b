package xrt

import (
	"context"
	"fmt"
	"syscall"

	"golang.org/x/sys/windows"
)

// Probe loads the XRT library (an absolute path, or xrt_coreutil.dll,
// looked up in System32 where the NPU driver installs it) in this process,
// reads its version and, when openDevice is set, opens and closes device
// 0. It never panics: a missing library or symbol is described in the
// Result.
func Probe(ctx context.Context, path string, openDevice bool) Result {
	r := Result{Library: path}
	var flags uintptr = windows.LOAD_LIBRARY_SEARCH_SYSTEM32 | windows.LOAD_LIBRARY_SEARCH_DEFAULT_DIRS
	if len(path) > 2 && (path[1] == ':' || path[0] == '\\') {
		flags = windows.LOAD_WITH_ALTERED_SEARCH_PATH
	}
	h, err := windows.LoadLibraryEx(path, 0, flags)
	if err != nil {
		r.LoadError = fmt.Sprintf("LoadLibrary %s: %v", path, err)
		return r
	}
	return probeLoaded(ctx, winLib(h), r, openDevice)
}

// winLib is a library loaded with LoadLibraryEx.
type winLib windows.Handle

func (h winLib) sym(name string) (uintptr, error) {
	return windows.GetProcAddress(windows.Handle(h), name)
}

func (h winLib) call(fn uintptr, args ...uintptr) uintptr {
	r, _, _ := syscall.SyscallN(fn, args...)
	return r
}
