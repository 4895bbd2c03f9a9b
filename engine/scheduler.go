package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// ErrSchedulerClosed is returned for a step asked of a Scheduler that
// was closed.
var ErrSchedulerClosed = errors.New("the scheduler is closed")

// Scheduler runs the steps of many sequences, each on its own goroutine
// (a request), through one Batch: continuous batching. Every running
// sequence advances one token per step, the steps' tokens computed
// together in one pass over the weights; a new sequence joins at the
// next step, its prompt prefilled in chunks between (with) the decode
// steps, so the running ones keep flowing; one that finishes, fails or
// is cancelled leaves at once. Each sequence keeps everything else of
// its own (sampler, grammar, stop rules): it asks for logits, samples,
// and asks again.
//
// A step waits briefly for the sequences of the last step to ask for
// their next token (SchedulerOptions.Grace), so that they stay in step;
// one that does not ask in time (its client does not read what it is
// sent) is not waited for again until it asks: it only ever holds its
// own place.
type Scheduler struct {
	m    *Model
	b    *Batch
	opts SchedulerOptions
	in   chan *schedReq
	quit chan struct{}
	done chan struct{}
	once sync.Once

	// owned by the loop
	pending []*schedReq // requests not finished: decodes and prompts
	exp     []*Seq      // sequences answered by the last step
	unasked int         // of exp: expected, not slow, not asked yet (no admission: the service admits)
	steps   []Step
	reqs    []*schedReq // steps[i] belongs to reqs[i]
	prompts []*schedReq
	replies []reply
	rot     int // the prompt that goes first, round robin
	last    time.Duration
	timer   *time.Timer

	stats struct {
		sync.Mutex
		SchedulerStats
	}
}

// SchedulerStats count what a Scheduler computed.
type SchedulerStats struct {
	Steps   int64 // batched steps
	Decodes int64 // decode tokens (a Decoder's guesses too), over all steps
	Prompt  int64 // prompt tokens, over all steps
	// Shared counts prompt tokens not computed: their keys and values
	// were copied from a sequence beside that shares them (share).
	Shared int64
	// MostSequences is the most sequences one step computed.
	MostSequences int
}

// Stats returns the counts so far.
func (sc *Scheduler) Stats() SchedulerStats {
	sc.stats.Lock()
	defer sc.stats.Unlock()
	return sc.stats.SchedulerStats
}

// SchedulerOptions configure Model.NewScheduler.
type SchedulerOptions struct {
	// Chunk is how many prompt tokens a step computes beside running
	// decodes (0: 16); a step without decodes computes up to 32, as
	// Prefill does. Prompts joining together share the chunk, in turn.
	Chunk int
	// Grace is how long a step waits for the sequences of the last step
	// to ask for their next token (0: half the last step's time, between
	// 2 ms and 100 ms).
	Grace time.Duration
}

// Seq is one sequence of a Scheduler: a session whose steps the
// scheduler computes. It is used by one goroutine at a time, as the
// session is.
type Seq struct {
	sc    *Scheduler
	s     *Session
	reply chan schedReply
	req   schedReq
	one   [1]int

	// owned by the loop
	expected, slow bool
	// copied is how many positions of the last Prefill were copied from
	// a sequence beside (share), written by the loop before its reply
	copied int
	// waited is how many steps the last prompt took from the step the
	// loop took it at to its logits (written before the reply is sent,
	// read after it is received: for the fairness test)
	waited int64
}

type schedReq struct {
	q      *Seq
	ctx    context.Context
	tokens []int // the tokens left to compute
	decode bool  // one token of an answer (else a prompt)
	all    bool  // a decode of several tokens, each one's logits wanted (Seq.check)
	leave  bool
	follow bool      // a prompt waiting for another to compute its prefix (share)
	at     int64     // the steps computed when the loop took it
	pool   []float64 // an embedding's sum of hidden states (Seq.Embed), else nil
}

type schedReply struct {
	logits []float32
	rows   [][]float32 // every token's logits, for a request with all
	err    error
}

// NewScheduler starts a scheduler for the model's sessions (Close it).
func (m *Model) NewScheduler(opts SchedulerOptions) *Scheduler {
	if opts.Chunk <= 0 {
		opts.Chunk = maxBatch / 2
	}
	opts.Chunk = min(opts.Chunk, maxBatch)
	sc := &Scheduler{m: m, b: m.NewBatch(), opts: opts, in: make(chan *schedReq),
		quit: make(chan struct{}), done: make(chan struct{})}
	sc.timer = time.NewTimer(time.Hour)
	sc.timer.Stop()
	go sc.loop()
	return sc
}

// Close stops the scheduler: steps asked of it after (or not started
// yet) fail with ErrSchedulerClosed. It waits for the running step, and
// ends the scheduler's threads then (not at a later garbage collection:
// a model unloaded and loaded again leaves none behind).
func (sc *Scheduler) Close() {
	sc.once.Do(func() {
		close(sc.quit)
		<-sc.done
		sc.b.st.pool.shutdown()
	})
	<-sc.done
}

// Join returns s as a sequence of the scheduler. s must be a session of
// the scheduler's model; while it is in the scheduler, only its Seq
// computes it.
func (sc *Scheduler) Join(s *Session) *Seq {
	return &Seq{sc: sc, s: s, reply: make(chan schedReply, 1)}
}

// Session is the sequence's session.
func (q *Seq) Session() *Session { return q.s }

// Prefill computes tokens at the session's next positions, in chunks
// between the running sequences' steps, and returns the last one's
// logits (valid until the sequence's next step). When ctx ends it stops
// at the next step; the positions computed before stay in the session.
func (q *Seq) Prefill(ctx context.Context, tokens []int) ([]float32, error) {
	s := q.s
	if len(tokens) == 0 {
		return nil, fmt.Errorf("prefill: no tokens")
	}
	if err := s.checkTokens(tokens); err != nil {
		return nil, fmt.Errorf("prefill: %w", err)
	}
	if err := s.reserve(s.pos + len(tokens)); err != nil {
		return nil, fmt.Errorf("prefill %d tokens at position %d: %w", len(tokens), s.pos, err)
	}
	q.copied = 0
	return q.ask(ctx, tokens, false)
}

// Copied is how many positions the last Prefill copied from a sequence
// beside that shared them, rather than computed (SchedulerStats.Shared).
func (q *Seq) Copied() int { return q.copied }

// Embed computes the embedding of tokens (as Model.Embed: the final
// hidden states mean-pooled and L2-normalised) in the sequence's
// session, which must be empty, in chunks beside the running sequences'
// steps, taking turns with the prompts; the session then holds the
// tokens' positions (Discard them). Nothing is shared with a sequence
// beside: every position's hidden state is the embedding's.
func (q *Seq) Embed(ctx context.Context, tokens []int) ([]float32, error) {
	s := q.s
	if len(tokens) == 0 {
		return nil, fmt.Errorf("embed: no tokens")
	}
	if s.pos != 0 {
		return nil, fmt.Errorf("embed: the session holds %d positions, want none", s.pos)
	}
	if err := s.checkTokens(tokens); err != nil {
		return nil, fmt.Errorf("embed: %w", err)
	}
	if err := s.reserve(len(tokens)); err != nil {
		return nil, fmt.Errorf("embed %d tokens: %w", len(tokens), err)
	}
	pool := make([]float64, s.m.cfg.Hidden)
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	q.req = schedReq{q: q, ctx: ctx, tokens: tokens, pool: pool}
	select {
	case q.sc.in <- &q.req:
	case <-q.sc.done:
		return nil, ErrSchedulerClosed
	}
	if r := <-q.reply; r.err != nil {
		return nil, r.err
	}
	return normalized(pool), nil
}

// Forward computes token at position Pos() in the next step and returns
// the vocabulary logits, valid until the sequence's next step.
func (q *Seq) Forward(ctx context.Context, token int) ([]float32, error) {
	s := q.s
	q.one[0] = token
	if err := s.checkTokens(q.one[:]); err != nil {
		return nil, err
	}
	if err := s.reserve(s.pos + 1); err != nil {
		return nil, fmt.Errorf("position %d: %w", s.pos, err)
	}
	return q.ask(ctx, q.one[:], true)
}

// check computes tokens at positions Pos(), Pos()+1, … in the next
// step, as one decode, and returns every token's logits (rows valid
// until the sequence's next step): a Decoder's check of its guesses.
func (q *Seq) check(ctx context.Context, tokens []int) ([][]float32, error) {
	s := q.s
	if err := s.checkTokens(tokens); err != nil {
		return nil, err
	}
	if err := s.reserve(s.pos + len(tokens)); err != nil {
		return nil, fmt.Errorf("%d tokens at position %d: %w", len(tokens), s.pos, err)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	q.req = schedReq{q: q, ctx: ctx, tokens: tokens, decode: true, all: true}
	select {
	case q.sc.in <- &q.req:
	case <-q.sc.done:
		return nil, ErrSchedulerClosed
	}
	r := <-q.reply
	return r.rows, r.err
}

// Leave tells the scheduler not to wait for the sequence's next step
// (it is done, for now). A Seq that asks again after Leave joins again.
func (q *Seq) Leave() {
	q.req = schedReq{q: q, leave: true}
	select {
	case q.sc.in <- &q.req:
	case <-q.sc.done:
	}
}

// ask hands a request to the loop and waits for its answer (at most
// one step after ctx ends).
func (q *Seq) ask(ctx context.Context, tokens []int, decode bool) ([]float32, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	q.req = schedReq{q: q, ctx: ctx, tokens: tokens, decode: decode}
	select {
	case q.sc.in <- &q.req:
	case <-q.sc.done:
		return nil, ErrSchedulerClosed
	}
	r := <-q.reply
	return r.logits, r.err
}

// loop is the scheduler: gather the requests, compute a step, answer.
func (sc *Scheduler) loop() {
	defer close(sc.done)
	for {
		if len(sc.pending) == 0 {
			select {
			case r := <-sc.in:
				sc.take(r)
			case <-sc.quit:
				sc.fail()
				return
			}
			if len(sc.pending) == 0 {
				continue // a Leave
			}
		}
		if !sc.gather() {
			sc.fail()
			return
		}
		sc.step()
	}
}

// take records a request from a sequence.
func (sc *Scheduler) take(r *schedReq) {
	q := r.q
	if q.expected {
		if !q.slow {
			sc.unasked--
		}
		q.expected, q.slow = false, false
	}
	if !r.leave {
		sc.stats.Lock()
		r.at = sc.stats.Steps
		sc.stats.Unlock()
		sc.pending = append(sc.pending, r)
	}
}

// gather takes the requests there are, waiting up to the grace time
// for the sequences of the last step. It reports false when the
// scheduler is closing.
func (sc *Scheduler) gather() bool {
	if sc.unasked > 0 {
		grace := sc.opts.Grace
		if grace <= 0 {
			grace = min(max(sc.last/2, 2*time.Millisecond), 100*time.Millisecond)
		}
		sc.timer.Reset(grace)
		for sc.unasked > 0 {
			select {
			case r := <-sc.in:
				sc.take(r)
			case <-sc.timer.C:
				// late: not waited for again until they ask
				for _, q := range sc.exp {
					if q.expected && !q.slow {
						q.slow = true
					}
				}
				sc.unasked = 0
			case <-sc.quit:
				return false
			}
		}
		sc.timer.Stop()
	}
	for {
		select {
		case r := <-sc.in:
			sc.take(r)
			continue
		case <-sc.quit:
			return false
		default:
		}
		return true
	}
}

// step computes one step of the pending requests: every decode, and
// prompts' chunks within the chunk size (all of maxBatch when nothing
// decodes), and answers those that are done.
func (sc *Scheduler) step() {
	// cancelled requests leave first
	keep := sc.pending[:0]
	for _, r := range sc.pending {
		if err := r.ctx.Err(); err != nil {
			if !r.decode {
				err = fmt.Errorf("prefill stopped at position %d: %w", r.q.s.pos, err)
			}
			r.q.reply <- schedReply{err: err}
			continue
		}
		keep = append(keep, r)
	}
	clear(sc.pending[len(keep):])
	sc.pending = keep
	if len(sc.pending) == 0 {
		sc.exp = sc.exp[:0]
		return
	}
	sc.share()

	sc.steps, sc.reqs = sc.steps[:0], sc.reqs[:0]
	for _, r := range sc.pending {
		if r.decode {
			sc.steps = append(sc.steps, Step{Session: r.q.s, Tokens: r.tokens, Logits: true, AllLogits: r.all})
			sc.reqs = append(sc.reqs, r)
		}
	}
	budget := maxBatch
	if len(sc.steps) > 0 {
		budget = sc.opts.Chunk
	}
	sc.prompts = sc.prompts[:0]
	for _, r := range sc.pending {
		if !r.decode && !r.follow {
			sc.prompts = append(sc.prompts, r)
		}
	}
	if len(sc.prompts) > 0 {
		// prompts in turn, starting with a different one each step
		first := sc.rot % len(sc.prompts)
		sc.rot++
		for j := range sc.prompts {
			if budget == 0 {
				break
			}
			r := sc.prompts[(first+j)%len(sc.prompts)]
			n := min(len(r.tokens), budget)
			budget -= n
			sc.steps = append(sc.steps, Step{Session: r.q.s, Tokens: r.tokens[:n], Logits: n == len(r.tokens) && r.pool == nil, Pool: r.pool})
			sc.reqs = append(sc.reqs, r)
		}
		clear(sc.prompts)
	}

	start := time.Now()
	sc.b.Run(sc.steps)
	sc.last = time.Since(start)
	sc.stats.Lock()
	st := &sc.stats.SchedulerStats
	st.Steps++
	st.MostSequences = max(st.MostSequences, len(sc.steps))
	for i := range sc.steps {
		if sc.reqs[i].decode {
			st.Decodes += int64(len(sc.steps[i].Tokens)) // a Decoder's check: the token and its guesses
		} else {
			st.Prompt += int64(len(sc.steps[i].Tokens))
		}
	}
	sc.stats.Unlock()

	// the requests that are done leave pending before they are answered:
	// once answered, a sequence may ask again at once, reusing its request
	sc.exp, sc.replies = sc.exp[:0], sc.replies[:0]
	for i := range sc.steps {
		sp, r := &sc.steps[i], sc.reqs[i]
		switch {
		case sp.Err != nil:
			r.tokens = nil
			sc.replies = append(sc.replies, reply{r.q, schedReply{err: sp.Err}})
		case len(sp.Tokens) < len(r.tokens):
			r.tokens = r.tokens[len(sp.Tokens):] // more of the prompt next step
		default:
			r.tokens = nil
			q := r.q
			if !r.decode {
				q.waited = st.Steps - r.at
			}
			if r.pool != nil {
				// an embedding: nothing more is asked of this sequence
				sc.replies = append(sc.replies, reply{q, schedReply{}})
				break
			}
			q.expected = true
			sc.unasked++
			sc.exp = append(sc.exp, q)
			sc.replies = append(sc.replies, reply{q, schedReply{logits: sp.Out, rows: sp.Outs}})
		}
	}
	keep = sc.pending[:0]
	for _, r := range sc.pending {
		if r.tokens != nil {
			keep = append(keep, r)
		}
	}
	clear(sc.pending[len(keep):])
	sc.pending = keep
	clear(sc.steps)
	clear(sc.reqs)
	for _, a := range sc.replies {
		a.q.reply <- a.r
	}
	clear(sc.replies)
}

// reply is an answer to send to a sequence.
type reply struct {
	q *Seq
	r schedReply
}

// fail answers every pending request: the scheduler is closing.
func (sc *Scheduler) fail() {
	for _, r := range sc.pending {
		r.q.reply <- schedReply{err: ErrSchedulerClosed}
	}
	sc.pending = nil
}
