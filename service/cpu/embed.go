package cpu

import (
	"context"
	"fmt"

	"github.com/npuchat/npuchat/service/backend"
)

// Embed implements backend.Embedder: each input is tokenized as plain
// text (with the model's BOS when it adds one, as llama.cpp does) and
// its embedding computed as engine.Model.Embed computes it, in a session
// of its own: the generations' sessions and the prompt cache stay as
// they were. It takes one of the places of the requests answered at
// once (Parallel), and the scheduler computes its tokens in chunks
// beside the running answers, in turn with their prompts: it neither
// waits for them nor holds them up. The inputs together may take at most
// Options.MaxEmbedTokens tokens (DefaultMaxEmbedTokens): more is
// refused, before anything is computed, with an error that says so.
func (b *Backend) Embed(ctx context.Context, inputs []string) ([][]float32, int, error) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if b.model == nil {
		return nil, 0, backend.ErrNotLoaded
	}
	sess, err := b.run.enter()
	if err != nil {
		return nil, 0, err
	}
	defer b.run.leave(sess)
	// Every input is tokenized first, so that a request over the limit
	// is refused before anything is computed.
	limit := b.opts.MaxEmbedTokens
	if limit <= 0 {
		limit = DefaultMaxEmbedTokens
	}
	all := make([][]int, 0, len(inputs))
	tokens := 0
	for i, in := range inputs {
		if len(in) > b.maxCtx*b.maxTokenBytes {
			return nil, 0, fmt.Errorf("input %d is %d bytes, more than the context of %d tokens can hold: %w", i, len(in), b.maxCtx, backend.ErrPromptTooLong)
		}
		ids, err := b.promptLocked(&backend.Request{Prompt: in})
		if err != nil {
			return nil, 0, err
		}
		if len(ids) == 0 {
			return nil, 0, fmt.Errorf("input %d is empty: %w", i, backend.ErrBadRequest)
		}
		if len(ids) > b.maxCtx {
			return nil, 0, fmt.Errorf("input %d is %d tokens, more than the context of %d: %w", i, len(ids), b.maxCtx, backend.ErrPromptTooLong)
		}
		tokens += len(ids)
		if tokens > limit {
			return nil, 0, fmt.Errorf("the inputs up to input %d are %d tokens, more than the %d one embeddings request may take; send them in several requests: %w", i, tokens, limit, backend.ErrBadRequest)
		}
		all = append(all, ids)
	}
	out := make([][]float32, 0, len(inputs))
	for i, ids := range all {
		q := b.sched.Join(b.model.NewSession(len(ids)))
		v, err := q.Embed(ctx, ids)
		q.Leave()
		if err != nil {
			return nil, 0, fmt.Errorf("embed input %d: %w", i, err)
		}
		out = append(out, v)
	}
	return out, tokens, nil
}
