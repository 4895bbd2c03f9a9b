package engine

import (
	"bytes"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"
)

// Goroutine frames the tests look for (runtime.Stack's names).
const (
	poolWorker    = "engine.(*pool).worker("
	schedulerLoop = "engine.(*Scheduler).loop("
)

// goroutinesIn returns the ids of the goroutines whose stacks hold a
// frame of fn (one of the names above).
func goroutinesIn(fn string) map[int]bool {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	ids := map[int]bool{}
	for _, g := range bytes.Split(buf, []byte("\n\n")) {
		head, _, _ := bytes.Cut(g, []byte(" ["))
		id, err := strconv.Atoi(string(bytes.TrimPrefix(head, []byte("goroutine "))))
		if err == nil && bytes.Contains(g, []byte(fn)) {
			ids[id] = true
		}
	}
	return ids
}

// newGoroutinesIn returns the goroutines in fn that are not in before.
func newGoroutinesIn(fn string, before map[int]bool) map[int]bool {
	ids := goroutinesIn(fn)
	for id := range before {
		delete(ids, id)
	}
	return ids
}

// waitEnded waits until none of the goroutines ids runs fn any more,
// with collect collecting garbage meanwhile (a pool ends in its owner's
// cleanup); after a minute (a bound on a failure, not a measure) it
// fails.
func waitEnded(t *testing.T, fn string, ids map[int]bool, collect bool) {
	t.Helper()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(time.Minute)
	for {
		if collect {
			runtime.GC()
		}
		left := 0
		for id := range goroutinesIn(fn) {
			if ids[id] {
				left++
			}
		}
		if left == 0 {
			return
		}
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("%d of %d goroutines in %s still run after a minute", left, len(ids), fn)
		}
	}
}

// waitParked waits until every worker of p is parked (or about to) on
// its wake condition: it has spun for spinTime without a task.
func waitParked(p *pool) {
	for p.sleepers.Load() != int32(p.threads-1) {
		runtime.Gosched()
	}
}

// countTask records which parts ran and how often.
type countTask struct {
	n     int
	calls []atomic.Int32
}

func (c *countTask) part(k, n int) {
	if n != c.n {
		panic("wrong part count")
	}
	c.calls[k].Add(1)
}

// TestPoolRunsEveryPart runs tasks back to back (the workers spinning)
// and after pauses longer than spinTime (the workers parked, the caller
// woken by the last one): every part runs exactly once per run, and run
// returns only after all have.
func TestPoolRunsEveryPart(t *testing.T) {
	for _, threads := range []int{1, 2, 3, 5} {
		owner := new(int)
		p := newPool(owner, threads)
		c := &countTask{n: threads, calls: make([]atomic.Int32, threads)}
		runs := 0
		for i := range 300 {
			if i%50 == 49 {
				waitParked(p)
			}
			p.run(c)
			runs++
			for k := range threads {
				if got := int(c.calls[k].Load()); got != runs {
					t.Fatalf("threads %d, run %d: part %d ran %d times, want %d", threads, i, k, got, runs)
				}
			}
		}
		runtime.KeepAlive(owner)
	}
}

// slowTask makes part 0 (the caller's) fast and holds the others until
// the caller has parked waiting for them.
type slowTask struct {
	p    *pool
	done []atomic.Bool
}

func (s *slowTask) part(k, _ int) {
	if k > 0 {
		for !s.p.callerIdle.Load() {
			runtime.Gosched()
		}
	}
	s.done[k].Store(true)
}

func TestPoolCallerWaitsForSlowWorkers(t *testing.T) {
	owner := new(int)
	p := newPool(owner, 3)
	for range 5 {
		s := &slowTask{p: p, done: make([]atomic.Bool, 3)}
		p.run(s)
		for k := range s.done {
			if !s.done[k].Load() {
				t.Fatalf("run returned before part %d finished", k)
			}
		}
	}
	runtime.KeepAlive(owner)
}

// TestPoolWorkersStop checks that a pool's workers end once its owner is
// collected (they must not spin or wait forever).
func TestPoolWorkersStop(t *testing.T) {
	before := goroutinesIn(poolWorker)
	func() {
		owner := new([64]byte)
		p := newPool(owner, 4)
		p.run(&countTask{n: 4, calls: make([]atomic.Int32, 4)})
	}()
	mine := newGoroutinesIn(poolWorker, before)
	if len(mine) != 3 {
		t.Fatalf("%d new workers for a pool of 4 threads, want 3", len(mine))
	}
	waitEnded(t, poolWorker, mine, true)
}

func TestArenaAlignsBlocks(t *testing.T) {
	var a arena
	for _, n := range []int{1, 100, 63, 64 << 20, 3 << 20, 5} {
		b := a.alloc(n)
		if len(b) != n || cap(b) != n {
			t.Fatalf("alloc(%d): len %d cap %d", n, len(b), cap(b))
		}
		if p := uintptr(unsafe.Pointer(&b[0])); p%64 != 0 {
			t.Fatalf("alloc(%d) at %#x: not 64-byte aligned", n, p)
		}
		for i := range b {
			b[i] = 1 // every byte is ours (the race detector and bounds would tell)
		}
	}
	if b := hugeBytes(1); uintptr(unsafe.Pointer(&b[0]))%hugePage != 0 || len(b) != hugePage {
		t.Fatalf("hugeBytes(1): %d bytes at %p, want one aligned huge page", len(b), &b[0])
	}
}
