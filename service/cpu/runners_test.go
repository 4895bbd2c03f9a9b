package cpu

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/npuchat/npuchat/engine"
	"github.com/npuchat/npuchat/service/backend"
)

// testRunners are runners of n places with n requests running, and
// their sessions.
func testRunners(t *testing.T, n int) (*runners, []*engine.Session) {
	t.Helper()
	r := newRunners(n, nil, &engine.Session{})
	for range n - 1 {
		r.free = append(r.free, &engine.Session{})
	}
	var sess []*engine.Session
	for range n {
		s, err := r.enter()
		if err != nil {
			t.Fatal(err)
		}
		sess = append(sess, s)
	}
	return r, sess
}

// errShort stands for the engine's ErrKVBudget in these tests.
var errShort = engine.ErrKVBudget

// TestWaitRoomSeesAnEndBeforeItWaits: a request that found the KV memory
// short, and whose neighbour ended before it began to wait, tries again
// at once (the memory may be free now) rather than waiting for another
// request to end; with nothing ended since and nobody else running, it
// fails at once with ErrKVMemoryFull (no one will free memory).
func TestWaitRoomSeesAnEndBeforeItWaits(t *testing.T) {
	for _, n := range []int{2, 3} {
		t.Run("", func(t *testing.T) {
			r, sess := testRunners(t, n)
			seen := r.ends() // the first request's attempt finds the memory short
			r.leave(sess[1]) // its neighbour ends before it waits
			if err := r.waitRoom(t.Context(), &roomWait{bound: time.Hour}, seen, errShort); err != nil {
				t.Errorf("%d places: waitRoom after a neighbour ended = %v; want nil (try again)", n, err)
			}
			for _, s := range sess[2:] {
				r.leave(s)
			}
			if err := r.waitRoom(t.Context(), &roomWait{bound: time.Hour}, r.ends(), errShort); !errors.Is(err, backend.ErrKVMemoryFull) {
				t.Errorf("%d places: waitRoom alone = %v; want ErrKVMemoryFull", n, err)
			}
		})
	}
}

// TestWaitRoomIsBounded: a request short of KV memory waits for a
// request beside it to end (then tries again), for at most the bound in
// all over its tries, and then fails with ErrKVMemoryFull; when all the
// others wait too, the last to find the memory short fails at once, and
// the others go on waiting for it to end. How many wait is reported
// (waitingForMemory, for the service's status). (synctest's clock: the bound
// is exact.)
func TestWaitRoomIsBounded(t *testing.T) {
	const bound = 30 * time.Second
	t.Run("an end wakes it", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			r, sess := testRunners(t, 2)
			w := &roomWait{bound: bound}
			done := make(chan error)
			go func() { done <- r.waitRoom(t.Context(), w, r.ends(), errShort) }()
			synctest.Wait() // waiting
			if n := r.waitingForMemory(); n != 1 {
				t.Errorf("one request waiting for KV memory, reported %d", n)
			}
			time.Sleep(bound / 2)
			r.leave(sess[1])
			if err := <-done; err != nil {
				t.Fatalf("woken by an end: %v; want nil", err)
			}
			if n := r.waitingForMemory(); n != 0 {
				t.Errorf("none waiting for KV memory any more, reported %d", n)
			}
			// tried again, short again, with a new neighbour that holds on:
			// the rest of the bound, not a new one
			r.enter()
			start := time.Now()
			err := r.waitRoom(t.Context(), w, r.ends(), errShort)
			if !errors.Is(err, backend.ErrKVMemoryFull) || !errors.Is(err, engine.ErrKVBudget) || time.Since(start) != bound/2 {
				t.Errorf("after %s more: %v; want ErrKVMemoryFull (saying ErrKVBudget) after %s", time.Since(start), err, bound/2)
			}
		})
	})
	t.Run("all wait", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			r, sess := testRunners(t, 3)
			done := make(chan error, 2)
			for range 2 {
				go func() { done <- r.waitRoom(t.Context(), &roomWait{bound: bound}, r.ends(), errShort) }()
			}
			synctest.Wait() // two wait
			start := time.Now()
			if err := r.waitRoom(t.Context(), &roomWait{bound: bound}, r.ends(), errShort); !errors.Is(err, backend.ErrKVMemoryFull) || time.Since(start) != 0 {
				t.Errorf("the third short of memory, the two others waiting: %v after %s; want ErrKVMemoryFull at once", err, time.Since(start))
			}
			r.leave(sess[2]) // it gives its memory up
			for range 2 {
				if err := <-done; err != nil {
					t.Errorf("a waiting request when the third ended: %v; want nil", err)
				}
			}
		})
	})
	t.Run("cancelled", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			r, _ := testRunners(t, 2)
			ctx, cancel := context.WithCancel(t.Context())
			done := make(chan error)
			go func() { done <- r.waitRoom(ctx, &roomWait{bound: bound}, r.ends(), errShort) }()
			synctest.Wait()
			cancel()
			if err := <-done; !errors.Is(err, context.Canceled) {
				t.Errorf("cancelled: %v", err)
			}
		})
	})
}
