//go:build !windows

package flm

type jobHandle = uintptr
