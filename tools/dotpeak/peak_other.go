//go:build !amd64

package main

import "github.com/npuchat/npuchat/engine/simd"

// loopFor returns level's loop (only plain Go off amd64).
func loopFor(level simd.Level) (macs int, run func(n int, u, s uint32) int64, ok bool) {
	if level == simd.None {
		return plainMACs, plainLoop, true
	}
	return 0, nil, false
}
