// Command membw measures how fast this machine reads memory with a given
// number of threads: each thread sums its share of a buffer far larger
// than the caches (1 GiB by default), the best of several passes counts.
// scripts/bench uses it for the memory ceiling of decode (decode tok/s ×
// bytes read per token ÷ this bandwidth, docs/performance.md).
//
//	go run ./tools/membw -threads 2
//
// It prints one line of JSON: {"threads":2,"mib":1024,"passes":5,"read_gb_s":15.8}
// (gigabytes of 10⁹ bytes per second).
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"runtime"
	"sync"
	"time"
)

func main() {
	threads := flag.Int("threads", 1, "threads reading at once")
	mib := flag.Int("mib", 1024, "buffer size in MiB (well past the last-level cache)")
	passes := flag.Int("passes", 5, "passes over the buffer; the fastest counts")
	flag.Parse()
	if *threads < 1 || *mib < 1 || *passes < 1 {
		fmt.Fprintln(os.Stderr, "membw: -threads, -mib and -passes must be at least 1")
		os.Exit(2)
	}
	gbs := measure(*threads, *mib<<20, *passes)
	json.NewEncoder(os.Stdout).Encode(struct {
		Threads int     `json:"threads"`
		MiB     int     `json:"mib"`
		Passes  int     `json:"passes"`
		GBs     float64 `json:"read_gb_s"`
	}{*threads, *mib, *passes, gbs})
}

// measure returns the best read bandwidth, in 10⁹ bytes per second, of
// passes passes of threads goroutines (each on its own OS thread)
// summing their shares of a buffer of size bytes.
func measure(threads, size, passes int) float64 {
	if runtime.GOMAXPROCS(0) < threads {
		runtime.GOMAXPROCS(threads)
	}
	buf := make([]uint64, size/8)
	for i := range buf {
		buf[i] = uint64(i) // touch every page before timing
	}
	share := len(buf) / threads &^ 31
	var sink uint64
	var mu sync.Mutex
	best := time.Duration(1<<63 - 1)
	for range passes {
		var wg sync.WaitGroup
		var ready, start sync.WaitGroup
		ready.Add(threads)
		start.Add(1)
		var t0 time.Time
		for k := range threads {
			wg.Add(1)
			go func() {
				defer wg.Done()
				runtime.LockOSThread()
				defer runtime.UnlockOSThread()
				ready.Done()
				start.Wait()
				s := sumFast(buf[k*share : (k+1)*share])
				mu.Lock()
				sink += s
				mu.Unlock()
			}()
		}
		ready.Wait()
		t0 = time.Now()
		start.Done()
		wg.Wait()
		best = min(best, time.Since(t0))
	}
	if sink == 1 {
		fmt.Fprintln(os.Stderr, "") // keeps the sums alive
	}
	return float64(threads*share*8) / best.Seconds() / 1e9
}

// sum adds up b (a multiple of 8 values) in eight independent chains, so
// that the loads, not the additions, set the pace (the reference
// sumFast is tested against, and sumFast off amd64).
func sum(b []uint64) uint64 {
	var s0, s1, s2, s3, s4, s5, s6, s7 uint64
	for len(b) >= 8 {
		s0 += b[0]
		s1 += b[1]
		s2 += b[2]
		s3 += b[3]
		s4 += b[4]
		s5 += b[5]
		s6 += b[6]
		s7 += b[7]
		b = b[8:]
	}
	return s0 + s1 + s2 + s3 + s4 + s5 + s6 + s7
}
