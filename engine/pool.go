package engine

import (
	"runtime"
	"sync"
)

// task is work a pool splits into parts: part(k, n) does the k-th of n
// equal shares.
type task interface{ part(k, n int) }

// pool runs tasks on a fixed set of goroutines: the caller plus
// threads-1 workers that wait between tasks, so that the several hundred
// matrix products of every token do not each start goroutines. A pool
// belongs to one Session (which is single-goroutine); its workers stop
// when the session is garbage collected.
type pool struct {
	threads int
	wake    []chan task // one per worker
	done    sync.WaitGroup
}

// newPool starts threads-1 workers for owner and stops them when owner
// becomes unreachable. The workers reference only the pool, never the
// owner, so the owner can be collected.
func newPool[T any](owner *T, threads int) *pool {
	p := &pool{threads: max(threads, 1)}
	for k := 1; k < p.threads; k++ {
		c := make(chan task)
		p.wake = append(p.wake, c)
		go p.worker(k, c)
	}
	runtime.AddCleanup(owner, func(p *pool) { p.stop() }, p)
	return p
}

func (p *pool) worker(k int, c chan task) {
	for t := range c {
		t.part(k, p.threads)
		p.done.Done()
	}
}

// run does every part of t, the caller taking part 0, and returns when
// all are done. Sending the task does not allocate (t is a pointer).
func (p *pool) run(t task) {
	if p.threads == 1 {
		t.part(0, 1)
		return
	}
	p.done.Add(p.threads - 1)
	for _, c := range p.wake {
		c <- t
	}
	t.part(0, p.threads)
	p.done.Wait()
}

func (p *pool) stop() {
	for _, c := range p.wake {
		close(c)
	}
}

// share returns the k-th of n contiguous, nearly equal ranges of [0, total).
func share(k, n, total int) (lo, hi int) {
	return k * total / n, (k + 1) * total / n
}
