package childserver

import (
	"cmp"
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/npuchat/npuchat/service/backend"
	"github.com/npuchat/npuchat/service/backend/oaicompat"
)

// State is where a route's backend is in its life.
type State string

// States. A route without restarts never enters StateRestarting.
const (
	StateStopped    State = "stopped"    // not loaded
	StateStarting   State = "starting"   // the child started, not serving yet
	StateReady      State = "ready"      // serving
	StateRestarting State = "restarting" // the child died; a restart is pending
	StateFailed     State = "failed"     // the child died (and restarts failed); Unload to reset
)

// Event is a state change.
type Event struct {
	State   State
	PID     int   // the child's process id, when there is one
	Attempt int   // the restart attempt (1-based), in StateStarting and StateRestarting after a crash
	Err     error // why, in StateRestarting and StateFailed, and for a failed start
}

// Slot is the one server child a backend runs, the client that talks to
// it and the backend's state, under one lock: what Load, Generate, Unload
// and the watch over the child share. Make one with NewSlot.
type Slot struct {
	onState func(Event) // may be nil

	mu      sync.Mutex
	state   State
	cur     *Server
	client  *oaicompat.Client
	lastErr error
}

// NewSlot returns an empty slot in StateStopped. onState, if set, hears
// every state change; it must not block or call the backend.
func NewSlot(onState func(Event)) *Slot {
	return &Slot{onState: onState, state: StateStopped}
}

// State is the state now.
func (s *Slot) State() State {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.state
}

// Server is the child now (starting or serving), or nil.
func (s *Slot) Server() *Server {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cur
}

// PID is the child's process id, or 0.
func (s *Slot) PID() int {
	if c := s.Server(); c != nil {
		return c.PID
	}
	return 0
}

// Current says whether c is the child now.
func (s *Slot) Current(c *Server) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cur == c
}

// LastErr is the error of the last failure since the last Ready or
// Stopped, or nil.
func (s *Slot) LastErr() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lastErr
}

// Set records a state change (and its error, if any) and tells onState.
func (s *Slot) Set(ev Event) {
	s.mu.Lock()
	s.state = ev.State
	if ev.Err != nil {
		s.lastErr = ev.Err
	}
	s.mu.Unlock()
	if s.onState != nil {
		s.onState(ev)
	}
}

// Starting records c, just started, as the child (so that PID sees it).
func (s *Slot) Starting(c *Server, attempt int) {
	s.mu.Lock()
	s.cur = c
	s.mu.Unlock()
	s.Set(Event{State: StateStarting, PID: c.PID, Attempt: attempt})
}

// Ready records c, serving through client, as the child, and forgets the
// last failure.
func (s *Slot) Ready(c *Server, client *oaicompat.Client, attempt int) {
	s.mu.Lock()
	s.cur, s.client, s.lastErr = c, client, nil
	s.mu.Unlock()
	s.Set(Event{State: StateReady, PID: c.PID, Attempt: attempt})
}

// Forget forgets c and its client if c is the child now; it says whether
// it was.
func (s *Slot) Forget(c *Server) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur != c {
		return false
	}
	s.cur, s.client = nil, nil
	return true
}

// Take forgets the child and its client and returns them (nil when none).
func (s *Slot) Take() (*Server, *oaicompat.Client) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, client := s.cur, s.client
	s.cur, s.client = nil, nil
	return c, client
}

// Stopped records StateStopped and forgets the last failure.
func (s *Slot) Stopped() {
	s.Set(Event{State: StateStopped})
	s.mu.Lock()
	s.lastErr = nil
	s.mu.Unlock()
}

// Serving returns the child and its client when the backend serves, or
// an error that says why not, naming the model as name ("oflm
// minicpm5:2b"): backend.ErrNotLoaded when stopped, the last failure
// (else backend.ErrDeviceFailed) when failed, backend.ErrDeviceFailed
// while starting or restarting.
func (s *Slot) Serving(name string) (*Server, *oaicompat.Client, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.state == StateStopped:
		return nil, nil, fmt.Errorf("%s: %w", name, backend.ErrNotLoaded)
	case s.state == StateFailed:
		return nil, nil, fmt.Errorf("%s is down: %w", name, cmp.Or(s.lastErr, backend.ErrDeviceFailed))
	case s.client == nil || s.state != StateReady:
		return nil, nil, fmt.Errorf("%s is not ready (%s): %w", name, s.state, backend.ErrDeviceFailed)
	}
	return s.cur, s.client, nil
}

// Stop forgets the child and stops it: its client is unloaded first, which
// makes a running request return, then the child is stopped
// (Server.Stop with grace); the state becomes StateStopped.
func (s *Slot) Stop(ctx context.Context, grace time.Duration) error {
	c, client := s.Take()
	if client != nil {
		client.Unload(ctx)
	}
	var err error
	if c != nil {
		err = c.Stop(ctx, grace)
	}
	s.Stopped()
	return err
}
