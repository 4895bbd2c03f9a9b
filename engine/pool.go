package engine

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// task is work a pool splits into parts: part(k, n) does the k-th of n
// equal shares.
type task interface{ part(k, n int) }

// spinTime is how long a pool's goroutines poll for the next task (a
// worker) or for the others to finish (the caller) before they park. A
// token's ~170 matrix products follow each other within microseconds,
// and waking a parked goroutine costs several (tens, in a VM): as ggml's
// threadpool does, the threads spin across those short gaps and park
// only when the session is idle.
const spinTime = time.Millisecond

// pool runs tasks on a fixed set of goroutines: the caller plus
// threads-1 workers that wait between tasks, so that the several hundred
// matrix products of every token do not each start goroutines. A pool
// belongs to one Session (which is single-goroutine); its workers stop
// when the session is garbage collected.
type pool struct {
	threads int
	// t is the current task; it is set before seq advances and read by
	// workers after they see seq advance.
	t    task
	seq  atomic.Uint64 // advanced once per task (and at stop)
	left atomic.Int64  // workers that have not finished the current task
	stop atomic.Bool

	// parking, after spinTime without news: workers wait on wake for
	// seq to advance, the caller on idle for left to reach 0.
	mu         sync.Mutex
	wake       sync.Cond
	idle       sync.Cond
	sleepers   atomic.Int32 // workers parked (or about to) on wake
	callerIdle atomic.Bool  // the caller is parked (or about to) on idle
}

// newPool starts threads-1 workers for owner and stops them when owner
// becomes unreachable. The workers reference only the pool, never the
// owner, so the owner can be collected.
func newPool[T any](owner *T, threads int) *pool {
	p := &pool{threads: max(threads, 1)}
	p.wake.L, p.idle.L = &p.mu, &p.mu
	for k := 1; k < p.threads; k++ {
		go p.worker(k)
	}
	runtime.AddCleanup(owner, func(p *pool) { p.shutdown() }, p)
	return p
}

func (p *pool) worker(k int) {
	var seen uint64
	for {
		seen = p.await(seen)
		if p.stop.Load() {
			return
		}
		p.t.part(k, p.threads)
		if p.left.Add(-1) == 0 && p.callerIdle.Load() {
			p.mu.Lock()
			p.idle.Signal()
			p.mu.Unlock()
		}
	}
}

// await returns seq once it differs from seen: polling for spinTime,
// then parked on wake.
func (p *pool) await(seen uint64) uint64 {
	if spinUntil(func() bool { return p.seq.Load() != seen }) {
		return p.seq.Load()
	}
	p.mu.Lock()
	p.sleepers.Add(1)
	// seq is read again after sleepers is raised: a run that advanced
	// seq before then is seen here, one after then sees the sleeper.
	for p.seq.Load() == seen {
		p.wake.Wait()
	}
	p.sleepers.Add(-1)
	p.mu.Unlock()
	return p.seq.Load()
}

// spinUntil polls done for up to spinTime and reports whether it became
// true.
func spinUntil(done func() bool) bool {
	var start time.Time
	for i := 1; ; i++ {
		if done() {
			return true
		}
		if i%1024 == 0 {
			// let other goroutines of this P run (more threads than
			// cores, or the garbage collector's)
			runtime.Gosched()
			if start.IsZero() {
				start = time.Now()
			} else if time.Since(start) > spinTime {
				return false
			}
		}
	}
}

// run does every part of t, the caller taking part 0, and returns when
// all are done. Handing over the task does not allocate (t is a pointer).
func (p *pool) run(t task) {
	if p.threads == 1 {
		t.part(0, 1)
		return
	}
	p.t = t
	p.left.Store(int64(p.threads - 1))
	p.seq.Add(1)
	if p.sleepers.Load() > 0 {
		p.mu.Lock()
		p.wake.Broadcast()
		p.mu.Unlock()
	}
	t.part(0, p.threads)
	if !spinUntil(func() bool { return p.left.Load() == 0 }) {
		p.mu.Lock()
		p.callerIdle.Store(true)
		for p.left.Load() != 0 {
			p.idle.Wait()
		}
		p.callerIdle.Store(false)
		p.mu.Unlock()
	}
	p.t = nil
}

// shutdown ends the workers (they are between tasks: a pool's owner is
// unreachable, so no run is in progress).
func (p *pool) shutdown() {
	p.stop.Store(true)
	p.seq.Add(1)
	p.mu.Lock()
	p.wake.Broadcast()
	p.mu.Unlock()
}

// share returns the k-th of n contiguous, nearly equal ranges of [0, total).
func share(k, n, total int) (lo, hi int) {
	return k * total / n, (k + 1) * total / n
}
