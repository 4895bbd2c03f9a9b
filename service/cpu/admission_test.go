package cpu

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/npuchat/npuchat/enginekind"
	"github.com/npuchat/npuchat/service"
	"github.com/npuchat/npuchat/service/backend"
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

// TestTheServiceIsTheOneQueue: through the service, requests beyond the
// engine's places wait in the service's queue (Status.Waiting), never
// in the engine, and none ever finds the places taken (ErrNoPlace): the
// service admits at most ModelInfo.Parallel at once, the next as one
// ends, and each answers exactly as alone; an embeddings request takes
// a place as a generation does.
func TestTheServiceIsTheOneQueue(t *testing.T) {
	path := models(t)["gguf"]
	m := service.New(service.Options{QueueSize: 8, KeepAlive: -1, NewBackend: func(_ context.Context, model string, _ enginekind.Kind) (backend.Backend, error) {
		return New(Options{Path: path, Name: model, Parallel: 2}), nil
	}})
	t.Cleanup(func() { m.Close(context.Background()) })
	ask := func(ctx context.Context, text string, each func()) answer {
		req := greedy(text)
		req.Model, req.MaxTokens = "m", 6
		var a answer
		var sb strings.Builder
		_, a.err = m.Generate(ctx, req, service.GenerateOptions{}, func(tok backend.Token) error {
			sb.WriteString(tok.Text)
			if each != nil {
				each()
			}
			return nil
		})
		a.text = sb.String()
		return a
	}
	texts := []string{"one", "two", "three", "four", "five"}
	want := map[string]string{}
	for _, s := range texts {
		a := ask(t.Context(), s, nil)
		if a.err != nil {
			t.Fatalf("%s alone: %v", s, a.err)
		}
		want[s] = a.text
	}
	if st := m.Status(); st.Info == nil || st.Info.Parallel != 2 {
		t.Fatalf("status info %+v; want Parallel 2", st.Info)
	}

	// two hold both places (their clients read nothing until release)
	release := make(chan struct{})
	got := make(chan [2]string, 8)
	var errs sync.Map
	for _, s := range texts[:2] {
		started := make(chan struct{})
		var once sync.Once
		go func() {
			a := ask(t.Context(), s, func() { once.Do(func() { close(started) }); <-release })
			errs.Store(s, a.err)
			got <- [2]string{s, a.text}
		}()
		<-started
	}
	// three more and an embeddings request wait in the service's queue
	for _, s := range texts[2:] {
		go func() {
			a := ask(t.Context(), s, nil)
			errs.Store(s, a.err)
			got <- [2]string{s, a.text}
		}()
	}
	embedded := make(chan error, 1)
	go func() {
		_, _, err := m.Embed(t.Context(), "m", []string{"an embedding beside them"}, service.GenerateOptions{})
		embedded <- err
	}()
	// the queue fills as the goroutines arrive; none may end meanwhile
	// (both places are held)
	for st := m.Status(); st.Waiting != 4; st = m.Status() {
		select {
		case g := <-got:
			err, _ := errs.Load(g[0])
			close(release)
			t.Fatalf("%s ended while both places were held (%d running, %d waiting): %v", g[0], st.Running, st.Waiting, err)
		case err := <-embedded:
			close(release)
			t.Fatalf("the embeddings ended while both places were held (%d running, %d waiting): %v", st.Running, st.Waiting, err)
		default:
		}
		runtime.Gosched()
	}
	if st := m.Status(); st.Running != 2 || st.WaitingMemory != 0 {
		t.Errorf("with both places taken: %d running, %d waiting for memory; want 2 and 0", st.Running, st.WaitingMemory)
	}
	close(release)
	for range texts {
		g := <-got
		if err, _ := errs.Load(g[0]); err != nil {
			t.Errorf("%s: %v", g[0], err)
		} else if g[1] != want[g[0]] {
			t.Errorf("%s beside the others: %q, alone %q", g[0], g[1], want[g[0]])
		}
	}
	if err := <-embedded; err != nil {
		t.Errorf("embeddings: %v", err)
	}
	if st := m.Status(); st.Running != 0 || st.Waiting != 0 {
		t.Errorf("after: %d running, %d waiting", st.Running, st.Waiting)
	}
}
