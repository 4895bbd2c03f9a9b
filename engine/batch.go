package engine

import (
	"errors"
	"fmt"
)

// Batch computes steps of several sessions of one model together: one
// pass over the weights advances every session of the step (a decode
// token each, or a chunk of a prompt), and each token's attention reads
// its own session's keys and values. The sessions may come from one
// KVCache (their memory from its budget) or be sessions of their own.
// What a session computes in a batch is bit for bit what it computes
// alone (TestBatchMatchesAlone). A Batch is single-goroutine, as a
// Session is; a Scheduler drives one for sequences on many goroutines.
type Batch struct {
	m    *Model
	st   *stepper
	segs []segment
	idx  []int // segs[i] is steps[idx[i]]
}

// NewBatch returns a Batch whose products run on the model's threads.
func (m *Model) NewBatch() *Batch { return &Batch{m: m, st: newStepper(m.threads)} }

// Step is one session's part of a Batch.Run: Tokens go at positions
// Pos(), Pos()+1, … of Session. Run sets Out (the last token's logits,
// when Logits asks for them: the session's buffer, valid until its next
// step) or Err (the step was not computed; the session is as it was).
type Step struct {
	Session *Session
	Tokens  []int
	Logits  bool
	// Pool, when set (the model's hidden size, and Logits false), gets
	// each token's last hidden state after the final RMSNorm added to
	// it: an embedding's mean pool (Model.Embed), computed in a step
	// beside others.
	Pool []float64
	// AllLogits asks for every token's logits (a Decoder checking its
	// guesses in one step): Run sets Outs, one row per token (the
	// session's buffers, valid until its next step), and Out to the
	// last row.
	AllLogits bool

	Out  []float32
	Outs [][]float32
	Err  error
}

// errTwice is a session given twice to one Run.
var errTwice = errors.New("the session is in this batch twice")

// Run computes every step whose tokens fit its session (the
// vocabulary, the context limit, its KV memory) in one step and sets
// each step's Out or Err.
func (b *Batch) Run(steps []Step) {
	b.segs, b.idx = b.segs[:0], b.idx[:0]
	for i := range steps {
		sp := &steps[i]
		sp.Out, sp.Outs, sp.Err = nil, nil, nil
		if err := b.check(steps[:i], sp); err != nil {
			sp.Err = err
			continue
		}
		b.segs = append(b.segs, segment{s: sp.Session, tokens: sp.Tokens, pos: sp.Session.pos, logits: sp.Logits && !sp.AllLogits, all: sp.AllLogits})
		b.idx = append(b.idx, i)
	}
	if len(b.segs) == 0 {
		return
	}
	b.st.forward(b.m, b.segs)
	row := 0
	for j, sg := range b.segs {
		if pool := steps[b.idx[j]].Pool; pool != nil && !sg.logits && !sg.all {
			b.m.poolRows(pool, b.st.x[row:row+len(sg.tokens)], b.st.xb[0])
		}
		row += len(sg.tokens)
		s := sg.s
		s.pos += len(sg.tokens)
		s.tokens = append(s.tokens, sg.tokens...)
		switch {
		case sg.all:
			sp := &steps[b.idx[j]]
			sp.Outs = s.rows[:len(sg.tokens)]
			sp.Out = sp.Outs[len(sp.Outs)-1]
		case sg.logits:
			steps[b.idx[j]].Out = s.logits
		}
	}
	clear(b.segs)
}

// check makes room for sp in its session, or says why it cannot run.
func (b *Batch) check(before []Step, sp *Step) error {
	s := sp.Session
	switch {
	case s == nil:
		return errors.New("batch step without a session")
	case s.m != b.m:
		return errors.New("batch step of another model's session")
	case len(sp.Tokens) == 0:
		return errors.New("batch step without tokens")
	}
	for _, o := range before {
		if o.Session == s {
			return errTwice
		}
	}
	if err := s.checkTokens(sp.Tokens); err != nil {
		return err
	}
	if err := s.reserve(s.pos + len(sp.Tokens)); err != nil {
		return fmt.Errorf("%d tokens at position %d: %w", len(sp.Tokens), s.pos, err)
	}
	return nil
}

// checkTokens checks that tokens are in the vocabulary and fit the
// session's context after what it holds.
func (s *Session) checkTokens(tokens []int) error {
	if s.pos+len(tokens) > s.maxCtx {
		return fmt.Errorf("%d tokens at position %d: %w (limit %d positions)", len(tokens), s.pos, ErrContextFull, s.maxCtx)
	}
	for _, t := range tokens {
		if t < 0 || t >= s.m.cfg.VocabSize {
			return fmt.Errorf("token %d is outside the vocabulary (size %d)", t, s.m.cfg.VocabSize)
		}
	}
	return nil
}
