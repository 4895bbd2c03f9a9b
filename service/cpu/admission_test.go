package cpu

import (
	"runtime"
	"sync"
	"testing"

	"github.com/npuchat/npuchat/service/backend"
)

// TestKVDiskReadAfterAdmission: a request waiting for a place (every
// place is taken) has not read its chat's KV file, nor taken memory for
// it: that happens once it has its place, and it then resumes from it.
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
	waiting := make(chan backend.Result, 1)
	go func() {
		_, _, res, err := run(t, b, diskChat())
		if err != nil {
			t.Error(err)
		}
		waiting <- res
	}()
	for b.run.queued.Load() == 0 { // the second request waits for a place
		runtime.Gosched()
	}
	after := b.CacheStats()
	close(unblock)
	if after.Tokens != before.Tokens || after.Bytes != before.Bytes {
		t.Errorf("a request waiting for a place read its KV file: the cache held %d tokens (%d bytes), then %d (%d)",
			before.Tokens, before.Bytes, after.Tokens, after.Bytes)
	}
	<-busy
	if res := <-waiting; res.CachedTokens != res.PromptTokens-1 {
		t.Errorf("once admitted, %d of %d prompt tokens came from the disk cache, want all but the last", res.CachedTokens, res.PromptTokens)
	}
}
