package cpu

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/npuchat/npuchat/engine"
	"github.com/npuchat/npuchat/service/backend"
)

// runners are the places of the requests a backend answers at once
// (Options.Parallel) and their sessions, reused from request to request
// (a session's KV memory goes back to the KV cache with Keep; what is
// reused is its logits buffer). A prompt or an answer that needs KV
// memory the running ones hold waits for one of them to end (waitRoom),
// for at most Options.KVWait in all, and fails with
// backend.ErrKVMemoryFull when none ends in time or all the others wait
// too (one of them then fails at once, which frees its memory for the
// rest). It never ends an answer early as though it were complete.
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
	// wait bounds a request's wait for KV memory (Options.KVWait).
	wait time.Duration
	// onWait, when set (by a test, before any request), is called as a
	// request begins to wait for KV memory.
	onWait func()
}

// newRunners makes places for places requests, whose sessions are
// kv's, like first (kept for reuse); wait bounds a request's wait for
// KV memory (0: DefaultKVWait).
func newRunners(places int, kv *engine.KVCache, first *engine.Session, wait time.Duration) *runners {
	if wait <= 0 {
		wait = DefaultKVWait
	}
	return &runners{places: places, sem: make(chan struct{}, places), free: []*engine.Session{first},
		kv: kv, maxCtx: first.MaxContext(), changed: make(chan struct{}), wait: wait}
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

// roomWait is one request's wait for KV memory: its prompt's, across
// attempts, or one token's of its answer. The zero value has not waited.
type roomWait struct {
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
	if w.until.IsZero() {
		w.until = time.Now().Add(r.wait)
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
		err = fmt.Errorf("%w (%w; no request beside it ended within %s)", backend.ErrKVMemoryFull, short, r.wait)
	}
	r.mu.Lock()
	r.stalled--
	r.mu.Unlock()
	return err
}
