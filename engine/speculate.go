package engine

import (
	"context"
	"errors"
	"fmt"
)

// Speculative says whether a generation guesses tokens ahead and checks
// the guesses in one step (Decoder).
type Speculative string

const (
	// SpeculativeAuto guesses when the tokens seen so far suggest a
	// continuation, and stops guessing for a while when the guesses keep
	// failing: the default.
	SpeculativeAuto Speculative = "auto"
	// SpeculativeOff computes one token per step: plain decoding.
	SpeculativeOff Speculative = "off"
)

// ParseSpeculative checks a Speculative setting ("" is auto).
func ParseSpeculative(s string) (Speculative, error) {
	switch Speculative(s) {
	case "", SpeculativeAuto:
		return SpeculativeAuto, nil
	case SpeculativeOff:
		return SpeculativeOff, nil
	}
	return "", fmt.Errorf("speculative %q: want auto or off", s)
}

// DecodeOptions configure a Decoder.
type DecodeOptions struct {
	// Speculative is auto ("" too) or off.
	Speculative Speculative
	// MaxDraft is the most tokens guessed at once (0: DefaultMaxDraft;
	// at most maxBatch-1, so that a check is one step).
	MaxDraft int
}

// DefaultMaxDraft is the most tokens a Decoder guesses at once by
// default (llama.cpp's --draft-max default).
const DefaultMaxDraft = 16

// firstDraft is the length of a Decoder's first guess.
const firstDraft = 4

// The draft's n-gram: the last tokens (at least minMatch, at most
// maxMatch) are looked for earlier in the sequence, and what followed
// their latest, longest occurrence is the guess.
const (
	minMatch = 2
	maxMatch = 4
)

// The fallback: after failLimit checks in a row that kept no guess, the
// decoder decodes plainly for a pause of firstPause tokens, doubled at
// each fallback up to lastPause, then guesses again (a probe of one
// token); a check that keeps a guess ends the fallbacks' doubling.
const (
	failLimit  = 3
	firstPause = 32
	lastPause  = 1024
)

// DecodeStats count a Decoder's guesses.
type DecodeStats struct {
	// Drafted is how many tokens were guessed and checked, Accepted how
	// many of them the model wrote (llama.cpp's timings draft_n and
	// draft_n_accepted).
	Drafted, Accepted int
	// Checks is how many steps checked guesses.
	Checks int
	// Fallbacks is how many times guessing paused after failing.
	Fallbacks int
}

// AcceptRate is Accepted/Drafted (0 when nothing was guessed).
func (st DecodeStats) AcceptRate() float64 {
	if st.Drafted == 0 {
		return 0
	}
	return float64(st.Accepted) / float64(st.Drafted)
}

// Decoder computes a generation's tokens one after another, as
// Session.Forward (or Seq.Forward) does, and returns the same logits bit
// for bit, but guesses ahead: after a token it looks for the last few
// tokens earlier in the sequence (the prompt, the chat's earlier turns
// the session holds, the answer so far) and, when they occurred, guesses
// that what followed them follows again. The token and the guesses are
// computed in one step (one pass over the weights, as a prompt's tokens
// are), with every position's logits. When the caller's next token is the
// first guess, its logits are already there and no step is computed; at
// the first token that differs, the positions of the guesses after it
// are dropped from the session (its KV cache, position and tokens) and
// the token is computed with new guesses.
//
// The caller samples every token from the logits it is given, as it
// would without guesses, so whatever it does (temperature, a grammar,
// stop strings, log-probabilities) sees exactly what it sees in plain
// decoding: a guess d is kept with probability p(d) (the sampler's
// probability of d after all its steps) and otherwise the token is drawn
// from p without d, renormalized, which is the exact rule of speculative
// sampling for a guess that is certain (a point mass); at temperature 0
// the tokens are plain decoding's. With the same seed, the tokens are
// plain decoding's at any temperature.
//
// The number of guesses adapts: it doubles after a check that kept them
// all (up to MaxDraft) and shrinks to one more than were kept after one
// that did not; after a few checks in a row that kept none, guessing
// pauses for a while, longer each time (plain decoding, re-probed
// rarely).
//
// A Decoder is for one generation: Settle it at the end, before the
// session is kept or continued.
type Decoder struct {
	s        *Session
	q        *Seq // the scheduler that computes s, or nil: s alone
	mode     Speculative
	maxDraft int

	// draft are the guesses computed after the last token given, rows
	// their logits: rows[0] after that token, rows[i] after draft[i-1];
	// next of the guesses are confirmed (the caller gave them).
	draft []int
	rows  [][]float32
	next  int
	// k is the next draft's length; fails counts checks in a row that
	// kept nothing, pause the next fallback's length and cool the
	// tokens of the current one left.
	k, fails, pause, cool int

	stats DecodeStats
	toks  []int // a check's tokens
}

// NewDecoder returns a Decoder of the session, which computes alone.
func (s *Session) NewDecoder(opts DecodeOptions) *Decoder { return newDecoder(s, nil, opts) }

// NewDecoder returns a Decoder of the sequence, whose steps (and
// checks) the scheduler computes beside the others'.
func (q *Seq) NewDecoder(opts DecodeOptions) *Decoder { return newDecoder(q.s, q, opts) }

func newDecoder(s *Session, q *Seq, opts DecodeOptions) *Decoder {
	mode := opts.Speculative
	if mode == "" {
		mode = SpeculativeAuto
	}
	mx := opts.MaxDraft
	if mx <= 0 {
		mx = DefaultMaxDraft
	}
	mx = min(mx, maxBatch-1)
	return &Decoder{s: s, q: q, mode: mode, maxDraft: mx, k: min(firstDraft, mx), pause: firstPause}
}

// Stats returns the guesses' counts so far.
func (d *Decoder) Stats() DecodeStats { return d.stats }

// Guessing reports whether the decoder guesses at its next token (false
// when off, or while a fallback pauses it).
func (d *Decoder) Guessing() bool { return d.mode != SpeculativeOff && d.cool == 0 }

// Pending returns the guess for the token after the last one given,
// when one was computed: the token whose logits Forward has ready.
func (d *Decoder) Pending() (int, bool) {
	if d.next < len(d.draft) {
		return d.draft[d.next], true
	}
	return 0, false
}

// Forward computes token at the session's next position (after the
// tokens given before) and returns the logits for the token after it,
// valid until the next call: Session.Forward's logits, bit for bit.
func (d *Decoder) Forward(ctx context.Context, token int) ([]float32, error) {
	if d.next < len(d.draft) {
		if token == d.draft[d.next] {
			d.next++
			d.stats.Accepted++
			row := d.rows[d.next]
			if d.next == len(d.draft) {
				d.judge(d.next, len(d.draft))
				d.draft, d.next = d.draft[:0], 0
			}
			return row, nil
		}
		kept, drafted := d.next, len(d.draft)
		if err := d.drop(); err != nil {
			return nil, err
		}
		d.judge(kept, drafted)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if d.cool > 0 {
		d.cool--
	} else if d.mode != SpeculativeOff {
		toks := append(d.toks[:0], token)
		k := min(d.k, d.s.maxCtx-d.s.pos-1)
		toks = guess(d.s.tokens, toks, k)
		d.toks = toks
		if len(toks) > 1 {
			rows, err := d.check(ctx, toks)
			switch {
			case err == nil:
				d.draft = append(d.draft[:0], toks[1:]...)
				d.rows, d.next = rows, 0
				d.stats.Drafted += len(d.draft)
				d.stats.Checks++
				return rows[0], nil
			case errors.Is(err, ErrKVBudget):
				// no memory for the guesses: the token alone may fit
				d.k = 1
			default:
				return nil, err
			}
		}
	}
	if d.q != nil {
		return d.q.Forward(ctx, token)
	}
	return d.s.Forward(token)
}

// check computes toks at the session's next positions with every
// token's logits.
func (d *Decoder) check(ctx context.Context, toks []int) ([][]float32, error) {
	if d.q != nil {
		return d.q.check(ctx, toks)
	}
	return d.s.checkAll(toks)
}

// Settle drops the positions of guesses not confirmed, so that the
// session holds exactly the tokens given (what plain decoding leaves
// in it). Call it when the generation ends.
func (d *Decoder) Settle() error {
	if d.next < len(d.draft) {
		return d.drop()
	}
	return nil
}

// drop rewinds the session past the guesses not confirmed.
func (d *Decoder) drop() error {
	n := d.s.pos - (len(d.draft) - d.next)
	d.draft, d.next = d.draft[:0], 0
	if err := d.s.Rewind(n); err != nil {
		return fmt.Errorf("drop the guesses: %w", err)
	}
	return nil
}

// judge adapts the draft length to a check that kept kept of drafted
// guesses, and pauses guessing after failLimit checks in a row that
// kept none.
func (d *Decoder) judge(kept, drafted int) {
	if kept == drafted {
		d.k = min(2*d.k, d.maxDraft)
	} else {
		d.k = max(1, kept+1)
	}
	if kept > 0 {
		d.fails, d.pause = 0, firstPause
		return
	}
	if d.fails++; d.fails >= failLimit {
		d.cool, d.fails = d.pause, 0
		d.pause = min(2*d.pause, lastPause)
		d.k = 1
		d.stats.Fallbacks++
	}
}

// guess appends to toks (the token to compute next, alone) up to k
// guesses of the tokens after it: the last tokens of the sequence (hist,
// then toks) are looked for earlier in it, the longest match of
// minMatch to maxMatch tokens that occurred last, and the tokens that
// followed it are the guesses (a continuation that runs into the
// guesses themselves goes on with them: a short loop repeats).
func guess(hist, toks []int, k int) []int {
	if k < 1 {
		return toks
	}
	n := len(hist) + len(toks)
	at := func(i int) int {
		if i < len(hist) {
			return hist[i]
		}
		return toks[i-len(hist)]
	}
	last := at(n - 1)
	best, bestLen := -1, 0
	for j := n - 2; j >= 0; j-- {
		if at(j) != last {
			continue
		}
		m := 1
		for m < maxMatch && j-m >= 0 && at(j-m) == at(n-1-m) {
			m++
		}
		if m > bestLen {
			best, bestLen = j, m
			if m == maxMatch {
				break
			}
		}
	}
	if bestLen < minMatch {
		return toks
	}
	for i := range k {
		toks = append(toks, at(best+1+i)) // best+1+i < n+i: already there
	}
	return toks
}

// checkAll computes tokens at the session's next positions, as Prefill
// does in one step, and returns every token's logits (rows valid until
// the next step).
func (s *Session) checkAll(tokens []int) ([][]float32, error) {
	if err := s.checkTokens(tokens); err != nil {
		return nil, err
	}
	if err := s.reserve(s.pos + len(tokens)); err != nil {
		return nil, fmt.Errorf("%d tokens at position %d: %w", len(tokens), s.pos, err)
	}
	n := len(tokens)
	s.forwardSeg(segment{s: s, tokens: tokens, pos: s.pos, all: true})
	s.pos += n
	s.tokens = append(s.tokens, tokens...)
	return s.rows[:n], nil
}
