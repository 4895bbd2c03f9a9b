package main

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/npuchat/npuchat/engine"
	"github.com/npuchat/npuchat/engine/sample"
)

// parallelResult is `npuchat bench --parallel N`: N streams decoded
// together by the engine's Scheduler (as the CPU backend serves
// requests at once), and a newcomer's first token while others stream.
type parallelResult struct {
	Model        string `json:"model"`
	Threads      int    `json:"threads"`
	SIMD         string `json:"simd"`
	KVType       string `json:"kv_type"`
	Parallel     int    `json:"parallel"`
	PromptTokens int    `json:"prompt_tokens"`
	GenTokens    int    `json:"gen_tokens"`
	// AggregateTokS is the tokens all streams decoded while every one of
	// them was decoding (from the last stream's first token to the first
	// stream's last), over that time.
	AggregateTokS float64 `json:"aggregate_decode_tok_s"`
	// Streams are each stream's decode tok/s (its tokens after the
	// first over the time from its first token to its last) and first
	// token time, all starting together.
	Streams []parallelStream `json:"streams"`
	// NewcomerSeconds is the first token time of a prompt that arrives
	// while Parallel-1 others stream; AloneSeconds the same prompt's
	// with nothing else running.
	NewcomerSeconds float64 `json:"newcomer_first_token_s"`
	AloneSeconds    float64 `json:"alone_first_token_s"`
	// MostSequences is the most sequences one step computed.
	MostSequences int `json:"most_sequences"`
	// Speculative and Answer are as bench's (each stream guesses on
	// its own); DraftN and DraftAccepted sum the together run's streams'
	// guesses drafted and kept.
	Speculative   string `json:"speculative"`
	Answer        string `json:"answer"`
	DraftN        int    `json:"draft_n"`
	DraftAccepted int    `json:"draft_n_accepted"`
}

// parallelStream is one stream of the together run.
type parallelStream struct {
	FirstTokenSeconds float64 `json:"first_token_s"`
	DecodeTokS        float64 `json:"decode_tok_s"`
}

// streamTimes is what one stream saw: when its first token came, when
// its last did.
type streamTimes struct {
	// first is when the prompt's logits came, decode when decoding
	// started (after the others' first tokens, with a barrier), last
	// when the last token came
	first, decode, last time.Time
	tokens              []time.Time // when each decoded token's logits came
	guesses             engine.DecodeStats
	err                 error
}

// benchParallel loads the model and runs: a prompt alone (its first
// token time); n streams of promptTokens and genTokens starting
// together; and, while n-1 streams decode, a newcomer's prompt.
func benchParallel(ctx context.Context, path string, opts engine.LoadOptions, n, promptTokens, genTokens int, dec benchDecode) (*parallelResult, error) {
	m, err := engine.Load(path, opts)
	if err != nil {
		return nil, err
	}
	defer m.Close()
	cfg := m.Config()
	res := &parallelResult{Model: path, Threads: m.Threads(), SIMD: m.SIMD(), KVType: m.KVType(), Parallel: n,
		PromptTokens: promptTokens, GenTokens: genTokens, Speculative: string(dec.Speculative), Answer: dec.answer()}
	if res.Speculative == "" {
		res.Speculative = string(engine.SpeculativeOff)
	}
	ctxLen := promptTokens + 3*genTokens + 16
	if s := m.NewSession(ctxLen); s.MaxContext() < ctxLen {
		return nil, fmt.Errorf("the model's context holds %d positions, fewer than %d", s.MaxContext(), ctxLen)
	}
	sc := m.NewScheduler(engine.SchedulerOptions{})
	defer sc.Close()
	prompt := func(k int) []int {
		p := make([]int, promptTokens)
		for i := range p {
			p[i] = (i*7919 + 13 + k*104729) % cfg.VocabSize
		}
		return p
	}
	// stream runs one sequence: prompt k, then gen greedy tokens;
	// started is closed after its first few decode tokens. With ready,
	// it decodes only once every stream of ready has its first token
	// (so that n streams decode together, however the goroutines were
	// scheduled while they prefilled).
	stream := func(k, gen int, started chan<- struct{}, ready *sync.WaitGroup) streamTimes {
		var st streamTimes
		q := sc.Join(m.NewSession(ctxLen))
		defer q.Leave()
		d := q.NewDecoder(engine.DecodeOptions{Speculative: engine.Speculative(res.Speculative)})
		p := prompt(k)
		logits, err := q.Prefill(ctx, p)
		st.first = time.Now()
		if ready != nil {
			ready.Done()
			ready.Wait()
		}
		st.decode = time.Now()
		for i := 0; err == nil && i < gen; i++ {
			if i == 2 && started != nil {
				close(started)
				started = nil
			}
			tok := sample.Argmax(logits)
			if dec.Copy {
				tok = p[i%len(p)]
			}
			logits, err = d.Forward(ctx, tok)
			st.tokens = append(st.tokens, time.Now())
		}
		if started != nil {
			close(started)
		}
		st.last, st.err, st.guesses = time.Now(), err, d.Stats()
		return st
	}

	// a prompt alone, after one that warms the weights (the first after
	// the load reads them from the file: it would make the newcomer
	// beside others look faster than alone)
	if st := stream(n+1, 1, nil, nil); st.err != nil {
		return nil, st.err
	}
	start := time.Now()
	if st := stream(n, 1, nil, nil); st.err != nil {
		return nil, st.err
	} else {
		res.AloneSeconds = st.first.Sub(start).Seconds()
	}

	// n streams together
	times := make([]streamTimes, n)
	var wg, ready sync.WaitGroup
	ready.Add(n)
	start = time.Now()
	for k := range n {
		wg.Add(1)
		go func() { defer wg.Done(); times[k] = stream(k, genTokens, nil, &ready) }()
	}
	wg.Wait()
	from, to := times[0].decode, times[0].last // when all decode
	for _, st := range times {
		if st.err != nil {
			return nil, st.err
		}
		from, to = maxTime(from, st.decode), minTime(to, st.last)
		res.Streams = append(res.Streams, parallelStream{FirstTokenSeconds: st.first.Sub(start).Seconds(),
			DecodeTokS: rate(genTokens, st.last.Sub(st.decode))})
		res.DraftN += st.guesses.Drafted
		res.DraftAccepted += st.guesses.Accepted
	}
	tokens := 0
	for _, st := range times {
		for _, at := range st.tokens {
			if at.After(from) && !at.After(to) {
				tokens++
			}
		}
	}
	if tokens == 0 || !to.After(from) {
		// the streams never decoded all at once (too few --gen-tokens):
		// every token over the whole run
		first, last := times[0].decode, times[0].last
		for _, st := range times {
			first, last = minTime(first, st.decode), maxTime(last, st.last)
		}
		tokens, from, to = n*genTokens, first, last
	}
	res.AggregateTokS = rate(tokens, to.Sub(from))

	// a newcomer while n-1 others stream (alone again when n is 1)
	others := make([]streamTimes, n-1)
	starts := make([]chan struct{}, n-1)
	for k := range n - 1 {
		starts[k] = make(chan struct{})
		wg.Add(1)
		go func() { defer wg.Done(); others[k] = stream(k, 2*genTokens+8, starts[k], nil) }()
	}
	for _, c := range starts {
		<-c // every other is decoding
	}
	start = time.Now()
	st := stream(n, 1, nil, nil)
	res.NewcomerSeconds = st.first.Sub(start).Seconds()
	wg.Wait()
	if st.err != nil {
		return nil, st.err
	}
	for _, o := range others {
		if o.err != nil {
			return nil, o.err
		}
	}
	res.MostSequences = sc.Stats().MostSequences
	return res, nil
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// printParallel prints a parallel run as a table.
func printParallel(w io.Writer, r *parallelResult) {
	fmt.Fprintf(w, "model     %s\nthreads   %d, SIMD %s, KV %s\nstreams   %d × (%d prompt + %d decoded tokens), at most %d sequences in one step\n",
		r.Model, r.Threads, r.SIMD, r.KVType, r.Parallel, r.PromptTokens, r.GenTokens, r.MostSequences)
	fmt.Fprintf(w, "aggregate decode %.2f tok/s (%s); guesses %s: %d of %d kept\n", r.AggregateTokS, r.Answer, r.Speculative, r.DraftAccepted, r.DraftN)
	fmt.Fprintf(w, "%-7s %14s %16s\n", "stream", "decode tok/s", "first token s")
	for i, s := range r.Streams {
		fmt.Fprintf(w, "%-7d %14.2f %16.3f\n", i, s.DecodeTokS, s.FirstTokenSeconds)
	}
	fmt.Fprintf(w, "newcomer first token %.3f s beside %d streaming (alone %.3f s)\n", r.NewcomerSeconds, r.Parallel-1, r.AloneSeconds)
}
