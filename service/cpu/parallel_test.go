package cpu

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/npuchat/npuchat/service/backend"
)

// answer is what a request produced: its text, token ids, logprobs and
// result.
type answer struct {
	text   string
	ids    []int
	lps    string
	finish string
	stop   string
	cached int // the result's CachedTokens
	err    error
}

// generate runs req on b, calling each(n) after the n-th piece of text;
// the result goes to res[0] when given.
func generate(ctx context.Context, b *Backend, req *backend.Request, each func(n int), res ...*backend.Result) answer {
	var a answer
	var sb strings.Builder
	var lps []backend.Logprob
	n := 0
	r, err := b.Generate(ctx, req, func(tok backend.Token) error {
		sb.WriteString(tok.Text)
		if tok.ID >= 0 {
			a.ids = append(a.ids, tok.ID)
		}
		lps = append(lps, tok.Logprobs...)
		n++
		if each != nil {
			each(n)
		}
		return nil
	})
	a.text, a.finish, a.stop, a.cached, a.err = sb.String(), r.FinishReason, r.StopSequence, r.CachedTokens, err
	if len(res) > 0 {
		*res[0] = r
	}
	if j, err := json.Marshal(lps); err == nil {
		a.lps = string(j)
	}
	return a
}

// TestParallelRequestsAnswerAsAlone: requests answered at once (one
// greedy, one with a stop string, one constrained to a JSON schema and
// sampled, one with logprobs, one joining while the others stream, one
// cancelled mid-answer) each get exactly the answer they get alone:
// every sequence keeps its own sampler, grammar, stop rules and
// logprobs, and its tokens do not depend on its neighbours.
func TestParallelRequestsAnswerAsAlone(t *testing.T) {
	b := toolModel(t)
	if b.Info().Parallel < 4 {
		t.Fatalf("Parallel %d, want the default 4 on a small model", b.Info().Parallel)
	}
	schema := `{"type":"object","properties":{"city":{"type":"string","maxLength":6},"days":{"type":"integer"}},"required":["city","days"],"additionalProperties":false}`
	plain := greedy("tell me a story")
	plain.MaxTokens = 40
	alone := generate(t.Context(), b, plain, nil)
	if alone.err != nil || len(alone.text) < 10 {
		t.Fatalf("greedy answer: %q, %v", alone.text, alone.err)
	}
	stopped := greedy("tell me a story")
	stopped.MaxTokens = 40
	stopped.Stop = []string{alone.text[len(alone.text)/2 : len(alone.text)/2+3]}
	jsonReq := sampled(3, "the weather, as JSON")
	jsonReq.MaxTokens = 60
	jsonReq.Format = &backend.Format{Type: backend.FormatSchema, Schema: json.RawMessage(schema)}
	lpReq := sampled(9, "hello there")
	lpReq.MaxTokens, lpReq.Logprobs, lpReq.TopLogprobs = 25, true, 2
	late := greedy("a different question, asked later")
	late.MaxTokens = 30
	cancelled := greedy("this one is cancelled")
	cancelled.MaxTokens = 40
	reqs := []*backend.Request{plain, stopped, jsonReq, lpReq, late, cancelled}
	want := make([]answer, len(reqs))
	for i, r := range reqs {
		want[i] = generate(t.Context(), b, r, nil)
		if want[i].err != nil {
			t.Fatalf("request %d alone: %v", i, want[i].err)
		}
	}
	if want[1].finish != backend.FinishStop || want[1].stop == "" {
		t.Fatalf("the stop string did not stop the answer alone: %+v", want[1])
	}
	b.kv.Clear() // beside each other, every prompt is computed afresh

	got := make([]answer, len(reqs))
	var wg sync.WaitGroup
	lateGo := make(chan struct{})
	var once sync.Once
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	// the backend queues nothing: at most its places at once, as the
	// service admits them, the next as one ends
	places := make(chan struct{}, b.Info().Parallel)
	for i, r := range reqs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-places }()
			rctx := t.Context()
			var each func(int)
			switch i {
			case 0:
				each = func(n int) {
					if n == 5 {
						once.Do(func() { close(lateGo) })
					}
				}
			case 4:
				<-lateGo
			case 5:
				rctx = ctx
				each = func(n int) {
					if n == 3 {
						cancel()
					}
				}
			}
			places <- struct{}{}
			got[i] = generate(rctx, b, r, each)
		}()
	}
	wg.Wait()
	for i := range reqs {
		g, w := got[i], want[i]
		if i == 5 {
			if !errors.Is(g.err, context.Canceled) || len(g.ids) < 3 || fmt.Sprint(g.ids) != fmt.Sprint(w.ids[:len(g.ids)]) {
				t.Errorf("cancelled request: %v after %v, alone %v", g.err, g.ids, w.ids)
			}
			continue
		}
		if g.err != nil || g.text != w.text || g.finish != w.finish || g.stop != w.stop || g.lps != w.lps {
			t.Errorf("request %d beside others: %q (%s %q, %v)\nalone: %q (%s %q)", i, g.text, g.finish, g.stop, g.err, w.text, w.finish, w.stop)
			if g.lps != w.lps {
				t.Errorf("request %d: logprobs differ", i)
			}
		}
	}
	if st := b.SchedulerStats(); st.MostSequences < 2 {
		t.Errorf("the requests never ran in one step: %+v", st)
	} else {
		t.Logf("scheduler: %+v", st)
	}
}

// TestParallelPlaces: a backend with Parallel 1 answers one request at
// a time: one that comes while the place is taken is refused at once
// with ErrNoPlace (the service queues, the backend does not), and the
// next answer, once the place is free, is the same as the first.
func TestParallelPlaces(t *testing.T) {
	b := load(t, Options{Path: models(t)["gguf"], Parallel: 1})
	if b.Info().Parallel != 1 {
		t.Fatalf("Parallel %d, want 1", b.Info().Parallel)
	}
	req := greedy("one at a time")
	req.MaxTokens = 12
	unblock, blocked := make(chan struct{}), make(chan struct{})
	var once sync.Once
	first := make(chan answer, 1)
	go func() {
		first <- generate(t.Context(), b, req, func(int) {
			once.Do(func() { close(blocked); <-unblock })
		})
	}()
	<-blocked
	refused := generate(t.Context(), b, req, nil)
	close(unblock)
	if !errors.Is(refused.err, ErrNoPlace) || refused.text != "" {
		t.Errorf("beside the only place's request: %q %v; want nothing and ErrNoPlace", refused.text, refused.err)
	}
	want := <-first
	if want.err != nil {
		t.Fatal(want.err)
	}
	if got := generate(t.Context(), b, req, nil); got.err != nil || got.text != want.text {
		t.Errorf("once the place is free: %q %v, want %q", got.text, got.err, want.text)
	}
	if st := b.SchedulerStats(); st.MostSequences != 1 {
		t.Errorf("with one place, a step computed %d sequences", st.MostSequences)
	}
}

// TestNonReadingClientHoldsOnlyItsPlace: a request whose client stops
// reading (its emit blocks) does not stop the one beside it, which
// answers in full, exactly; the stalled one then goes on as alone.
func TestNonReadingClientHoldsOnlyItsPlace(t *testing.T) {
	b := load(t, Options{Path: models(t)["gguf"]})
	stuckReq, freeReq := greedy("the stuck one"), greedy("the free one")
	stuckReq.MaxTokens, freeReq.MaxTokens = 20, 30
	wantStuck := generate(t.Context(), b, stuckReq, nil)
	wantFree := generate(t.Context(), b, freeReq, nil)
	b.kv.Clear()

	unblock := make(chan struct{})
	blocked := make(chan struct{})
	var once sync.Once
	stuck := make(chan answer, 1)
	go func() {
		stuck <- generate(t.Context(), b, stuckReq, func(n int) {
			if n == 2 {
				once.Do(func() { close(blocked) })
				<-unblock // the client does not read
			}
		})
	}()
	<-blocked
	free := generate(t.Context(), b, freeReq, nil)
	close(unblock)
	if free.err != nil || free.text != wantFree.text {
		t.Errorf("beside a non-reading client: %q %v, want %q", free.text, free.err, wantFree.text)
	}
	if got := <-stuck; got.err != nil || got.text != wantStuck.text {
		t.Errorf("the stalled request: %q %v, want %q", got.text, got.err, wantStuck.text)
	}
}
