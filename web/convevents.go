package web

import (
	"net/http"
	"sync"
)

// changeSignal tells every subscriber that something changed, without
// saying what: each subscriber's channel holds at most one pending
// signal, so a slow reader is never blocked on and never misses that a
// change happened since it last looked (several coalesce into one).
type changeSignal struct {
	mu   sync.Mutex
	subs map[chan struct{}]struct{}
}

// subscribe returns a channel that receives after each change (coalesced)
// and the function that ends the subscription.
func (c *changeSignal) subscribe() (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	c.mu.Lock()
	if c.subs == nil {
		c.subs = map[chan struct{}]struct{}{}
	}
	c.subs[ch] = struct{}{}
	c.mu.Unlock()
	return ch, func() {
		c.mu.Lock()
		delete(c.subs, ch)
		c.mu.Unlock()
	}
}

// notify signals every subscriber; it never blocks.
func (c *changeSignal) notify() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for ch := range c.subs {
		select {
		case ch <- struct{}{}:
		default: // a signal is pending already
		}
	}
}

// changesConversations wraps a handler that may create, rename, answer
// in or delete a conversation: when it returns, the event streams send
// "conversations", and every page's list (another tab's too) reloads.
// A request that changed nothing costs a reload of the list only.
func (s *Server) changesConversations(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		defer s.convChanges.notify()
		h(w, r)
	}
}
