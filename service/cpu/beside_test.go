package cpu

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/npuchat/npuchat/service/backend"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// shortBeside starts, on b, a request whose client stops reading after
// its second piece of text (holding its KV memory) until release is
// closed, then req beside it; it returns req's answer and the held
// request's.
func shortBeside(t *testing.T, b *Backend, req *backend.Request, release <-chan struct{}) (got, held <-chan answer) {
	t.Helper()
	blocked := make(chan struct{})
	var once sync.Once
	heldc := make(chan answer, 1)
	go func() {
		hold := greedy("the one whose client stops reading")
		hold.MaxTokens = 10 // within its first allocation: it never waits itself
		heldc <- generate(t.Context(), b, hold, func(n int) {
			if n == 2 {
				once.Do(func() { close(blocked) })
				<-release
			}
		})
	}()
	<-blocked
	gotc := make(chan answer, 1)
	go func() { gotc <- generate(t.Context(), b, req, nil) }()
	return gotc, heldc
}

// TestKVShortMidAnswerWaits: an answer whose keys and values outgrow
// what the KV budget leaves beside another request (one whose client
// stopped reading, holding its memory) waits for it, and is never ended
// there as "length" (a prefix of its answer the client cannot tell from
// its own max_tokens); when the other ends, it goes on, and answers
// exactly as alone.
func TestKVShortMidAnswerWaits(t *testing.T) {
	path := models(t)["gguf"]
	probe := load(t, Options{Path: path})
	per := probe.kv.BytesPerToken()
	b := load(t, Options{Path: path, Parallel: 2, KVBudget: 400 * per})
	req := greedy("tell me a long story")
	req.MaxTokens, req.MemoryWait = 200, time.Hour
	want := generate(t.Context(), b, req, nil)
	if want.err != nil || len(want.ids) < 150 {
		t.Fatalf("alone: %d tokens (%v), want a long answer", len(want.ids), want.err)
	}
	b.kv.Clear()
	waiting := make(chan struct{})
	var once sync.Once
	b.run.onWait = func() { once.Do(func() { close(waiting) }) }

	release := make(chan struct{})
	got, held := shortBeside(t, b, req, release)
	select {
	case a := <-got:
		close(release)
		t.Fatalf("the answer short of KV memory did not wait: %d tokens, finish %q, %v", len(a.ids), a.finish, a.err)
	case <-waiting:
	}
	close(release)
	if h := <-held; h.err != nil {
		t.Errorf("the request holding the memory: %v", h.err)
	}
	if a := <-got; a.err != nil || a.text != want.text || a.finish != want.finish {
		t.Errorf("the answer that waited for KV memory: %d tokens, finish %q (%v); alone %d tokens, %q", len(a.ids), a.finish, a.err, len(want.ids), want.finish)
	}
}

// TestKVShortMidAnswerFailsAfterItsWait: an answer short of KV memory
// that no request beside it frees within its MemoryWait fails with
// backend.ErrKVMemoryFull (HTTP 503, Retry-After), having sent a prefix
// of its alone answer: never a finish reason; the request holding the
// memory then goes on.
func TestKVShortMidAnswerFailsAfterItsWait(t *testing.T) {
	path := models(t)["gguf"]
	probe := load(t, Options{Path: path})
	per := probe.kv.BytesPerToken()
	b := load(t, Options{Path: path, Parallel: 2, KVBudget: 400 * per})
	req := greedy("tell me a long story")
	req.MaxTokens, req.MemoryWait = 200, time.Millisecond
	want := generate(t.Context(), b, req, nil)
	b.kv.Clear()

	release := make(chan struct{})
	got, held := shortBeside(t, b, req, release)
	a := <-got
	close(release)
	if !errors.Is(a.err, backend.ErrKVMemoryFull) || a.finish != "" || len(a.ids) == 0 ||
		fmt.Sprint(a.ids) != fmt.Sprint(want.ids[:min(len(a.ids), len(want.ids))]) {
		t.Errorf("short of KV memory past the wait: %v, finish %q after %d tokens; want ErrKVMemoryFull, no finish, a prefix of the %d alone",
			a.err, a.finish, len(a.ids), len(want.ids))
	}
	if h := <-held; h.err != nil {
		t.Errorf("the request holding the memory: %v", h.err)
	}
}

// TestKVPressureNeverCutsAnswers: many requests at once on a KV budget
// that holds two or three of them, greedy and constrained to a JSON
// schema: every answer is its alone answer exactly, or an error that
// says the memory was short (backend.ErrKVMemoryFull); never a prefix
// ended as "length", never a schema's JSON cut short.
func TestKVPressureNeverCutsAnswers(t *testing.T) {
	probe := toolModel(t)
	per := probe.kv.BytesPerToken()
	b := toolModelWith(t, Options{Parallel: 4, KVBudget: 700 * per})
	schema := `{"type":"object","properties":{"city":{"type":"string","maxLength":40},"note":{"type":"string","maxLength":200}},"required":["city","note"],"additionalProperties":false}`
	v := validator(t, schema)
	var reqs []*backend.Request
	for i := range 8 {
		r := greedy(fmt.Sprintf("question %d: tell me a long story about the number %d", i, i*7))
		r.MaxTokens = 240
		if i%2 == 1 {
			r.Format = &backend.Format{Type: backend.FormatSchema, Schema: json.RawMessage(schema)}
			r.MaxTokens = 0 // the schema bounds it
		}
		reqs = append(reqs, r)
	}
	want := make([]answer, len(reqs))
	for i, r := range reqs {
		if want[i] = generate(t.Context(), b, r, nil); want[i].err != nil {
			t.Fatalf("request %d alone: %v", i, want[i].err)
		}
		if r.Format != nil {
			if err := validate(v, want[i].text); err != nil {
				t.Fatalf("request %d alone: %q: %v", i, want[i].text, err)
			}
		}
	}
	b.kv.Clear()

	got := make([]answer, len(reqs))
	var wg sync.WaitGroup
	// the backend queues nothing: four at a time, as the service admits
	// them, the next as one ends
	places := make(chan struct{}, b.Info().Parallel)
	for i, r := range reqs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			places <- struct{}{}
			defer func() { <-places }()
			got[i] = generate(t.Context(), b, r, nil)
		}()
	}
	wg.Wait()
	refused := 0
	for i, g := range got {
		w := want[i]
		switch {
		case g.err != nil:
			refused++
			if !errors.Is(g.err, backend.ErrKVMemoryFull) || g.finish != "" {
				t.Errorf("request %d beside others: %v (finish %q); want its alone answer or ErrKVMemoryFull", i, g.err, g.finish)
			}
		case g.text != w.text || g.finish != w.finish:
			t.Errorf("request %d beside others: %d tokens, finish %q; alone %d tokens, %q", i, len(g.ids), g.finish, len(w.ids), w.finish)
		}
		if g.err == nil && reqs[i].Format != nil {
			if err := validate(v, g.text); err != nil {
				t.Errorf("request %d's JSON beside others: %q: %v", i, g.text, err)
			}
		}
	}
	t.Logf("%d of %d refused for KV memory, the others answered as alone", refused, len(reqs))
}

// TestEmbedBesideAStream: embeddings asked while an answer streams (its
// client not reading, so it holds its place) are computed at once, in a
// place of their own, without waiting for the answer to end; the answer
// then goes on exactly as alone.
func TestEmbedBesideAStream(t *testing.T) {
	b := load(t, Options{Path: models(t)["gguf"], Parallel: 2})
	req := greedy("the stream beside the embeddings")
	req.MaxTokens = 12
	want := generate(t.Context(), b, req, nil)
	wantVec, _, err := b.Embed(t.Context(), []string{"a cat", "a dog"})
	if err != nil {
		t.Fatal(err)
	}
	b.kv.Clear()

	unblock, blocked := make(chan struct{}), make(chan struct{})
	var once sync.Once
	stream := make(chan answer, 1)
	go func() {
		stream <- generate(t.Context(), b, req, func(n int) {
			if n == 3 {
				once.Do(func() { close(blocked) })
				<-unblock
			}
		})
	}()
	<-blocked
	type result struct {
		vecs [][]float32
		err  error
	}
	done := make(chan result, 1)
	go func() {
		v, _, err := b.Embed(t.Context(), []string{"a cat", "a dog"})
		done <- result{v, err}
	}()
	var got result
	select {
	case got = <-done:
	case <-time.After(30 * time.Second):
		close(unblock)
		got = <-done
		t.Errorf("the embeddings waited for the answer streaming beside them to end")
	}
	select {
	case <-unblock:
	default:
		close(unblock)
	}
	if got.err != nil || len(got.vecs) != 2 || fmt.Sprint(got.vecs) != fmt.Sprint(wantVec) {
		t.Errorf("embeddings beside a stream: %v, %d vectors; want those computed alone", got.err, len(got.vecs))
	}
	if a := <-stream; a.err != nil || a.text != want.text {
		t.Errorf("the stream beside the embeddings: %q %v, alone %q", a.text, a.err, want.text)
	}
}

// TestSharedSystemPromptComputedOnce: a request whose long system prompt
// is the one of an answer streaming beside it (not yet kept in the KV
// cache: it has not ended) copies that prefix's keys and values instead
// of computing them again, and answers exactly as alone; a request of
// another cache scope computes its own.
func TestSharedSystemPromptComputedOnce(t *testing.T) {
	b := load(t, Options{Path: models(t)["gguf"], Parallel: 3})
	system := strings.Repeat("You are a careful assistant who answers about cats, dogs and trees. ", 12)
	ask := func(q string, n int) *backend.Request {
		return &backend.Request{Messages: []backend.Message{{Role: "system", Content: system}, {Role: "user", Content: q}}, MaxTokens: n}
	}
	first, second := ask("tell me a long story", 200), ask("and a short one", 10)
	want := generate(t.Context(), b, second, nil)
	ids, err := b.Prompt(second)
	if err != nil {
		t.Fatal(err)
	}
	b.kv.Clear()
	before := b.SchedulerStats()

	started := make(chan struct{})
	var once sync.Once
	streaming := make(chan answer, 1)
	go func() {
		streaming <- generate(t.Context(), b, first, func(n int) {
			if n == 3 {
				once.Do(func() { close(started) })
			}
		})
	}()
	<-started
	mid := b.SchedulerStats()
	got := generate(t.Context(), b, second, nil)
	after := b.SchedulerStats()
	if a := <-streaming; a.err != nil {
		t.Fatal(a.err)
	}
	if got.err != nil || got.text != want.text {
		t.Errorf("beside a stream of the same system prompt: %q %v, alone %q", got.text, got.err, want.text)
	}
	if got.cached != int(after.Shared-mid.Shared) {
		t.Errorf("the answer says %d prompt tokens came from a cache, %d were copied from the stream beside", got.cached, after.Shared-mid.Shared)
	}
	computed := (after.Prompt - mid.Prompt)
	t.Logf("prompt of %d tokens: %d computed while the other streamed, %d copied; before %+v", len(ids), computed, after.Shared-mid.Shared, before)
	if after.Shared-mid.Shared < int64(len(ids))/2 || computed > int64(len(ids))/2 {
		t.Errorf("a prompt of %d tokens sharing its system prompt with the stream beside: %d computed, %d copied; want most of it copied", len(ids), computed, after.Shared-mid.Shared)
	}

	// another scope: nothing shared
	b.kv.Clear()
	started = make(chan struct{})
	once = sync.Once{}
	go func() {
		streaming <- generate(t.Context(), b, first, func(n int) {
			if n == 3 {
				once.Do(func() { close(started) })
			}
		})
	}()
	<-started
	mid = b.SchedulerStats()
	other := ask("and a short one", 10)
	other.CacheScope = "another client"
	if a := generate(t.Context(), b, other, nil); a.err != nil || a.text != want.text {
		t.Errorf("another scope: %q %v, want %q", a.text, a.err, want.text)
	}
	after = b.SchedulerStats()
	<-streaming
	if after.Shared != mid.Shared {
		t.Errorf("a prompt of another cache scope copied %d tokens from the stream beside", after.Shared-mid.Shared)
	}
}

// validate checks text against the schema v.
func validate(v *jsonschema.Schema, text string) error {
	inst, err := jsonschema.UnmarshalJSON(strings.NewReader(text))
	if err != nil {
		return fmt.Errorf("not JSON: %w", err)
	}
	return v.Validate(inst)
}
