package main

import "github.com/npuchat/npuchat/engine/simd"

// The assembly loops (peak_amd64.s). Each runs n iterations and stores
// its accumulators, every int32 lane of which then holds n × 4 × u×s
// summed over the lane's four byte pairs.

//go:noescape
func peakAVX512(n int, u, s uint32, out *[192]int32)

//go:noescape
func peakAVXVNNI(n int, u, s uint32, out *[96]int32)

//go:noescape
func peakAVX2(n int, u, s uint32, out *[48]int32)

// loopFor returns level's loop: the multiply-adds of one iteration and
// a function that runs n iterations and returns the sum of its
// accumulators; ok is false for a level this build has no loop for.
func loopFor(level simd.Level) (macs int, run func(n int, u, s uint32) int64, ok bool) {
	switch level {
	case simd.AVX512:
		return 12 * 64, func(n int, u, s uint32) int64 {
			var out [192]int32
			peakAVX512(n, u, s, &out)
			return sum32(out[:])
		}, true
	case simd.AVXVNNI:
		return 12 * 32, func(n int, u, s uint32) int64 {
			var out [96]int32
			peakAVXVNNI(n, u, s, &out)
			return sum32(out[:])
		}, true
	case simd.AVX2:
		return 6 * 32, func(n int, u, s uint32) int64 {
			var out [48]int32
			peakAVX2(n, u, s, &out)
			return sum32(out[:])
		}, true
	case simd.None:
		return plainMACs, plainLoop, true
	}
	return 0, nil, false
}
