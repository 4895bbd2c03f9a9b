package service

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/npuchat/npuchat/enginekind"
	"github.com/npuchat/npuchat/service/backend"
	"github.com/npuchat/npuchat/service/backend/fake"
)

// The seams of admission that failed before: an unload starved by the
// requests joining a running group, and a wakeup lost when a place
// freed while another request was being admitted. These run in a
// synctest bubble: synctest.Wait returns once every request is blocked
// for good, so a state the tests read then is where the service stays
// (a request waiting beside a free place would wait forever), not a
// moment of a race.

// request is one generation started by a test, with its own context.
type request struct {
	cancel context.CancelFunc
	done   chan error
}

// start begins a generation of "a" on m; with ticket it first takes a
// place in the queue (Reserve), as the web layer does once the body
// has arrived.
func start(t *testing.T, m *Manager, ticket bool) *request {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	r := &request{cancel: cancel, done: make(chan error, 1)}
	var opts GenerateOptions
	if ticket {
		tk, err := m.Reserve()
		if err != nil {
			t.Fatalf("Reserve: %v", err)
		}
		opts.Ticket = tk
	}
	go func() {
		defer opts.Ticket.Release()
		_, err := m.Generate(ctx, chat("a", "hi"), opts, func(backend.Token) error { return nil })
		r.done <- err
	}()
	return r
}

// counts checks the service's one count of its requests once every one
// of them is blocked for good.
func counts(t *testing.T, m *Manager, what string, running, waiting int) {
	t.Helper()
	synctest.Wait()
	if st := m.Status(); st.Running != running || st.Waiting != waiting {
		t.Fatalf("%s: %d running, %d waiting; want %d and %d", what, st.Running, st.Waiting, running, waiting)
	}
}

// TestUnloadWhileRequestsWait: an Unload asked while a group of answers
// runs and more requests wait is neither starved by them (no request
// joins the group once it waits) nor loses them: it unloads the model
// once the group has drained, and every waiting request then runs on
// the model loaded again, none on the unloaded backend.
func TestUnloadWhileRequestsWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, made, h := parallelManager(t, 2)
		if _, err := gen(m, t.Context(), "a"); err != nil { // loads it
			t.Fatal(err)
		}
		h.shut()
		running := []*request{start(t, m, false), start(t, m, false)}
		counts(t, m, "the group full", 2, 0)
		unloaded := make(chan error, 1)
		go func() { unloaded <- m.Unload(t.Context(), "") }()
		synctest.Wait()
		waiting := []*request{start(t, m, true), start(t, m, false)}
		counts(t, m, "an unload and two requests waiting", 2, 2)
		// a place frees in the group: it stays free, for the unload
		running[0].cancel()
		if err := <-running[0].done; !errors.Is(err, context.Canceled) {
			t.Fatalf("the cancelled answer: %v", err)
		}
		counts(t, m, "a place freed while an unload waits", 1, 2)
		if _, unloads, _ := (*made)[0].Counts(); unloads != 0 {
			t.Fatalf("unloaded under a running answer")
		}
		h.open()
		if err := <-running[1].done; err != nil {
			t.Errorf("the answer that ran to its end: %v", err)
		}
		if err := <-unloaded; err != nil {
			t.Fatalf("Unload: %v", err)
		}
		for i, r := range waiting {
			if err := <-r.done; err != nil {
				t.Errorf("waiting request %d: %v", i, err)
			}
		}
		counts(t, m, "all done", 0, 0)
		if _, unloads, _ := (*made)[0].Counts(); unloads != 1 {
			t.Errorf("the first backend was unloaded %d times, want 1", unloads)
		}
		// the unload came first or between the waiting requests: those
		// after it loaded the model again, and none failed on an
		// unloaded backend (the fake refuses that)
		ran := 0
		for _, b := range *made {
			ran += len(b.Requests())
		}
		if ran != 5 {
			t.Errorf("%d generations ran on the backends, want 5 (the load's, two running, two waiting)", ran)
		}
	})
}

// TestAPlaceFreedWhileAnotherIsAdmitted: a running answer ends (a place
// in the group, or the slot, frees) while another request is being
// admitted, in every order: the request already waiting, or the one
// arriving, takes the place; none waits beside a free place.
func TestAPlaceFreedWhileAnotherIsAdmitted(t *testing.T) {
	for _, tc := range []struct {
		name     string
		parallel int
		// order frees the place (end) and admits the newcomer
		// (arrive) in one order or another
		order func(end func(), arrive func())
	}{
		{"end then arrive, group", 2, func(end, arrive func()) { end(); arrive() }},
		{"arrive then end, group", 2, func(end, arrive func()) { arrive(); end() }},
		{"end then arrive, one at a time", 1, func(end, arrive func()) { end(); arrive() }},
		{"arrive then end, one at a time", 1, func(end, arrive func()) { arrive(); end() }},
	} {
		for _, ticket := range []bool{false, true} {
			name := tc.name
			if ticket {
				name += ", reserved first"
			}
			t.Run(name, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					m, _, h := parallelManager(t, tc.parallel)
					if _, err := gen(m, t.Context(), "a"); err != nil {
						t.Fatal(err)
					}
					h.shut()
					var running []*request
					for range tc.parallel {
						running = append(running, start(t, m, false))
					}
					counts(t, m, "every place taken", tc.parallel, 0)
					first := start(t, m, ticket)
					counts(t, m, "one waiting", tc.parallel, 1)
					var second *request
					tc.order(running[0].cancel, func() { second = start(t, m, ticket) })
					if err := <-running[0].done; !errors.Is(err, context.Canceled) {
						t.Fatalf("the cancelled answer: %v", err)
					}
					counts(t, m, "a place freed, two asked for it", tc.parallel, 1)
					h.open()
					for i, r := range append(running[1:], first, second) {
						if err := <-r.done; err != nil {
							t.Errorf("request %d: %v", i, err)
						}
					}
					counts(t, m, "all done", 0, 0)
				})
			})
		}
	}
}

// TestWaitingForMemoryIsReported: the requests a backend holds waiting
// for memory (the one wait after admission, backend.MemoryWaiter) are
// reported in the status beside the running ones, from the backend.
func TestWaitingForMemoryIsReported(t *testing.T) {
	m, made, h := parallelManager(t, 2)
	if _, err := gen(m, t.Context(), "a"); err != nil {
		t.Fatal(err)
	}
	h.shut()
	r := start(t, m, false)
	waitFor(t, "one running", func() bool { return m.Status().Running == 1 })
	(*made)[0].memWaits.Store(1)
	st := m.Status()
	if st.WaitingMemory != 1 || st.Running != 1 || st.Waiting != 0 {
		t.Errorf("one running request waiting for memory: running %d, waiting %d, waiting for memory %d", st.Running, st.Waiting, st.WaitingMemory)
	}
	// /api/status is this status as JSON: the counts and the limit, once
	js, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"running":1,`, `"waiting":0,`, `"waiting_memory":1,`, `"parallel":2`} {
		if n := strings.Count(string(js), want); n != 1 {
			t.Errorf("%s appears %d times in the status: %s", want, n, js)
		}
	}
	(*made)[0].memWaits.Store(0)
	h.open()
	if err := <-r.done; err != nil {
		t.Fatal(err)
	}
	if st := m.Status(); st.WaitingMemory != 0 {
		t.Errorf("after: %d waiting for memory", st.WaitingMemory)
	}
}

// TestTheServiceDecidesTheMemoryWait: how long an admitted request may
// wait for memory the requests beside it hold is the service's choice
// (Options.MemoryWait, backend.DefaultMemoryWait by default), set on
// every request the backend gets, whatever the caller put there.
func TestTheServiceDecidesTheMemoryWait(t *testing.T) {
	for _, tc := range []struct {
		name string
		opt  time.Duration
		want time.Duration
	}{
		{"default", 0, backend.DefaultMemoryWait},
		{"set", 7 * time.Second, 7 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var be *fake.Backend
			m := New(Options{MemoryWait: tc.opt, KeepAlive: -1, NewBackend: func(_ context.Context, model string, kind enginekind.Kind) (backend.Backend, error) {
				be = fake.New(fake.Options{Name: model, Kind: kind})
				return be, nil
			}})
			t.Cleanup(func() { m.Close(context.Background()) })
			req := chat("a", "hi")
			req.MemoryWait = time.Hour // not the caller's to decide
			if _, err := m.Generate(t.Context(), req, GenerateOptions{}, func(backend.Token) error { return nil }); err != nil {
				t.Fatal(err)
			}
			if got := be.Requests(); len(got) != 1 || got[0].MemoryWait != tc.want {
				t.Errorf("the backend got %+v; want one request with MemoryWait %s", got, tc.want)
			}
			if req.MemoryWait != time.Hour {
				t.Errorf("the caller's request changed: MemoryWait %s", req.MemoryWait)
			}
		})
	}
}
