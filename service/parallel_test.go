package service

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/npuchat/npuchat/enginekind"
	"github.com/npuchat/npuchat/service/backend"
	"github.com/npuchat/npuchat/service/backend/fake"
)

// parallelFake is a fake backend that answers n generations at once,
// as the CPU engine does (its ModelInfo.Parallel), and reports how many
// of them wait for memory (backend.MemoryWaiter) from memWaits.
type parallelFake struct {
	*fake.Backend
	n        int
	memWaits *atomic.Int32
}

func (p parallelFake) Info() backend.ModelInfo {
	i := p.Backend.Info()
	i.Parallel = p.n
	return i
}

func (p parallelFake) WaitingForMemory() int { return int(p.memWaits.Load()) }

// hold keeps the fake's answers from making their next token while it
// is shut, so a test sees its generations running for as long as it
// looks, on however slow or busy a machine (no token delay to guess).
type hold struct {
	mu sync.Mutex
	ch chan struct{} // nil while open
}

// shut makes every answer wait before its next token.
func (h *hold) shut() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.ch == nil {
		h.ch = make(chan struct{})
	}
}

// open lets every answer go on.
func (h *hold) open() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.ch != nil {
		close(h.ch)
		h.ch = nil
	}
}

// wait is the fake's BeforeToken: it returns once the hold is open, or
// with the context's error when the request ends first (Stop).
func (h *hold) wait(ctx context.Context) error {
	h.mu.Lock()
	ch := h.ch
	h.mu.Unlock()
	if ch == nil {
		return nil
	}
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// parallelManager serves "m" on a parallelFake of n places whose answers
// run while the returned hold is open (it starts open).
func parallelManager(t *testing.T, n int) (*Manager, *[]parallelFake, *hold) {
	t.Helper()
	var mu sync.Mutex
	var made []parallelFake
	h := &hold{}
	var memWaits atomic.Int32
	m := New(Options{QueueSize: 2, KeepAlive: -1, NewBackend: func(_ context.Context, model string, kind enginekind.Kind) (backend.Backend, error) {
		b := parallelFake{fake.New(fake.Options{Name: model, Kind: kind, TokenDelay: time.Millisecond, BeforeToken: h.wait, Reply: func(*backend.Request) string { return "one two three four five six" }}), n, &memWaits}
		mu.Lock()
		made = append(made, b)
		mu.Unlock()
		return b, nil
	}})
	t.Cleanup(func() { h.open(); m.Close(context.Background()) })
	return m, &made, h
}

// arrived waits until n generations are running or waiting.
func arrived(t *testing.T, m *Manager, n int) {
	t.Helper()
	waitFor(t, fmt.Sprintf("%d generations running or waiting", n), func() bool {
		st := m.Status()
		return st.Running+st.Waiting == n
	})
}

func gen(m *Manager, ctx context.Context, model string) (backend.Result, error) {
	return m.Generate(ctx, &backend.Request{Model: model, Prompt: "hi"}, GenerateOptions{}, func(backend.Token) error { return nil })
}

// TestParallelGenerations: on a backend that answers several at once,
// up to its Parallel requests run together (not one after the other),
// the next waits in the queue for a place, and the queue's 429 stays
// for what does not fit; Stop cancels every running answer.
func TestParallelGenerations(t *testing.T) {
	m, made, h := parallelManager(t, 3)
	if _, err := gen(m, t.Context(), "m"); err != nil { // loads it
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	errs := make(chan error, 8)
	h.shut()
	// one at a time: five arriving at once could all count as waiting
	// before the group opens, and the queue of two would refuse three
	for i := range 5 {
		go func() { _, err := gen(m, ctx, "m"); errs <- err }()
		arrived(t, m, i+1)
	}
	waitFor(t, "three running and two waiting", func() bool {
		st := m.Status()
		return st.Running == 3 && st.Waiting == 2
	})
	if _, err := gen(m, ctx, "m"); !errors.Is(err, ErrQueueFull) {
		t.Errorf("beyond the running and the queue: %v, want ErrQueueFull", err)
	}
	h.open()
	for range 5 {
		if err := <-errs; err != nil {
			t.Errorf("generation: %v", err)
		}
	}
	for i, b := range *made {
		l, u, mo := b.Counts()
		t.Logf("backend %d: loads %d unloads %d most %d", i, l, u, mo)
	}
	if _, _, most := (*made)[0].Counts(); most != 3 {
		t.Errorf("at most %d generations ran at once, want 3", most)
	}

	// Stop cancels all of them at once
	h.shut()
	for i := range 3 {
		go func() { _, err := gen(m, ctx, "m"); errs <- err }()
		arrived(t, m, i+1)
	}
	waitFor(t, "three running", func() bool { return m.Status().Running == 3 })
	if err := m.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := <-errs; err == nil {
			t.Error("a generation went on after Stop")
		}
	}
	if st := m.Status(); st.State != StateOff || st.Running != 0 {
		t.Errorf("after Stop: %s, %d running", st.State, st.Running)
	}
}

// TestParallelGroupDrainsForAnotherModel: a request for another model
// does not wait behind an endless stream of joiners: once it waits, no
// new generation joins the group, and it loads when the group is done.
func TestParallelGroupDrainsForAnotherModel(t *testing.T) {
	m, _, h := parallelManager(t, 4)
	if _, err := gen(m, t.Context(), "a"); err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 8)
	h.shut()
	go func() { _, err := gen(m, t.Context(), "a"); errs <- err }()
	waitFor(t, "one running", func() bool { return m.Status().Running == 1 })
	other := make(chan error, 1)
	go func() { _, err := gen(m, t.Context(), "b"); other <- err }()
	waitFor(t, "the other model waiting", func() bool { return m.Status().Waiting == 1 })
	// a request for "a" now waits too, rather than joining
	go func() { _, err := gen(m, t.Context(), "a"); errs <- err }()
	waitFor(t, "two waiting", func() bool { return m.Status().Waiting == 2 })
	if st := m.Status(); st.Running != 1 {
		t.Errorf("%d running after another model asked, want 1 (no new joins)", st.Running)
	}
	h.open()
	if err := <-other; err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}

// TestOneAtATimeWithoutParallel: a
// backend whose ModelInfo.Parallel is one place still answers one request at a time.
func TestOneAtATimeWithoutParallel(t *testing.T) {
	m, made, _ := parallelManager(t, 1)
	var wg sync.WaitGroup
	for range 3 {
		wg.Add(1)
		go func() { defer wg.Done(); gen(m, t.Context(), "m") }()
	}
	wg.Wait()
	if _, _, most := (*made)[0].Counts(); most != 1 {
		t.Errorf("%d generations at once on a one-place backend", most)
	}
}

// TestParallelGroupDrainsForUnload: an unload (keep_alive 0, the page's
// Unload) does not wait behind an endless stream of joiners either: once
// it waits for the slot, no new generation joins the group, and the
// unload happens when the group is done.
func TestParallelGroupDrainsForUnload(t *testing.T) {
	m, made, h := parallelManager(t, 4)
	if _, err := gen(m, t.Context(), "a"); err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 8)
	h.shut()
	go func() { _, err := gen(m, t.Context(), "a"); errs <- err }()
	waitFor(t, "one running", func() bool { return m.Status().Running == 1 })
	unloaded := make(chan error, 1)
	go func() { unloaded <- m.Unload(t.Context(), "") }()
	waitFor(t, "the unload waiting for the slot", func() bool {
		m.mu.Lock()
		defer m.mu.Unlock()
		return m.slotWanted == 1
	})
	// a request for "a" now waits too, rather than joining
	go func() { _, err := gen(m, t.Context(), "a"); errs <- err }()
	waitFor(t, "one waiting", func() bool { return m.Status().Waiting == 1 })
	if st := m.Status(); st.Running != 1 {
		t.Errorf("%d running while an unload waits, want 1 (no new joins)", st.Running)
	}
	h.open()
	if err := <-unloaded; err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	if _, unloads, _ := (*made)[0].Counts(); unloads != 1 {
		t.Errorf("the backend was unloaded %d times, want 1", unloads)
	}
}
