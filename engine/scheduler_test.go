package engine

import (
	"context"
	"runtime"
	"sync"
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

// TestSchedulerNewcomerWaitsOneChunkPlusOneStep: while two sequences
// stream, a newcomer's first logits come within its prompt's chunks plus
// one step (the one running when it asked), counted in scheduler steps,
// not time: it never waits behind the others' answers, and they get a
// token at every one of those steps meanwhile.
func TestSchedulerNewcomerWaitsOneChunkPlusOneStep(t *testing.T) {
	m := kvModelOf(t, tinyShape(), LoadOptions{})
	const chunk = 8
	sc := m.NewScheduler(SchedulerOptions{Chunk: chunk})
	defer sc.Close()
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	var wg sync.WaitGroup
	var mu sync.Mutex
	tokens := map[int]int{} // streamed tokens per sequence
	started := make(chan struct{}, 2)
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			q := sc.Join(m.NewSession(0))
			defer q.Leave()
			l, err := q.Prefill(ctx, seqTokens(uint64(i), 12))
			started <- struct{}{}
			for err == nil {
				mu.Lock()
				tokens[i]++
				mu.Unlock()
				l, err = q.Forward(ctx, argmaxF(l))
			}
		}()
	}
	<-started
	<-started
	for _, n := range []int{1, chunk, 3*chunk + 1} {
		prompt := seqTokens(uint64(100+n), n)
		q := sc.Join(m.NewSession(0))
		mu.Lock()
		before, streamed := sc.Stats(), tokens[0]+tokens[1]
		mu.Unlock()
		if _, err := q.Prefill(context.Background(), prompt); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		after, streamedAfter := sc.Stats(), tokens[0]+tokens[1]
		mu.Unlock()
		q.Leave()
		steps := after.Steps - before.Steps
		t.Logf("%d prompt tokens: first logits after %d steps", n, steps)
		chunks := int64((n + chunk - 1) / chunk)
		if steps > chunks+1 {
			t.Errorf("a newcomer of %d prompt tokens got its first logits %d steps after it asked, want at most %d (%d chunks of %d, and one step)", n, steps, chunks+1, chunks, chunk)
		}
		if got := after.Prompt - before.Prompt; got < int64(n) {
			t.Errorf("%d prompt tokens computed for a prompt of %d", got, n)
		}
		// the streams kept flowing: a token each at every step but the
		// one that was running (its tokens may be counted either side)
		if flowed := streamedAfter - streamed; int64(flowed) < 2*(steps-1)-2 {
			t.Errorf("while a newcomer's %d tokens were computed in %d steps, the two streams got %d tokens", n, steps, flowed)
		}
	}
	stop()
	wg.Wait()
}
