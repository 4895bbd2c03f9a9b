// Package eventbus is NPU Chat's one publish/subscribe mechanism: a
// small typed bus, after Tailscale's eventbus (Publish[T], Subscribe[T]),
// written for what the service, the install runner, the settings store
// and the app's server state need and no more.
//
// A publisher never blocks on a subscriber. Each subscriber has a
// channel of Options.Buffer values; when it is full, values wait in
// order in the subscriber's queue and one goroutine moves them into the
// channel as the subscriber reads. A waiting value that a newer one
// makes stale is replaced by it (Options.Replace: a progress report
// replaces the older of its stream, a state the older state), and when
// more than Buffer wait, the oldest that may be lost is dropped; a value
// Options.Keep marks (an outcome) is never dropped, nor is the newest. So a
// slow subscriber may miss steps, never an outcome, and the last value
// it receives is the last one published.
//
// Ownership: a Bus belongs to the one component that publishes on it
// (the service's Manager, the install Runner, config's Store, the app's
// server state), which offers Subscribe to the others. The values are
// the publisher's own types.
package eventbus

import (
	"reflect"
	"sync"
)

// Bus carries values of any number of types from publishers to the
// subscribers of each type. The zero Bus is not usable; call New. Safe
// for concurrent use.
type Bus struct {
	mu     sync.Mutex                          // guards the fields below
	subs   map[reflect.Type]map[ender]struct{} // the subscribers of each type
	closed bool
}

// ender is a subscription the bus can end.
type ender interface{ end() }

// New returns an empty bus.
func New() *Bus { return &Bus{subs: map[reflect.Type]map[ender]struct{}{}} }

// Options shape one subscription.
type Options[T any] struct {
	// Buffer is the channel's size, and how many values may wait beyond
	// it before the oldest droppable one goes (16 when 0).
	Buffer int
	// Replace, when set, reports whether next makes the waiting old
	// stale: then next takes old's place at the end of the queue.
	Replace func(old, next T) bool
	// Keep, when set, reports whether v must never be dropped.
	Keep func(v T) bool
}

// Subscriber is one subscription to the values of type T.
type Subscriber[T any] struct {
	bus  *Bus
	opts Options[T]
	ch   chan T
	done chan struct{} // closed when the subscription ends, to wake flush

	mu       sync.Mutex // guards the fields below
	pending  []T        // waiting for room in ch, oldest first
	flushing bool       // a flush goroutine runs (it alone sends on ch then)
	ended    bool       // ch is closed, or flush closes it
}

// Subscribe starts a subscription to b's values of type T. The values
// in first, when given, are its first values (a publisher that
// subscribes others under its own lock sends its current state this
// way, so that nothing published is missed or seen twice). On a closed
// bus the subscription has ended already: its channel holds first and
// is closed.
func Subscribe[T any](b *Bus, opts Options[T], first ...T) *Subscriber[T] {
	if opts.Buffer <= 0 {
		opts.Buffer = 16
	}
	s := &Subscriber[T]{bus: b, opts: opts, ch: make(chan T, opts.Buffer), done: make(chan struct{})}
	for _, v := range first {
		s.send(v)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		s.end()
		return s
	}
	t := typeOf[T]()
	if b.subs[t] == nil {
		b.subs[t] = map[ender]struct{}{}
	}
	b.subs[t][s] = struct{}{}
	return s
}

// Publish sends v to every subscriber of type T on b, without waiting
// for any of them. Values published by one goroutine arrive in order.
func Publish[T any](b *Bus, v T) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for s := range b.subs[typeOf[T]()] {
		s.(*Subscriber[T]).send(v)
	}
}

// Close ends every subscription; later subscriptions end at once and
// later publishing sends nothing.
func (b *Bus) Close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	for _, subs := range b.subs {
		for s := range subs {
			s.end()
		}
	}
	b.subs = map[reflect.Type]map[ender]struct{}{}
}

// Events is the subscription's channel; it is closed when the
// subscription ends.
func (s *Subscriber[T]) Events() <-chan T { return s.ch }

// Close ends the subscription (its channel is closed). Safe to call
// more than once.
func (s *Subscriber[T]) Close() {
	s.bus.mu.Lock()
	defer s.bus.mu.Unlock()
	if subs := s.bus.subs[typeOf[T]()]; subs != nil {
		delete(subs, s)
	}
	s.end()
}

// end closes the channel now, or lets the running flush close it.
func (s *Subscriber[T]) end() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended {
		return
	}
	s.ended = true
	close(s.done)
	if !s.flushing {
		close(s.ch)
	}
}

// send puts v into the channel, or into the queue when the channel is
// full or values wait already.
func (s *Subscriber[T]) send(v T) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended {
		return
	}
	if !s.flushing {
		select {
		case s.ch <- v:
			return
		default: // full: v waits, and a flush moves it when there is room
		}
		s.flushing = true
		go s.flush()
	}
	s.queue(v)
}

// queue adds v to the waiting values, replacing the one it makes stale
// and dropping the oldest droppable one beyond Buffer. s.mu is held.
func (s *Subscriber[T]) queue(v T) {
	if s.opts.Replace != nil {
		for i, old := range s.pending {
			if s.opts.Replace(old, v) {
				s.pending = append(s.pending[:i], s.pending[i+1:]...)
				break
			}
		}
	}
	s.pending = append(s.pending, v)
	for len(s.pending) > s.opts.Buffer {
		drop := -1 // never the newest: the last value received is the last published
		for i, old := range s.pending[:len(s.pending)-1] {
			if s.opts.Keep == nil || !s.opts.Keep(old) {
				drop = i
				break
			}
		}
		if drop < 0 {
			return // only kept values wait: the queue grows by those alone
		}
		s.pending = append(s.pending[:drop], s.pending[drop+1:]...)
	}
}

// flush moves the waiting values into the channel, in order, as the
// subscriber reads them; it ends when none wait or the subscription
// ends.
func (s *Subscriber[T]) flush() {
	for {
		s.mu.Lock()
		if s.ended {
			s.flushing = false
			s.mu.Unlock()
			close(s.ch)
			return
		}
		if len(s.pending) == 0 {
			s.flushing = false
			s.mu.Unlock()
			return
		}
		v := s.pending[0]
		s.pending = s.pending[1:]
		s.mu.Unlock()
		select {
		case s.ch <- v:
		case <-s.done:
		}
	}
}

func typeOf[T any]() reflect.Type { return reflect.TypeFor[T]() }
