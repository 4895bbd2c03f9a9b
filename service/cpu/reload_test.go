package cpu

import (
	"context"
	"runtime"
	"testing"
	"time"
)

// settledGoroutines waits for the goroutine count to come down to at
// most want, and returns it; after a minute (a bound on a failure, not a
// measure) it returns the count then.
func settledGoroutines(want int) int {
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(time.Minute)
	n := runtime.NumGoroutine()
	for ; n > want; n = runtime.NumGoroutine() {
		select {
		case <-tick.C:
		case <-deadline:
			return n
		}
	}
	return n
}

// TestReloadLeavesNoGoroutines: loading, answering, embedding and unloading a
// model, again and again (and loading it over itself), leaves no
// goroutine running: the scheduler's loop and its threads end with the
// model, not at some later garbage collection.
func TestReloadLeavesNoGoroutines(t *testing.T) {
	path := models(t)["gguf"]
	b := New(Options{Path: path, Threads: 3, KVDir: t.TempDir()})
	before := runtime.NumGoroutine()
	ctx := context.Background()
	for round := range 3 {
		if err := b.Load(ctx, nil); err != nil {
			t.Fatal(err)
		}
		if round == 1 { // loaded over itself
			if err := b.Load(ctx, nil); err != nil {
				t.Fatal(err)
			}
		}
		req := greedy("hello")
		req.MaxTokens = 4
		if a := generate(ctx, b, req, nil); a.err != nil {
			t.Fatal(a.err)
		}
		if _, _, err := b.Embed(ctx, []string{"a cat"}); err != nil {
			t.Fatal(err)
		}
		if err := b.Unload(ctx); err != nil {
			t.Fatal(err)
		}
		if n := settledGoroutines(before); n > before {
			buf := make([]byte, 1<<16)
			t.Fatalf("round %d: %d goroutines after unloading, %d before loading\n%s", round, n, before, buf[:runtime.Stack(buf, true)])
		}
	}
}
