package xrt

import (
	"context"

	"github.com/ebitengine/purego"
)

// Probe loads the XRT library at path (an absolute path or a bare soname
// the dynamic loader searches) in this process, reads its version and,
// when openDevice is set, opens and closes device 0. It never panics: a
// missing library or symbol is described in the Result.
func Probe(ctx context.Context, path string, openDevice bool) Result {
	r := Result{Library: path}
	h, err := purego.Dlopen(path, purego.RTLD_NOW|purego.RTLD_GLOBAL)
	if err != nil {
		r.LoadError = err.Error()
		return r
	}
	// The library stays loaded: XRT's static destructors are not meant to
	// run in the middle of a process, and a probe runs once.
	return probeLoaded(ctx, dl(h), r, openDevice)
}

// dl is a library loaded with dlopen.
type dl uintptr

func (h dl) sym(name string) (uintptr, error) { return purego.Dlsym(uintptr(h), name) }

func (h dl) call(fn uintptr, args ...uintptr) uintptr {
	r, _, _ := purego.SyscallN(fn, args...)
	return r
}
