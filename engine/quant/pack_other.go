//go:build !amd64

package quant

// packGroupAVX512 does nothing off amd64: packGroup runs.
func packGroupAVX512(p *Packed, g int, data []byte, rb int) bool { return false }

// packGroupAVX2 does nothing off amd64: packGroup runs.
func packGroupAVX2(p *Packed, g int, data []byte, rb int) bool { return false }
