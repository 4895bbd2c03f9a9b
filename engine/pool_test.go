package engine

import (
	"runtime"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"
)

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
				time.Sleep(3 * spinTime) // let the workers park
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

// slowTask makes part 0 (the caller's) fast and the others slow, so that
// the caller waits longer than spinTime and parks.
type slowTask struct{ done []atomic.Bool }

func (s *slowTask) part(k, _ int) {
	if k > 0 {
		time.Sleep(3 * spinTime)
	}
	s.done[k].Store(true)
}

func TestPoolCallerWaitsForSlowWorkers(t *testing.T) {
	owner := new(int)
	p := newPool(owner, 3)
	for range 5 {
		s := &slowTask{done: make([]atomic.Bool, 3)}
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
	before := runtime.NumGoroutine()
	func() {
		owner := new([64]byte)
		p := newPool(owner, 4)
		p.run(&countTask{n: 4, calls: make([]atomic.Int32, 4)})
	}()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines, %d before the pool: its workers did not stop", runtime.NumGoroutine(), before)
		}
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
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
