package cpu

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/npuchat/npuchat/engine"
)

// runners are the places of the requests a backend answers at once
// (Options.Parallel) and their sessions, reused from request to request
// (a session's KV memory goes back to the KV cache with Keep; what is
// reused is its logits buffer). A prompt that needs KV memory the
// running ones hold waits for one of them to end (waitRoom), unless all
// the others wait too; an answer that needs more ends there instead
// (generateLocked), so that none waits for another's whole answer.
type runners struct {
	places int
	sem    chan struct{}

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
	// queued counts the requests waiting for a place in enter.
	queued atomic.Int32
}

// newRunners makes places for places requests, whose sessions are
// kv's, like first (kept for reuse).
func newRunners(places int, kv *engine.KVCache, first *engine.Session) *runners {
	return &runners{places: places, sem: make(chan struct{}, places), free: []*engine.Session{first},
		kv: kv, maxCtx: first.MaxContext(), changed: make(chan struct{})}
}

// enter waits for a place (or ctx) and returns an empty session for
// the request; leave gives both back.
func (r *runners) enter(ctx context.Context) (*engine.Session, error) {
	r.queued.Add(1)
	select {
	case r.sem <- struct{}{}:
		r.queued.Add(-1)
	case <-ctx.Done():
		r.queued.Add(-1)
		return nil, ctx.Err()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.running++
	if n := len(r.free); n > 0 {
		s := r.free[n-1]
		r.free = r.free[:n-1]
		return s, nil
	}
	return r.kv.NewSession(r.maxCtx), nil
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
	<-r.sem
}

// ends is how many requests have ended so far: taken before an attempt
// that may find the KV memory short, for waitRoom.
func (r *runners) ends() uint64 { return r.ended.Load() }

// waitRoom waits for another request to end, for KV memory it holds.
// seen is ends() before the attempt that found the memory short: when a
// request ended since, it reports true at once (try again: its memory
// may be free now). It reports false at once when there is none to wait
// for: no other request runs, or all the others wait too (the caller
// then has the memory there is, and ends its answer or refuses its
// prompt).
func (r *runners) waitRoom(ctx context.Context, seen uint64) (bool, error) {
	r.mu.Lock()
	if r.ended.Load() != seen {
		r.mu.Unlock()
		return true, nil
	}
	if r.running-r.stalled <= 1 {
		r.mu.Unlock()
		return false, nil
	}
	r.stalled++
	ch := r.changed
	r.mu.Unlock()
	var err error
	select {
	case <-ch:
	case <-ctx.Done():
		err = ctx.Err()
	}
	r.mu.Lock()
	r.stalled--
	r.mu.Unlock()
	return err == nil, err
}
