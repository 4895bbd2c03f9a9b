package engine

import "github.com/npuchat/npuchat/engine/quant"

// stepper is the scratch memory and the threads of forward steps: a
// Session's own (Prefill, Forward), or a Batch's, which computes the
// tokens of several sessions in one step. Its buffers are reused from
// step to step, one row per token of a step.
type stepper struct {
	x, xb, xb2, ao, q, k, v, hb, hb2 [][]float32
	cos, sin                         [][]float32 // RoPE angles of each token's position
	// rows are the step's tokens' sessions and positions, in order.
	rows []rowRef
	// last and outs are the rows whose logits a step computes (the last
	// token of each segment that asks for them) and their sessions'
	// logits.
	last, outs [][]float32
	att        []quant.AttnScratch // attention buffers, one per thread
	one        [1]segment          // a session's step alone, without allocating

	pool  *pool   // the threads
	mul   mulTask // matrix products, run on pool
	heads attnTask
}

// segment is one session's part of a step: tokens at positions pos,
// pos+1, … of s, and whether the last one's logits are wanted (or, with
// all, every token's: a speculative step's check of its guesses, into
// the session's rows).
type segment struct {
	s      *Session
	tokens []int
	pos    int
	logits bool
	all    bool
}

// rowRef is the session and position of one token of a step.
type rowRef struct {
	s   *Session
	pos int
}

// newStepper makes a stepper whose products run on threads goroutines.
func newStepper(threads int) *stepper {
	st := &stepper{}
	st.pool = newPool(st, threads)
	return st
}

// buffers sizes the scratch rows for a step of n tokens.
func (st *stepper) buffers(c *Config, n int) {
	qDim, kvDim := c.Heads*c.HeadDim, c.KVHeads*c.HeadDim
	batchRows(&st.x, n, c.Hidden)
	batchRows(&st.xb, n, c.Hidden)
	batchRows(&st.xb2, n, c.Hidden)
	batchRows(&st.ao, n, qDim)
	batchRows(&st.q, n, qDim)
	batchRows(&st.k, n, kvDim)
	batchRows(&st.v, n, kvDim)
	batchRows(&st.hb, n, c.FFN)
	batchRows(&st.hb2, n, c.FFN)
	batchRows(&st.cos, n, c.RopeDim/2)
	batchRows(&st.sin, n, c.RopeDim/2)
}
