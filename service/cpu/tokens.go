package cpu

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/npuchat/npuchat/engine"
	"github.com/npuchat/npuchat/engine/sample"
	"github.com/npuchat/npuchat/engine/tokenizer"
	"github.com/npuchat/npuchat/enginekind"
	"github.com/npuchat/npuchat/service/backend"
)

// Observer watches a generation step by step, for tools that need more
// than the text (`npuchat generate` lists the token ids and dumps the
// logits). Its zero value watches nothing.
type Observer struct {
	// Logits, when set, is called at each step with the logits a token is
	// about to be sampled from (the slice is reused: copy what you keep).
	// An error ends the generation with it.
	Logits func(logits []float32) error
	// Token, when set, is called with each generated token id (an end
	// token is not generated; a token that completes a stop string is).
	Token func(id int)
}

// GenerateTokens runs a prompt given as token ids: the same generation
// as Generate (prefix reuse, sampling, end tokens, stop strings, the
// context limit, text that never splits a character), minus the chat
// template. req gives MaxTokens, Stop and Sampling; its Messages and
// Prompt are ignored. `npuchat generate` runs through here, so the
// command and the server answer alike.
func (b *Backend) GenerateTokens(ctx context.Context, prompt []int, req *backend.Request, obs Observer, emit func(backend.Token) error) (backend.Result, error) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if b.model == nil {
		return backend.Result{Backend: enginekind.CPU}, backend.ErrNotLoaded
	}
	if vocab := b.model.Config().VocabSize; vocab > 0 {
		for _, id := range prompt {
			if id < 0 || id >= vocab {
				return backend.Result{Backend: enginekind.CPU}, fmt.Errorf("token id %d is outside the vocabulary (0..%d): %w", id, vocab-1, backend.ErrBadRequest)
			}
		}
	}
	return b.generateLocked(ctx, prompt, req, obs, emit)
}

// generateLocked prefills ids (reusing the cached prefix) and samples
// the answer, in a place of its own among the requests running at once
// (b.run), its steps computed with theirs (b.sched). b.mu must be held
// (for reading) and the model loaded.
func (b *Backend) generateLocked(ctx context.Context, ids []int, req *backend.Request, obs Observer, emit func(backend.Token) error) (res backend.Result, err error) {
	res.Backend = enginekind.CPU
	res.PromptTokens = len(ids)
	// the request's own context, at most the loaded one
	limit := backend.ContextFor(req, b.maxCtx)
	res.ContextLength = limit
	if len(ids) == 0 {
		return res, fmt.Errorf("the prompt is empty: %w", backend.ErrBadRequest)
	}
	if len(ids) >= limit {
		return res, fmt.Errorf("%d prompt tokens, the context holds %d: %w", len(ids), limit, backend.ErrPromptTooLong)
	}

	// Resume from the longest prefix the KV cache holds for this cache
	// scope (so that one client cannot time another's prompt); at least
	// the last prompt token is computed again to get its logits. Whatever
	// happens, the positions computed are kept in the cache after.
	// (A chat deleted while this runs, ForgetCache, is not kept again:
	// keepUnlessForgotten.)
	mark := b.forgetMark()
	sess, err := b.run.enter()
	if err != nil {
		return res, err
	}
	defer b.run.leave(sess)
	if b.disk != nil {
		// a KV file that holds more of the prompt than memory does (an old
		// chat reopened, after a restart too) goes into the cache first:
		// once the request has its place, so that one waiting for it reads
		// no file and holds no memory
		if st := b.disk.lookup(req.CacheScope, ids, b.kv.Match(req.CacheScope, ids)); st != nil {
			b.keepUnlessForgotten(st.Tag, mark, func() { b.kv.Insert(st) }, func() {})
		}
	}
	sess.SetTag(req.CacheTag)
	keep, err := sess.Resume(req.CacheScope, ids)
	if err != nil {
		return res, err
	}
	defer b.keepUnlessForgotten(req.CacheTag, mark, sess.Keep, sess.Discard)
	q := b.sched.Join(sess)
	defer q.Leave()
	mode, err := b.speculative(req)
	if err != nil {
		return res, err
	}
	// the decoder's guesses not written are dropped before the session
	// is kept (deferred after the keeping: it runs first)
	dec := q.NewDecoder(engine.DecodeOptions{Speculative: mode})
	defer func() {
		if serr := dec.Settle(); serr != nil && err == nil {
			err = serr
		}
		st := dec.Stats()
		res.DraftTokens, res.DraftAccepted = st.Drafted, st.Accepted
		b.drafted.Add(int64(st.Drafted))
		b.accepted.Add(int64(st.Accepted))
	}()
	res.CachedTokens = keep
	start := time.Now()
	var logits []float32
	wait := roomWait{bound: req.MemoryWait}
	for {
		seen := b.run.ends()
		logits, err = q.Prefill(ctx, ids[keep:])
		// the prompt's keys and values need memory the requests
		// running beside it hold: wait for one to end (or fail with
		// backend.ErrKVMemoryFull)
		if err == nil || !errors.Is(err, engine.ErrKVBudget) {
			break
		}
		if err = b.run.waitRoom(ctx, &wait, seen, err); err != nil {
			break
		}
	}
	res.PrefillDuration = time.Since(start)
	// what the prompt took from a request beside it (the same system
	// prompt, being computed) came from a cache too
	res.CachedTokens += q.Copied()
	emit = backend.StampPrompt(emit, len(ids), res.CachedTokens)
	if err != nil {
		return res, err
	}

	ex, err := b.extrasLocked(req)
	if err != nil {
		return res, err
	}
	sampler := sample.New(sample.Params{
		Temperature: req.Sampling.Temperature, TopP: req.Sampling.TopP, TopK: req.Sampling.TopK, MinP: req.Sampling.MinP,
		RepeatPenalty: req.Sampling.RepeatPenalty, FrequencyPenalty: req.Sampling.FrequencyPenalty, PresencePenalty: req.Sampling.PresencePenalty,
		Seed: req.Sampling.Seed, HasSeed: req.Sampling.HasSeed, RepeatLastN: 64,
	})
	stream := tokenizer.NewStream(b.tok, req.Stop)
	history := append([]int(nil), ids...)
	start = time.Now()
	defer func() { res.DecodeDuration = time.Since(start) }()
	for {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		if len(history) >= limit { // prompt and answer fill the context
			res.FinishReason = backend.FinishLength
			break
		}
		if obs.Logits != nil {
			if err := obs.Logits(logits); err != nil {
				return res, err
			}
		}
		next, ok := ex.sample(sampler, logits, history)
		if !ok || b.tcfg.IsEOS(next) {
			res.FinishReason = backend.FinishStop
			break
		}
		res.CompletionTokens++
		history = append(history, next)
		if obs.Token != nil {
			obs.Token(next)
		}
		text, stopped := stream.Add(next)
		callDone, err := ex.emit(emit, text, next, false)
		if err != nil {
			return res, err
		}
		if callDone {
			res.FinishReason = backend.FinishToolCalls
			break
		}
		if stopped {
			res.FinishReason, res.StopSequence = backend.FinishStop, stream.StopSequence()
			break
		}
		if req.MaxTokens > 0 && res.CompletionTokens >= req.MaxTokens {
			res.FinishReason = backend.FinishLength
			break
		}
		wait := roomWait{bound: req.MemoryWait}
		for {
			seen := b.run.ends()
			logits, err = dec.Forward(ctx, next)
			// short of KV memory the requests beside it hold: wait for
			// one to end, for a while; the answer is never ended there as
			// though complete (a schema's JSON cut short, a "length" the
			// client did not ask for): it fails with
			// backend.ErrKVMemoryFull
			if err == nil || !errors.Is(err, engine.ErrKVBudget) {
				break
			}
			if err = b.run.waitRoom(ctx, &wait, seen, err); err != nil {
				break
			}
		}
		if err != nil {
			if errors.Is(err, engine.ErrContextFull) { // the context's end
				res.FinishReason = backend.FinishLength
				break
			}
			return res, err
		}
	}
	text := ""
	if !stream.Stopped() {
		text = stream.Flush()
	}
	if _, err := ex.emit(emit, text, -1, true); err != nil {
		return res, err
	}
	if ex.calls > 0 && res.FinishReason == backend.FinishStop {
		res.FinishReason = backend.FinishToolCalls
	}
	return res, nil
}

// speculative is req's decoding: its own, else the backend's setting
// (off when unset).
func (b *Backend) speculative(req *backend.Request) (engine.Speculative, error) {
	if req.Speculative == "" {
		if b.opts.Speculative == "" {
			return engine.SpeculativeOff, nil
		}
		return b.opts.Speculative, nil
	}
	mode, err := engine.ParseSpeculative(req.Speculative)
	if err != nil {
		return "", fmt.Errorf("%v: %w", err, backend.ErrBadRequest)
	}
	return mode, nil
}
