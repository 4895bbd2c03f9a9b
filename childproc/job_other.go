//go:build !windows

package childproc

type jobHandle = uintptr
