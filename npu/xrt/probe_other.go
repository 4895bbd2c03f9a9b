//go:build !linux && !windows

package xrt

import (
	"context"
	"runtime"
)

// Probe reports that XRT probing is not supported on this system: the
// AMD NPU runtime exists only for Linux and Windows.
func Probe(ctx context.Context, path string, openDevice bool) Result {
	return Result{Library: path, LoadError: "XRT is not available on " + runtime.GOOS}
}
