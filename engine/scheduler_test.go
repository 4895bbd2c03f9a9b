package engine

import (
	"context"
	"runtime"
	"testing"
	"time"
)

// TestSpareRoomLeavesRoomForOthers: the room a session takes beyond its
// positions (to grow into without copying its slabs) is at most half of
// what is free: a second session's prompt and answer find room beside
// the first's, rather than waiting for it to end.
func TestSpareRoomLeavesRoomForOthers(t *testing.T) {
	m := kvModelOf(t, tinyShape(), LoadOptions{})
	per := m.kvBytesPerPos()
	c := m.NewKVCache(KVCacheOptions{Budget: 256 * per})
	a, b := c.NewSession(0), c.NewSession(0)
	if _, err := a.Prefill(seqTokens(1, 33)); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Prefill(seqTokens(2, 33)); err != nil {
		t.Fatalf("the second prompt beside the first: %v (the first holds %d positions for 33)", err, a.kv.capPos)
	}
	for i := range 40 { // both answers fit beside each other
		for _, s := range []*Session{a, b} {
			if _, err := s.Forward(1 + i); err != nil {
				t.Fatalf("answer token %d at position %d: %v (room %d and %d positions)", i, s.Pos(), err, a.kv.capPos, b.kv.capPos)
			}
		}
	}
}

// TestSchedulerCloseEndsItsGoroutines: Close ends the scheduler's loop
// and its threads at once, not at a later garbage collection.
func TestSchedulerCloseEndsItsGoroutines(t *testing.T) {
	m := kvModelOf(t, tinyShape(), LoadOptions{Threads: 3})
	before := runtime.NumGoroutine()
	for range 3 {
		sc := m.NewScheduler(SchedulerOptions{})
		q := sc.Join(m.NewSession(0))
		if _, err := q.Prefill(context.Background(), seqTokens(1, 20)); err != nil {
			t.Fatal(err)
		}
		q.Leave()
		sc.Close()
		sc.Close() // twice is fine
	}
	n := runtime.NumGoroutine()
	for deadline := time.Now().Add(5 * time.Second); n > before && time.Now().Before(deadline); n = runtime.NumGoroutine() {
		time.Sleep(10 * time.Millisecond)
	}
	if n > before {
		t.Errorf("%d goroutines after three schedulers closed, %d before", n, before)
	}
}
