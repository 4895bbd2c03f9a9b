package cpu

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/npuchat/npuchat/service/backend"
)

// TestKVShortMidAnswerEndsWithLength: an answer whose keys and values
// outgrow what the KV budget leaves beside another request (here one
// whose client stopped reading, holding its memory) ends there with
// finish_reason "length" and no error, without waiting for the other to
// end; the other then goes on, and ends the same way or by itself.
func TestKVShortMidAnswerEndsWithLength(t *testing.T) {
	path := models(t)["gguf"]
	probe := load(t, Options{Path: path})
	per := probe.kv.BytesPerToken()
	b := load(t, Options{Path: path, Parallel: 2, KVBudget: 400 * per})

	unblock := make(chan struct{})
	blocked := make(chan struct{})
	var once sync.Once
	stuck := make(chan answer, 1)
	go func() {
		req := greedy("the one whose client stops reading")
		req.MaxTokens = 300
		stuck <- generate(t.Context(), b, req, func(n int) {
			if n == 2 {
				once.Do(func() { close(blocked) })
				<-unblock
			}
		})
	}()
	<-blocked
	done := make(chan answer, 1)
	go func() {
		req := greedy("tell me a long story")
		req.MaxTokens = 1000
		done <- generate(t.Context(), b, req, nil)
	}()
	var a answer
	select {
	case a = <-done:
	case <-time.After(30 * time.Second):
		close(unblock)
		a = <-done
		t.Errorf("the answer short of KV memory waited for the request beside it to end")
	}
	if a.err != nil || a.finish != backend.FinishLength || len(a.ids) < 10 {
		t.Errorf("the answer short of KV memory: %v, finish %q after %d tokens; want length", a.err, a.finish, len(a.ids))
	}
	select {
	case <-unblock:
	default:
		close(unblock)
	}
	if s := <-stuck; s.err != nil || (s.finish != backend.FinishLength && s.finish != backend.FinishStop) {
		t.Errorf("the request beside it: %v, finish %q", s.err, s.finish)
	}
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
