// Command dotpeak measures this CPU's peak rate of int8 multiply-adds at
// each SIMD level the engine has kernels for, per thread count: the
// ceiling of prefill, as tools/membw's bandwidth is the ceiling of
// decode. Prefill multiplies every weight by every prompt token's
// activations in int8 (the quantized kernels of engine/quant), so
// prefill tok/s × multiply-adds per token ÷ this peak is the share of
// the CPU's arithmetic that prefill uses (scripts/bench prints it).
//
// Each level runs the instruction its kernels are built on, in
// independent chains on register operands so that nothing but the
// multiply units sets the pace:
//
//	avx512   VPDPBUSD on zmm (AVX-512 VNNI), 12 chains
//	avxvnni  VPDPBUSD on ymm (VEX-encoded AVX-VNNI), 12 chains
//	avx2     VPMADDUBSW + VPMADDWD + VPADDD on ymm, 6 chains
//	none     plain Go over bytes (what the reference kernels can do)
//
//	go run ./tools/dotpeak -threads 2
//
// It prints one line of JSON per level this CPU runs (the
// $NPUCHAT_CPU_CEILING cap applied, as for the engine), fastest level
// first, or only -level's:
//
//	{"level":"avx512","threads":2,"passes":5,"int8_gmac_s":420.5}
//
// (10⁹ int8 multiply-adds per second; an operation count is twice that.)
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/npuchat/npuchat/engine/simd"
)

func main() {
	threads := flag.Int("threads", 1, "threads computing at once")
	level := flag.String("level", "", "one level (avx512, avxvnni, avx2, none); default every level this CPU runs")
	passes := flag.Int("passes", 5, "passes; the fastest counts")
	iters := flag.Int("iters", 20_000_000, "loop iterations per thread and pass")
	flag.Parse()
	if *threads < 1 || *passes < 1 || *iters < 1 {
		fmt.Fprintln(os.Stderr, "dotpeak: -threads, -passes and -iters must be at least 1")
		os.Exit(2)
	}
	levels, err := levelsToRun(*level, os.Getenv)
	if err != nil {
		fmt.Fprintln(os.Stderr, "dotpeak:", err)
		os.Exit(2)
	}
	enc := json.NewEncoder(os.Stdout)
	for _, l := range levels {
		gmacs, err := measure(l, *threads, *iters, *passes)
		if err != nil {
			fmt.Fprintln(os.Stderr, "dotpeak:", err)
			os.Exit(1)
		}
		enc.Encode(struct {
			Level   string  `json:"level"`
			Threads int     `json:"threads"`
			Passes  int     `json:"passes"`
			GMACs   float64 `json:"int8_gmac_s"`
		}{l.String(), *threads, *passes, gmacs})
	}
}

// levelsToRun is -level's one level, or every level this CPU runs under
// $NPUCHAT_CPU_CEILING, fastest first.
func levelsToRun(want string, getenv func(string) string) ([]simd.Level, error) {
	_, ceiling := simd.Env(getenv)
	cpu := simd.Host()
	if ceiling != "" {
		c, err := simd.Parse(ceiling)
		if err != nil {
			return nil, fmt.Errorf("$%s: %w", simd.EnvCeiling, err)
		}
		cpu = cpu.Ceil(c)
	}
	if want != "" {
		l, err := simd.Parse(want)
		if err != nil {
			return nil, err
		}
		if !cpu.Has(l) {
			return nil, fmt.Errorf("this CPU does not run %s: %s", l, cpu.Lacks(l))
		}
		return []simd.Level{l}, nil
	}
	var out []simd.Level
	for _, l := range simd.Levels() {
		if _, _, ok := loopFor(l); ok && cpu.Has(l) {
			out = append(out, l)
		}
	}
	slices.Reverse(out)
	return out, nil
}

// measure returns the best rate, in 10⁹ multiply-adds per second, of
// passes passes of threads goroutines (each on its own OS thread) each
// running iters iterations of level's loop. It checks every thread's
// result, so a loop that skipped work fails instead of looking fast.
func measure(level simd.Level, threads, iters, passes int) (float64, error) {
	macs, run, ok := loopFor(level)
	if !ok {
		return 0, fmt.Errorf("no loop for %s in this build", level)
	}
	if runtime.GOMAXPROCS(0) < threads {
		runtime.GOMAXPROCS(threads)
	}
	const u, s = 0x03030303, 0xFEFEFEFE // every byte pair: 3 × −2
	want := expected(macs, iters, 3, -2)
	best := time.Duration(1<<63 - 1)
	for range passes {
		var wg, ready, start sync.WaitGroup
		ready.Add(threads)
		start.Add(1)
		got := make([]int64, threads)
		for k := range threads {
			wg.Add(1)
			go func() {
				defer wg.Done()
				runtime.LockOSThread()
				defer runtime.UnlockOSThread()
				ready.Done()
				start.Wait()
				got[k] = run(iters, u, s)
			}()
		}
		ready.Wait()
		t0 := time.Now()
		start.Done()
		wg.Wait()
		best = min(best, time.Since(t0))
		for k, g := range got {
			if g != want {
				return 0, fmt.Errorf("%s: thread %d summed %d, want %d", level, k, g, want)
			}
		}
	}
	return float64(threads) * float64(iters) * float64(macs) / best.Seconds() / 1e9, nil
}

// expected is the sum of a loop's accumulators after iters iterations of
// macs multiply-adds of byte u by byte s each, as the loops' int32 lanes
// hold it: each of the macs/4 lanes gains 4×u×s an iteration, wrapping
// at 32 bits.
func expected(macs, iters int, u, s int32) int64 {
	lane := int32(uint32(iters) * uint32(4*u*s)) // wraps as the hardware does
	return int64(lane) * int64(macs/4)
}

// sum32 adds up the accumulators.
func sum32(v []int32) int64 {
	var t int64
	for _, x := range v {
		t += int64(x)
	}
	return t
}

// plainMACs is the multiply-adds of one iteration of plainLoop.
const plainMACs = 64

// plainLoop is the none level's loop: 64 unsigned-by-signed byte
// products a iteration, summed four to an int32 lane like the vector
// loops, in plain Go (what the reference kernels can reach).
func plainLoop(n int, u, s uint32) int64 {
	var a [64]uint8
	var b [64]int8
	for i := range a {
		a[i] = uint8(u >> (8 * (i % 4)))
		b[i] = int8(s >> (8 * (i % 4)))
	}
	var acc [16]int32
	for range n {
		for l := range acc {
			p := a[4*l : 4*l+4]
			q := b[4*l : 4*l+4]
			acc[l] += int32(p[0])*int32(q[0]) + int32(p[1])*int32(q[1]) + int32(p[2])*int32(q[2]) + int32(p[3])*int32(q[3])
		}
	}
	return sum32(acc[:])
}
