package engine

import (
	"context"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/npuchat/npuchat/engine/sample"
	"github.com/npuchat/npuchat/engine/simd"
	"github.com/npuchat/npuchat/engine/simd/simdtest"
	"github.com/npuchat/npuchat/engine/testmodel"
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
	loops, workers := goroutinesIn(schedulerLoop), goroutinesIn(poolWorker)
	for range 3 {
		sc := m.NewScheduler(SchedulerOptions{})
		q := sc.Join(m.NewSession(0))
		if _, err := q.Prefill(context.Background(), seqTokens(1, 20)); err != nil {
			t.Fatal(err)
		}
		q.Leave()
		newLoops, newWorkers := newGoroutinesIn(schedulerLoop, loops), newGoroutinesIn(poolWorker, workers)
		if len(newLoops) != 1 || len(newWorkers) == 0 {
			t.Fatalf("%d new scheduler loops and %d new workers: the test does not see them", len(newLoops), len(newWorkers))
		}
		sc.Close()
		sc.Close() // twice is fine
		// Ended by Close itself: no garbage collection is asked for.
		waitEnded(t, schedulerLoop, newLoops, false)
		waitEnded(t, poolWorker, newWorkers, false)
	}
}

// TestSchedulerNewcomerWaitsOneChunkPlusOneStep: while two sequences
// stream, a newcomer's first logits come within its prompt's chunks plus
// one step, counted in scheduler steps from the step at which the
// scheduler took its request, not in time: it never waits behind the
// others' answers, and they get a token at every one of those steps.
func TestSchedulerNewcomerWaitsOneChunkPlusOneStep(t *testing.T) {
	m := kvModelOf(t, tinyShape(), LoadOptions{})
	const chunk = 8
	// a grace long enough that the streams are in every step, however
	// busy the machine
	sc := m.NewScheduler(SchedulerOptions{Chunk: chunk, Grace: 5 * time.Second})
	defer sc.Close()
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	var wg sync.WaitGroup
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
				l, err = q.Forward(ctx, sample.Argmax(l))
			}
		}()
	}
	<-started
	<-started
	for _, n := range []int{1, chunk, 3*chunk + 1} {
		prompt := seqTokens(uint64(100+n), n)
		q := sc.Join(m.NewSession(0))
		before := sc.Stats()
		if _, err := q.Prefill(context.Background(), prompt); err != nil {
			t.Fatal(err)
		}
		after := sc.Stats()
		q.Leave()
		chunks := int64((n + chunk - 1) / chunk)
		t.Logf("%d prompt tokens: first logits %d steps after the scheduler took it", n, q.waited)
		if q.waited < 1 || q.waited > chunks+1 {
			t.Errorf("a newcomer of %d prompt tokens got its first logits %d steps after the scheduler took it, want 1 to %d (%d chunks of %d, and one step)", n, q.waited, chunks+1, chunks, chunk)
		}
		// the streams kept flowing: both in each of those steps
		if decodes := after.Decodes - before.Decodes; decodes < 2*q.waited {
			t.Errorf("while a newcomer's %d tokens took %d steps, the two streams got %d tokens", n, q.waited, decodes)
		}
	}
	stop()
	wg.Wait()
}

// TestSchedulerSharedPrefixComputedOnce: prompts that start alike (the
// same system prompt), arriving together, or while another is computed
// or streams, compute their shared whole blocks once: the others copy
// them (counted in prompt tokens computed and copied), and every
// sequence decodes exactly what it decodes alone. Another scope's prompt
// shares nothing. (Each streams until all are prefilled, so that the
// count does not depend on when each arrives.)
func TestSchedulerSharedPrefixComputedOnce(t *testing.T) {
	m := kvModelOf(t, tinyShape(), LoadOptions{})
	system := seqTokens(7, 70) // 64 tokens in whole blocks
	prompts := [][]int{cat(system, seqTokens(8, 5)), cat(system, seqTokens(9, 11)), cat(system, seqTokens(10, 3)), cat(system, seqTokens(11, 6))}
	scopes := []string{"a", "a", "a", "b"}
	const steps = 6
	want := make([][]int, len(prompts))
	for i, p := range prompts {
		want[i], _ = greedyAlone(t, m, p, steps)
	}
	c := m.NewKVCache(KVCacheOptions{Budget: m.KVBytes(8192)})
	sc := m.NewScheduler(SchedulerOptions{Chunk: 8, Grace: 5 * time.Second})
	defer sc.Close()
	got := make([][]int, len(prompts))
	errs := make([]error, len(prompts))
	var wg sync.WaitGroup
	var ready sync.WaitGroup
	ready.Add(len(prompts))
	var prefilled, copied atomic.Int32
	for i, p := range prompts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := c.NewSession(0)
			if _, err := s.Resume(scopes[i], p); err != nil {
				errs[i] = err
				ready.Done()
				return
			}
			q := sc.Join(s)
			defer q.Leave()
			ready.Done()
			ready.Wait() // together
			l, err := q.Prefill(context.Background(), p)
			copied.Add(int32(q.Copied()))
			prefilled.Add(1)
			for err == nil && (len(got[i]) < steps || prefilled.Load() < int32(len(prompts))) {
				tok := sample.Argmax(l)
				if len(got[i]) < steps {
					got[i] = append(got[i], tok)
				}
				l, err = q.Forward(context.Background(), tok)
			}
			errs[i] = err
			s.Discard()
		}()
	}
	wg.Wait()
	for i := range prompts {
		if errs[i] != nil || fmt.Sprint(got[i]) != fmt.Sprint(want[i]) {
			t.Errorf("sequence %d: %v %v, alone %v", i, got[i], errs[i], want[i])
		}
	}
	total := 0
	for _, p := range prompts {
		total += len(p)
	}
	st := sc.Stats()
	t.Logf("%d prompt tokens: %+v", total, st)
	// scope a: 64 computed once, copied twice; scope b computes its own
	if int64(copied.Load()) != st.Shared {
		t.Errorf("the sequences say %d positions were copied, the scheduler %d", copied.Load(), st.Shared)
	}
	if st.Shared != 2*64 || st.Prompt != int64(total)-st.Shared {
		t.Errorf("prompts of %d tokens in all: %d computed, %d copied; want 128 copied (the system prompt's 64 whole-block tokens, for two of the three in its scope)", total, st.Prompt, st.Shared)
	}
}

// TestSchedulerEmbedBesideStreams: an embedding computed by the
// scheduler, in chunks beside two streaming sequences and a prompt, is
// bit for bit Model.Embed's, and the streams decode what they decode
// alone; it copies nothing from a sequence of the same tokens beside it.
func TestSchedulerEmbedBesideStreams(t *testing.T) {
	simdtest.Each(t, func(t *testing.T, lvl simd.Level) {
		m := batchModel(t, testmodel.Q4_0, lvl, LoadOptions{})
		prompts := batchPrompts()
		doc := cat(prompts[2], prompts[2]) // 90 tokens: several chunks
		want, err := m.Embed(context.Background(), doc)
		if err != nil {
			t.Fatal(err)
		}
		const steps = 12
		wantTok := make([][]int, 2)
		for i := range wantTok {
			wantTok[i], _ = greedyAlone(t, m, [][]int{prompts[0], doc}[i], steps)
		}
		c := m.NewKVCache(KVCacheOptions{Budget: m.KVBytes(4096)})
		sc := m.NewScheduler(SchedulerOptions{Chunk: 8})
		defer sc.Close()
		got := make([][]int, 2)
		errs := make([]error, 2)
		var wg sync.WaitGroup
		started := make(chan struct{})
		for i := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				s := c.NewSession(0)
				p := [][]int{prompts[0], doc}[i]
				s.Resume("", p)
				q := sc.Join(s)
				defer q.Leave()
				l, err := q.Prefill(context.Background(), p)
				for err == nil && len(got[i]) < steps {
					if i == 0 && len(got[i]) == 2 {
						close(started)
					}
					tok := sample.Argmax(l)
					got[i] = append(got[i], tok)
					l, err = q.Forward(context.Background(), tok)
				}
				errs[i] = err
			}()
		}
		<-started
		s := c.NewSession(0)
		q := sc.Join(s)
		vec, err := q.Embed(context.Background(), doc)
		q.Leave()
		s.Discard()
		wg.Wait()
		if err != nil || len(vec) != len(want) {
			t.Fatalf("embed through the scheduler: %v, %d values", err, len(vec))
		}
		for j := range want {
			if math.Float32bits(vec[j]) != math.Float32bits(want[j]) {
				t.Fatalf("embedding value %d: %v beside streams, %v alone", j, vec[j], want[j])
			}
		}
		for i := range got {
			if errs[i] != nil || fmt.Sprint(got[i]) != fmt.Sprint(wantTok[i]) {
				t.Errorf("stream %d beside the embedding: %v %v, alone %v", i, got[i], errs[i], wantTok[i])
			}
		}
	})
}
