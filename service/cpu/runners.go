package cpu

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/npuchat/npuchat/engine"
	"github.com/npuchat/npuchat/service/backend"
)

// ErrNoPlace is a request that found every place of the backend taken
// (Options.Parallel). The backend keeps no queue of its own: the
// service admits at most ModelInfo.Parallel requests at once and queues
// the rest (service/doc.go), so through the service this is a bug; a
// direct caller (a test, a tool) runs at most that many at once itself.
var ErrNoPlace = errors.New("every place of the CPU engine is taken: it answers at most its parallel setting's requests at once, and queues none")

// runners are the places of the requests a backend answers at once
// (Options.Parallel, reported as ModelInfo.Parallel) and their sessions,
// reused from request to request (a session's KV memory goes back to
// the KV cache with Keep; what is reused is its logits buffer). They
// are no admission queue: enter takes a free place or fails at once
// with ErrNoPlace (the service decides who waits, and how long). The
// one wait after admission is for KV memory: a prompt or an answer that
// needs memory the running ones hold waits for one of them to end
// (waitRoom), for at most the request's backend.Request.MemoryWait in
// all (the service decides it), and fails with
// backend.ErrKVMemoryFull when none ends in time or all the others wait
// too (one of them then fails at once, which frees its memory for the
// rest). It never ends an answer early as though it were complete. How
// many wait so is reported to the service (waitingForMemory,
// backend.MemoryWaiter).
type runners struct {
	places int

	mu      sync.Mutex // guards the fields below
	free    []*engine.Session
	kv      *engine.KVCache
	maxCtx  int
	running int
	stalled int           // running requests waiting in waitRoom
	changed chan struct{} // closed (and replaced) when a request ends
	// ended counts the requests ended so far (changed under mu, read
	// without it: ends is called before every step of an answer).
	ended atomic.Uint64
	// onWait, when set (by a test, before any request), is called as a
	// request begins to wait for KV memory.
	onWait func()
}

// newRunners makes places for places requests, whose sessions are
// kv's, like first (kept for reuse).
func newRunners(places int, kv *engine.KVCache, first *engine.Session) *runners {
	return &runners{places: places, free: []*engine.Session{first},
		kv: kv, maxCtx: first.MaxContext(), changed: make(chan struct{})}
}

// enter takes a free place and returns an empty session for the
// request (leave gives both back), or fails at once with ErrNoPlace
// when every place is taken: it never waits.
func (r *runners) enter() (*engine.Session, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.running >= r.places {
		return nil, fmt.Errorf("%w (%d running)", ErrNoPlace, r.running)
	}
	r.running++
	if n := len(r.free); n > 0 {
		s := r.free[n-1]
		r.free = r.free[:n-1]
		return s, nil
	}
	return r.kv.NewSession(r.maxCtx), nil
}

// waitingForMemory is how many running requests wait for KV memory
// now (in waitRoom).
func (r *runners) waitingForMemory() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stalled
}

// leave ends a request whose session is empty (kept or discarded).
func (r *runners) leave(s *engine.Session) {
	r.mu.Lock()
	r.running--
	r.ended.Add(1)
	r.free = append(r.free, s)
	close(r.changed)
	r.changed = make(chan struct{})
	r.mu.Unlock()
}

// ends is how many requests have ended so far: taken before an attempt
// that may find the KV memory short, for waitRoom.
func (r *runners) ends() uint64 { return r.ended.Load() }

// roomWait is one request's wait for KV memory: its prompt's, across
// attempts, or one token's of its answer, for at most bound in all
// (backend.Request.MemoryWait; 0: backend.DefaultMemoryWait).
type roomWait struct {
	bound time.Duration
	until time.Time // when waiting ends (zero: not started)
}

// waitRoom waits for another request to end, for KV memory it holds,
// after an attempt (by w's request) that found the memory short: short
// is that attempt's error, seen ends() before it. It returns nil when
// the request should try again (a request ended: its memory may be
// free), ctx's error when ctx ends, and an error wrapping
// backend.ErrKVMemoryFull at once when no other request runs or all the
// others wait too (none will free memory: this one gives up its own),
// or when no request ended within the bound since w's wait began.
func (r *runners) waitRoom(ctx context.Context, w *roomWait, seen uint64, short error) error {
	if w.bound <= 0 {
		w.bound = backend.DefaultMemoryWait
	}
	if w.until.IsZero() {
		w.until = time.Now().Add(w.bound)
	}
	r.mu.Lock()
	if r.ended.Load() != seen {
		r.mu.Unlock()
		return nil
	}
	if others := r.running - 1; others-r.stalled <= 0 {
		r.mu.Unlock()
		if others == 0 {
			return fmt.Errorf("%w (%w; no other request holds any)", backend.ErrKVMemoryFull, short)
		}
		return fmt.Errorf("%w (%w; the %d requests beside it wait for memory too)", backend.ErrKVMemoryFull, short, others)
	}
	r.stalled++
	ch := r.changed
	r.mu.Unlock()
	if r.onWait != nil {
		r.onWait()
	}
	timer := time.NewTimer(time.Until(w.until))
	defer timer.Stop()
	var err error
	select {
	case <-ch:
	case <-ctx.Done():
		err = ctx.Err()
	case <-timer.C:
		err = fmt.Errorf("%w (%w; no request beside it ended within %s)", backend.ErrKVMemoryFull, short, w.bound)
	}
	r.mu.Lock()
	r.stalled--
	r.mu.Unlock()
	return err
}
