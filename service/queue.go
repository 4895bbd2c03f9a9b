package service

// The request queue and the slot. One goroutine at a time holds the slot
// (a generation, a load, an unload: see Manager), or a group of
// generations together: when the serving backend answers several at
// once (ModelInfo.Parallel, the CPU engine), the generation that holds the
// slot opens a group (runGroup) and requests for the same model join it
// while it has room (up to the backend's Parallel), without waiting for
// the others' answers; the last to leave gives the slot back.
// Embeddings for the model join the group as a generation does. A
// request that needs the slot itself (a load, another model) stops new
// joins, so that the group drains for it. Requests wait in a queue of
// Options.QueueSize places, and a request beyond that gets ErrQueueFull
// at once. A place can be taken before the request runs (Reserve), once
// its body has arrived; QueueFull lets a request the queue cannot take be
// refused before its body is read. While anyone waits, the keep-alive timer
// (keepalive.go) is stopped; the last to leave re-arms it.

import (
	"context"
	"errors"
	"time"

	"github.com/npuchat/npuchat/service/backend"
)

// Ticket is a place in the request queue, taken with Reserve once a
// request's body has arrived and before it runs.
type Ticket struct {
	m    *Manager
	used bool // m.mu guards: given to acquire or released
}

// Reserve takes a place in the queue (ErrQueueFull when there is none).
// Pass the ticket in GenerateOptions; Release it in any case when done
// (a no-op once Generate or Load used it).
func (m *Manager) Reserve() (*Ticket, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.waiting >= m.opts.QueueSize {
		return nil, ErrQueueFull
	}
	m.waiting++
	if m.idle != nil {
		m.idle.Stop() // busy: no idle unload while requests wait
	}
	return &Ticket{m: m}, nil
}

// QueueFull reports whether Reserve would fail now with ErrQueueFull,
// so that a request the queue cannot take is refused before its body is
// read.
func (m *Manager) QueueFull() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.waiting >= m.opts.QueueSize
}

// Release gives the place back unless Generate or Load used it.
func (t *Ticket) Release() {
	if t == nil {
		return
	}
	t.m.mu.Lock()
	defer t.m.mu.Unlock()
	if !t.used {
		t.used = true
		t.m.waiting--
		t.m.rearmIdleLocked()
	}
}

// acquire waits for the slot, counting as waiting meanwhile. With a
// ticket from Reserve the place in the queue is already taken.
func (m *Manager) acquire(ctx context.Context, t *Ticket) error {
	_, err := m.acquireRun(ctx, t, "")
	return err
}

// acquireRun is acquire for a generation of model ("" for anything else:
// the slot only): it returns the backend when the request joined the
// group running on it (leave with leaveGroup), else nil once it holds
// the slot (give it back with release).
func (m *Manager) acquireRun(ctx context.Context, t *Ticket, model string) (backend.Backend, error) {
	m.mu.Lock()
	switch {
	case t != nil && !t.used:
		t.used = true // its place is ours now: given back below
	case t != nil:
		m.mu.Unlock()
		return nil, errors.New("a queue ticket used twice (a bug)")
	case m.waiting >= m.opts.QueueSize:
		m.mu.Unlock()
		return nil, ErrQueueFull
	default:
		m.waiting++
	}
	if m.idle != nil {
		m.idle.Stop() // busy: no idle unload while requests wait
	}
	wants := false // counted in m.slotWanted
	for {
		if be := m.joinLocked(model); be != nil {
			m.waiting--
			m.mu.Unlock()
			return be, nil
		}
		if !wants && m.group != nil && (model == "" || m.group.model != model) {
			wants = true // the group drains for this one
			m.slotWanted++
		}
		if m.groupCh == nil {
			m.groupCh = make(chan struct{})
		}
		changed := m.groupCh
		m.mu.Unlock()
		var err error
		got := false
		select {
		case m.slot <- struct{}{}:
			got = true
		case <-changed:
		case <-ctx.Done():
			err = ctx.Err()
		}
		m.mu.Lock()
		if got || err != nil {
			m.waiting--
			if wants {
				m.slotWanted--
				m.groupChangedLocked() // joins may resume
			}
			if err != nil {
				m.rearmIdleLocked()
			}
			m.mu.Unlock()
			return nil, err
		}
	}
}

// runGroup is the generations running at once on a backend that answers
// several (ModelInfo.Parallel); together they hold the slot.
type runGroup struct {
	be    backend.Backend
	model string
	n     int // members running
	cap   int // the backend's ModelInfo.Parallel
}

// joinLocked adds a generation of model to the running group when it can
// take one: the group runs model on the serving backend, it has room,
// the model is on, and nobody waits for the slot itself. m.mu is held.
func (m *Manager) joinLocked(model string) backend.Backend {
	g := m.group
	if model == "" || g == nil || g.model != model || g.be != m.be || m.state != StateOn || !m.enabled || g.n >= g.cap || m.slotWanted > 0 {
		return nil
	}
	g.n++
	return g.be
}

// openGroup makes the generation that holds the slot the first of a
// group on be, when be answers several at once (its ModelInfo.Parallel,
// read once as it loaded: m.info); it reports whether it did (the
// caller then leaves with leaveGroup, not release).
func (m *Manager) openGroup(be backend.Backend, model string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.info == nil || m.info.Parallel < 2 || m.group != nil || be != m.be {
		return false
	}
	m.group = &runGroup{be: be, model: model, n: 1, cap: m.info.Parallel}
	m.groupChangedLocked()
	return true
}

// leaveGroup ends a generation of the group; the last gives the slot
// back (release).
func (m *Manager) leaveGroup(keepAlive *time.Duration) {
	m.mu.Lock()
	g := m.group
	g.n--
	last := g.n == 0
	if last {
		m.group = nil
	}
	m.groupChangedLocked()
	m.mu.Unlock()
	if last {
		m.release(keepAlive)
	}
}

// groupChangedLocked wakes the requests waiting to join a group. m.mu is
// held.
func (m *Manager) groupChangedLocked() {
	if m.groupCh != nil {
		close(m.groupCh)
		m.groupCh = nil
	}
}

// takeSlot waits for the slot outside the request queue (Stop, Unload).
// Meanwhile it counts in slotWanted, as a load does, so that a group of
// generations drains for it instead of taking new joiners forever.
func (m *Manager) takeSlot(ctx context.Context) error {
	m.mu.Lock()
	m.slotWanted++
	m.mu.Unlock()
	defer func() {
		m.mu.Lock()
		m.slotWanted--
		m.groupChangedLocked() // joins may resume
		m.mu.Unlock()
	}()
	select {
	case m.slot <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// giveSlot gives the slot back, first unloading the backends Stop set
// aside while someone else held it. Every holder of the slot ends with it.
func (m *Manager) giveSlot() {
	m.mu.Lock()
	orphans := m.orphans
	m.orphans = nil
	m.mu.Unlock()
	for _, be := range orphans {
		m.unload(context.Background(), be)
	}
	<-m.slot
}

// release ends a request's turn: the slot back, the idle timer armed.
func (m *Manager) release(keepAlive *time.Duration) {
	m.giveSlot()
	m.armIdle(keepAlive)
}
