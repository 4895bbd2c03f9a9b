package engine

import (
	"context"
	"fmt"

	"github.com/npuchat/npuchat/engine/quant"
)

// Session is one sequence being computed: its position, its tokens and
// their KV cache. A session is not safe for concurrent use; a model can
// have many. A session made by a KVCache takes its KV memory from the
// cache's budget and can resume from, and keep its KV in, the cache.
type Session struct {
	m      *Model
	pos    int
	maxCtx int
	// kv is the key and value cache per layer (nil until the first
	// position; kv.go). Keys are in blocks of quant.AttnBlock (16)
	// positions, one per KV head in turn: position p = 16b+i, KV head g,
	// dimension d at ((b*KVHeads+g)*HeadDim+d)*16+i (whole blocks, so a
	// partial last block has room for the positions to come). Values are
	// position-major: position p's KV-head values at [p*kvDim,
	// (p+1)*kvDim). float32, float16 or 8-bit with scales (kv.go), as
	// the model's LoadOptions.KVCacheType says.
	kv *kvSlabs
	// tokens are the tokens at positions 0..pos-1 (what kv holds).
	tokens []int
	// cache accounts kv's memory and stores it between requests (nil:
	// a session of its own, unbudgeted); scope is the CacheScope it was
	// resumed in.
	cache *KVCache
	scope string
	tag   string // the label kept sequences get (SetTag)

	// logits are the last position's vocabulary logits (a step that
	// asked for them writes them here).
	logits []float32
	// rows are each token's logits of a step that asked for all of
	// them (a Decoder checking its guesses), one row per token.
	rows [][]float32
	// own is the session's scratch and threads for steps of its own
	// (Prefill, Forward), made at the first; a Batch computes its
	// sessions with its own stepper instead.
	own *stepper
	tok [1]int // a decode step's token, without allocating
	// kq and kd are a key rounded to 8 bits before it goes into its
	// block (the q8_0 cache).
	kq []int8
	kd []uint16
}

// maxBatch is how many prompt tokens a prefill step computes together:
// each weight row is read once for the batch.
const maxBatch = 32

// NewSession starts an empty sequence that can hold maxContext positions
// (≤ 0: the model's context length, or 4096 when unknown). The KV cache
// grows as positions are added.
func (m *Model) NewSession(maxContext int) *Session {
	c := m.cfg
	if maxContext <= 0 {
		maxContext = c.ContextLength
		if maxContext <= 0 {
			maxContext = 4096
		}
	}
	if c.ContextLength > 0 && maxContext > c.ContextLength {
		maxContext = c.ContextLength
	}
	return &Session{m: m, maxCtx: maxContext, logits: make([]float32, c.VocabSize)}
}

// stepper returns the session's own scratch and threads, made at the
// first step it computes alone.
func (s *Session) stepper() *stepper {
	if s.own == nil {
		s.own = newStepper(s.m.threads)
	}
	return s.own
}

// batchRows returns n rows of size values from *buf, growing it as needed.
func batchRows(buf *[][]float32, n, size int) [][]float32 {
	for len(*buf) < n {
		*buf = append(*buf, make([]float32, size))
	}
	return (*buf)[:n]
}

// Pos is the number of positions computed so far (the next token's position).
func (s *Session) Pos() int { return s.pos }

// MaxContext is the session's position limit.
func (s *Session) MaxContext() int { return s.maxCtx }

// Tokens returns the tokens whose keys and values the session holds, in
// position order (a copy).
func (s *Session) Tokens() []int { return append([]int(nil), s.tokens...) }

// Rewind keeps only the first n positions, so that a new continuation can
// reuse a shared prefix.
func (s *Session) Rewind(n int) error {
	if n < 0 || n > s.pos {
		return fmt.Errorf("rewind to %d: session holds %d positions", n, s.pos)
	}
	if s.kv != nil {
		s.kv.truncate(n, s.m.cfg.KVHeads*s.m.cfg.HeadDim)
	}
	s.pos, s.tokens = n, s.tokens[:n]
	return nil
}

// reserve makes room in the KV slabs for n positions (n ≤ maxCtx),
// taking the memory from the session's cache when it has one. The slabs
// grow by half at a time (a first allocation leaves room for an answer);
// with a cache, the room beyond n is only what the budget has free.
func (s *Session) reserve(n int) error {
	old := 0
	if s.kv != nil {
		old = s.kv.capPos
		if n <= old {
			return nil
		}
	}
	limit := roundBlock(s.maxCtx)
	need := roundBlock(n)
	want := min(limit, roundBlock(max(n, old+old/2)))
	if old == 0 {
		want = min(limit, roundBlock(n+answerRoom))
	}
	if s.cache != nil {
		// what n needs may drop kept sequences; the room beyond it only
		// takes what is free
		per := s.m.kvBytesPerPos()
		extra, err := s.cache.grow(int64(need-old)*per, int64(want-need)*per)
		if err != nil {
			return fmt.Errorf("%d positions: %w", n, err)
		}
		want = need + int(extra/per)
	}
	s.kv = s.m.newKVSlabs(want, s.kv, s.pos)
	return nil
}

// answerRoom is the positions a session's first KV allocation leaves
// past its prompt, so that a short answer does not copy the slabs.
const answerRoom = 256

// Prefill runs every token and returns the last position's logits.
func (s *Session) Prefill(tokens []int) ([]float32, error) {
	return s.PrefillContext(context.Background(), tokens)
}

// PrefillContext is Prefill that stops between tokens when ctx is done
// (a long prompt takes a while on a CPU). The positions computed before
// the cancellation stay in the session.
func (s *Session) PrefillContext(ctx context.Context, tokens []int) ([]float32, error) {
	if len(tokens) == 0 {
		return nil, fmt.Errorf("prefill: no tokens")
	}
	if s.pos+len(tokens) > s.maxCtx {
		return nil, fmt.Errorf("prefill %d tokens at position %d: %w (limit %d positions)", len(tokens), s.pos, ErrContextFull, s.maxCtx)
	}
	for _, t := range tokens {
		if t < 0 || t >= s.m.cfg.VocabSize {
			return nil, fmt.Errorf("prefill: token %d is outside the vocabulary (size %d)", t, s.m.cfg.VocabSize)
		}
	}
	if err := s.reserve(s.pos + len(tokens)); err != nil {
		return nil, fmt.Errorf("prefill %d tokens at position %d: %w", len(tokens), s.pos, err)
	}
	for len(tokens) > 0 {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("prefill stopped at position %d: %w", s.pos, err)
		}
		n := min(len(tokens), maxBatch)
		// Only the last position's logits are needed.
		s.forward(tokens[:n], s.pos, n == len(tokens))
		s.pos += n
		s.tokens = append(s.tokens, tokens[:n]...)
		tokens = tokens[n:]
	}
	return s.logits, nil
}

// Forward computes token at position Pos() and returns the vocabulary
// logits; the slice is valid until the next call.
func (s *Session) Forward(token int) ([]float32, error) {
	if err := s.step(token, true); err != nil {
		return nil, err
	}
	return s.logits, nil
}

// step checks token and the context limit, then computes one position.
func (s *Session) step(token int, logits bool) error {
	c := &s.m.cfg
	if token < 0 || token >= c.VocabSize {
		return fmt.Errorf("token %d is outside the vocabulary (size %d)", token, c.VocabSize)
	}
	if s.pos >= s.maxCtx {
		return fmt.Errorf("position %d: %w (limit %d positions)", s.pos, ErrContextFull, s.maxCtx)
	}
	if err := s.reserve(s.pos + 1); err != nil {
		return fmt.Errorf("position %d: %w", s.pos, err)
	}
	s.tok[0] = token
	s.forward(s.tok[:], s.pos, logits)
	s.pos++
	s.tokens = append(s.tokens, token)
	return nil
}

// remember stores position pos's key and value in layer l's cache (the
// positions before it are there), as the model's KV cache type keeps
// them (float16 rounded, or q8_0 blocks of 32 values per position).
// Keys go into their block (a new block of zeros is added at each 16th
// position), values are appended.
func (s *Session) remember(l, pos int, k, v []float32) {
	c := &s.m.cfg
	hd, kvDim := c.HeadDim, c.KVHeads*c.HeadDim
	const blk = quant.AttnBlock
	b, i := pos/blk, pos%blk
	base := b * blk * kvDim // block b of every KV head
	kv := s.kv
	if s.m.kv == kvQ8 {
		s.rememberQ8(l, pos, k, v)
		return
	}
	if s.m.kv == kvF32 {
		if i == 0 {
			kv.keys[l] = append(kv.keys[l][:base], make([]float32, blk*kvDim)...)
		}
		keys := kv.keys[l][base : base+blk*kvDim]
		for j, x := range k[:kvDim] {
			g, d := j/hd, j%hd
			keys[(g*hd+d)*blk+i] = x
		}
		kv.values[l] = append(kv.values[l][:pos*kvDim], v...)
		return
	}
	if i == 0 {
		kv.keys16[l] = append(kv.keys16[l][:base], make([]uint16, blk*kvDim)...)
	}
	keys := kv.keys16[l][base : base+blk*kvDim]
	for j, x := range k[:kvDim] {
		g, d := j/hd, j%hd
		keys[(g*hd+d)*blk+i] = quant.F32ToF16(x)
	}
	vals := kv.values16[l][:pos*kvDim]
	for _, x := range v {
		vals = append(vals, quant.F32ToF16(x))
	}
	kv.values16[l] = vals
}

// rememberQ8 is remember for the q8_0 cache: the key and the value are
// rounded per 32 dimensions (quant.QuantizeKV8, as llama.cpp rounds its
// q8_0 cache); the key's values and scales go into its block (scale of
// dimension block c of lane i at c*16+i), the value's are appended.
func (s *Session) rememberQ8(l, pos int, k, v []float32) {
	c := &s.m.cfg
	kvDim := c.KVHeads * c.HeadDim
	const blk, b8 = quant.AttnBlock, quant.KVBlock8
	b, i := pos/blk, pos%blk
	base := b * blk * kvDim
	kv := s.kv
	if i == 0 {
		kv.keys8[l] = append(kv.keys8[l][:base], make([]int8, blk*kvDim)...)
		kv.keysD[l] = append(kv.keysD[l][:base/b8], make([]uint16, blk*kvDim/b8)...)
	}
	if len(s.kq) < kvDim {
		s.kq, s.kd = make([]int8, kvDim), make([]uint16, kvDim/b8)
	}
	quant.QuantizeKV8(k[:kvDim], s.kq, s.kd)
	keys := kv.keys8[l][base : base+blk*kvDim]
	for j, q := range s.kq[:kvDim] {
		keys[j*blk+i] = q // j = g*HeadDim+d: KV head g's dimension d
	}
	ds := kv.keysD[l][base/b8 : (base+blk*kvDim)/b8]
	for j, d := range s.kd[:kvDim/b8] {
		ds[j*blk+i] = d
	}
	n := pos * kvDim
	vals := append(kv.values8[l][:n], make([]int8, kvDim)...)
	vd := append(kv.valuesD[l][:n/b8], make([]uint16, kvDim/b8)...)
	quant.QuantizeKV8(v[:kvDim], vals[n:], vd[n/b8:])
	kv.values8[l], kv.valuesD[l] = vals, vd
}
