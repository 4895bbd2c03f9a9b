package service

// The request queue and the slot. One goroutine at a time holds the slot
// (a generation, a load, an unload: see Manager); requests wait for it in
// a queue of Options.QueueSize places, and a request beyond that gets
// ErrQueueFull at once. A place can be taken before a request's body is
// read (Reserve), so that what the queue cannot take is refused before
// its body is held in memory. While anyone waits, the keep-alive timer
// (keepalive.go) is stopped; the last to leave re-arms it.

import (
	"context"
	"errors"
	"time"
)

// Ticket is a place in the request queue, taken with Reserve before a
// request's body is read, so that what the queue cannot take is refused
// before its body is held in memory.
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
	m.mu.Lock()
	switch {
	case t != nil && !t.used:
		t.used = true // its place is ours now: given back below
	case t != nil:
		m.mu.Unlock()
		return errors.New("a queue ticket used twice (a bug)")
	case m.waiting >= m.opts.QueueSize:
		m.mu.Unlock()
		return ErrQueueFull
	default:
		m.waiting++
	}
	if m.idle != nil {
		m.idle.Stop() // busy: no idle unload while requests wait
	}
	m.mu.Unlock()
	var err error
	select {
	case m.slot <- struct{}{}:
	case <-ctx.Done():
		err = ctx.Err()
	}
	m.mu.Lock()
	m.waiting--
	if err != nil {
		m.rearmIdleLocked()
	}
	m.mu.Unlock()
	return err
}

// takeSlot waits for the slot outside the request queue (Stop, Unload).
func (m *Manager) takeSlot(ctx context.Context) error {
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
