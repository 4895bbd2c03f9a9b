package cpu

import (
	"errors"
	"sync"
	"testing"
)

// TestKVDiskReadAfterAdmission: the backend keeps no queue of its own
// (the service's is the one): a request that finds every place taken
// fails at once with ErrNoPlace, having read nothing of its chat's KV
// file nor taken memory for it; once a place is free it runs, reads
// the file, and resumes from it.
func TestKVDiskReadAfterAdmission(t *testing.T) {
	path := models(t)["gguf"]
	dir := t.TempDir()
	first := load(t, Options{Path: path, KVDir: dir})
	if _, _, _, err := run(t, first, diskChat()); err != nil {
		t.Fatal(err)
	}
	if err := first.Unload(t.Context()); err != nil {
		t.Fatal(err)
	}
	b := load(t, Options{Path: path, KVDir: dir, Parallel: 1})
	unblock, blocked := make(chan struct{}), make(chan struct{})
	var once sync.Once
	busy := make(chan answer, 1)
	go func() {
		req := greedy("the request that holds the only place")
		req.MaxTokens = 8
		busy <- generate(t.Context(), b, req, func(n int) {
			once.Do(func() { close(blocked) })
			<-unblock
		})
	}()
	<-blocked
	before := b.CacheStats()
	_, _, _, err := run(t, b, diskChat())
	after := b.CacheStats()
	close(unblock)
	if !errors.Is(err, ErrNoPlace) {
		t.Errorf("a request beyond the only place: %v; want ErrNoPlace at once", err)
	}
	if after.Tokens != before.Tokens || after.Bytes != before.Bytes {
		t.Errorf("a request refused a place read its KV file: the cache held %d tokens (%d bytes), then %d (%d)",
			before.Tokens, before.Bytes, after.Tokens, after.Bytes)
	}
	if a := <-busy; a.err != nil {
		t.Fatalf("the request that held the place: %v", a.err)
	}
	_, _, res, err := run(t, b, diskChat())
	if err != nil {
		t.Fatal(err)
	}
	if res.CachedTokens != res.PromptTokens-1 {
		t.Errorf("once admitted, %d of %d prompt tokens came from the disk cache, want all but the last", res.CachedTokens, res.PromptTokens)
	}
}
