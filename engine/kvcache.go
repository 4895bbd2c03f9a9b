package engine

import (
	"errors"
	"fmt"
	"sync"

	"github.com/npuchat/npuchat/engine/quant"
)

// ErrKVBudget is returned (wrapped) when a session's keys and values
// need more memory than its KVCache's budget can free for it: the
// sessions beside it hold the rest (kept sequences are dropped for it
// first). It is not ErrContextFull: the context has room, and memory
// may be free again when a session beside ends, so a caller waits or
// refuses; it never ends an answer as though its context were full.
var ErrKVBudget = errors.New("the KV cache's memory budget is full")

// KVCache keeps the keys and values of many sequences within one memory
// budget: the sessions it made (the sequences being computed) and the
// sequences kept between requests (the recent chats, an API client's
// long system prompt). A new prompt resumes from the longest stored
// prefix it shares with any kept sequence of its scope; when memory is
// needed, the least recently used kept sequences are dropped (and handed
// to KVCacheOptions.Evicted first, for a disk cache).
//
// Every byte of every sequence's slabs is counted, stored or in use, so
// the budget holds under any sequence of requests; a session is limited
// to the positions the whole budget holds (MaxPositions).
//
// Sharing is by copy: a prompt that shares a prefix with a kept sequence
// whose tail it does not share gets its own copy of the prefix (a memory
// copy, far cheaper than computing it), and the kept sequence stays. A
// kept sequence that the prompt extends (the same chat, one turn on) is
// taken over instead, without a copy. docs/engine.md has the design and
// how batched decoding (several sessions at once) builds on it.
//
// A KVCache is safe for concurrent use; each of its sessions is used by
// one goroutine at a time.
type KVCache struct {
	m       *Model
	evicted func(*StoredKV)

	mu     sync.Mutex // guards the fields below
	budget int64
	used   int64      // bytes of every slab: kept sequences and sessions
	kept   []*kvEntry // kept sequences, in no order (tick orders them)
	tick   uint64
}

// kvEntry is a kept sequence.
type kvEntry struct {
	StoredKV
	bytes  int64
	used   uint64 // c.tick when last stored or matched
	pinned bool   // being copied from: not evictable
}

// StoredKV is a kept sequence's tokens and their keys and values, as a
// disk cache writes and reads it (Model.WriteKV, Model.ReadKV).
type StoredKV struct {
	Scope  string // the CacheScope it was computed for
	Tag    string // the caller's label (the chat it belongs to), for Forget
	Tokens []int  // the tokens at positions 0..len-1
	kv     *kvSlabs
}

// KVCacheOptions configure Model.NewKVCache.
type KVCacheOptions struct {
	// Budget bounds the memory of all keys and values, in bytes (at
	// least one attention block of positions; less is raised to it).
	Budget int64
	// Evicted, when set, is called with each kept sequence dropped to
	// make room, after it left the cache (its keys and values stay valid
	// while the call runs, and may be kept by it). It runs on the
	// goroutine that needed the memory, without the cache's lock.
	Evicted func(*StoredKV)
}

// KVStats describe what a KVCache holds.
type KVStats struct {
	Sequences int   // kept sequences
	Tokens    int   // their positions
	Bytes     int64 // memory of every sequence's keys and values, kept or in use
	Budget    int64 // the budget
}

// takeOverTail is the longest tail of a kept sequence that a prompt
// which does not share it may discard by taking the sequence over rather
// than copying its prefix: recomputing at most one block of tokens, if
// that sequence's chat comes back, costs less than the copy's memory.
// (The same chat one turn on extends its sequence: a tail of 0.)
const takeOverTail = 16

// NewKVCache returns an empty cache over the model's sessions.
func (m *Model) NewKVCache(opts KVCacheOptions) *KVCache {
	return &KVCache{m: m, evicted: opts.Evicted, budget: max(opts.Budget, m.KVBytes(1))}
}

// NewSession starts an empty sequence whose KV memory comes from the
// cache, limited to maxContext positions (as Model.NewSession) and to
// what the whole budget holds.
func (c *KVCache) NewSession(maxContext int) *Session {
	s := c.m.NewSession(maxContext)
	s.maxCtx = min(s.maxCtx, c.MaxPositions())
	s.cache = c
	return s
}

// BytesPerToken is the memory one position takes (a key and a value of
// every KV head in every layer): what a context of n tokens costs is
// about n times it.
func (c *KVCache) BytesPerToken() int64 { return c.m.kvBytesPerPos() }

// Type is the KV cache type its sequences are kept as (Model.KVType).
func (c *KVCache) Type() string { return c.m.KVType() }

// MaxPositions is the most positions one sequence can hold within the
// budget (whole attention blocks).
func (c *KVCache) MaxPositions() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return int(c.budget/c.m.kvBytesPerPos()) / 16 * 16
}

// SetBudget changes the budget; kept sequences are dropped, least
// recently used first, until what is held fits (sessions in use keep
// what they hold).
func (c *KVCache) SetBudget(b int64) {
	c.mu.Lock()
	c.budget = max(b, c.m.KVBytes(1))
	out := c.evictLocked(0)
	c.mu.Unlock()
	c.hand(out)
}

// Stats reports what the cache holds.
func (c *KVCache) Stats() KVStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := KVStats{Sequences: len(c.kept), Bytes: c.used, Budget: c.budget}
	for _, e := range c.kept {
		st.Tokens += len(e.Tokens)
	}
	return st
}

// grow takes n more bytes for a session, dropping kept sequences to make
// room, and up to extra bytes more that are free without dropping any
// (room to grow into without copying the slabs); it returns the extra
// bytes taken, whole attention blocks. The extra room is at most half
// of what is free after n, so that a session never takes all the room
// the sessions beside it, or one about to start, need for their own
// positions. It fails with ErrKVBudget, dropping nothing, when the kept
// sequences are not enough for n.
func (c *KVCache) grow(n, extra int64) (int64, error) {
	c.mu.Lock()
	free := c.budget - c.used
	for _, e := range c.kept {
		if !e.pinned {
			free += e.bytes
		}
	}
	if n > free {
		used, budget := c.used, c.budget
		c.mu.Unlock()
		return 0, fmt.Errorf("%d bytes more, %d of %d in use: %w", n, used, budget, ErrKVBudget)
	}
	out := c.evictLocked(n)
	c.used += n
	blk := int64(quant.AttnBlock) * c.m.kvBytesPerPos()
	extra = max(0, min(extra, (c.budget-c.used)/2)) / blk * blk
	c.used += extra
	c.mu.Unlock()
	c.hand(out)
	return extra, nil
}

// release gives back n bytes a session no longer holds.
func (c *KVCache) release(n int64) {
	c.mu.Lock()
	c.used -= n
	c.mu.Unlock()
}

// evictLocked drops the least recently used unpinned kept sequences until
// n more bytes fit, and returns them. c.mu must be held.
func (c *KVCache) evictLocked(n int64) []*StoredKV {
	var out []*StoredKV
	for c.used+n > c.budget {
		i := -1
		for j, e := range c.kept {
			if !e.pinned && (i < 0 || e.used < c.kept[i].used) {
				i = j
			}
		}
		if i < 0 {
			break
		}
		e := c.kept[i]
		c.kept = append(c.kept[:i], c.kept[i+1:]...)
		c.used -= e.bytes
		st := e.StoredKV
		out = append(out, &st)
	}
	return out
}

// hand passes dropped sequences to the Evicted hook, outside the lock.
func (c *KVCache) hand(out []*StoredKV) {
	if c.evicted == nil {
		return
	}
	for _, st := range out {
		c.evicted(st)
	}
}

// Resume prepares the session for prompt in scope: what it holds is kept
// first (Keep), then it takes the keys and values of the longest prefix
// of prompt that a kept sequence of the same scope holds (at most all but
// the last prompt token, whose logits must be computed). It returns how
// many positions it holds now; Prefill the rest of the prompt.
func (s *Session) Resume(scope string, prompt []int) (int, error) {
	c := s.cache
	if c == nil {
		return 0, errors.New("resume: the session is not a KVCache's")
	}
	s.Keep()
	s.scope = scope
	limit := min(len(prompt)-1, s.maxCtx)
	if limit <= 0 {
		return 0, nil
	}

	c.mu.Lock()
	var best *kvEntry
	bestN, bestAt := 0, -1
	for i, e := range c.kept {
		if e.Scope != scope {
			continue
		}
		if n := min(commonPrefix(e.Tokens, prompt), limit); n > bestN {
			best, bestN, bestAt = e, n, i
		}
	}
	if best == nil {
		c.mu.Unlock()
		return 0, nil
	}
	c.tick++
	if len(best.Tokens)-bestN <= takeOverTail && best.kv.capPos <= roundBlock(s.maxCtx) {
		// the prompt extends it: take it over
		c.kept = append(c.kept[:bestAt], c.kept[bestAt+1:]...)
		c.mu.Unlock()
		s.kv, s.tokens, s.pos = best.kv, best.Tokens, len(best.Tokens)
		return bestN, s.Rewind(bestN)
	}
	best.used, best.pinned = c.tick, true
	c.mu.Unlock()

	// copy the shared prefix, with room for the rest of the prompt when
	// it is free
	per := c.m.kvBytesPerPos()
	need := roundBlock(bestN)
	room := min(roundBlock(s.maxCtx), roundBlock(len(prompt)+answerRoom)) - need
	extra, err := c.grow(int64(need)*per, int64(room)*per)
	c.mu.Lock()
	best.pinned = false
	c.mu.Unlock()
	if err != nil {
		return 0, nil // no room for a copy: compute the prompt
	}
	want := need + int(extra/per)
	s.kv = c.m.newKVSlabs(want, best.kv, bestN)
	s.tokens, s.pos = append([]int(nil), prompt[:bestN]...), bestN
	return bestN, nil
}

// Keep stores what the session holds in its cache (under the scope of
// its last Resume) as the most recently used kept sequence, and empties
// the session. A kept sequence that is a prefix of it is dropped (this
// one serves every prompt that one would). Without a cache, or with
// nothing held, Keep only empties the session.
func (s *Session) Keep() {
	kv, tokens := s.kv, s.tokens
	s.kv, s.tokens, s.pos = nil, nil, 0
	c := s.cache
	if c == nil || kv == nil {
		return
	}
	if len(tokens) == 0 {
		c.release(int64(kv.capPos) * c.m.kvBytesPerPos())
		return
	}
	// Give back the room left for an answer that did not come, when it
	// is worth a copy of the slabs (an eighth of them).
	if spare := kv.capPos - roundBlock(len(tokens)); spare >= max(64, kv.capPos/8) {
		c.release(int64(spare) * c.m.kvBytesPerPos())
		kv = c.m.newKVSlabs(len(tokens), kv, len(tokens))
	}
	c.insert(&StoredKV{Scope: s.scope, Tag: s.tag, Tokens: tokens, kv: kv}, false)
}

// Discard empties the session without keeping what it holds.
func (s *Session) Discard() {
	kv := s.kv
	s.kv, s.tokens, s.pos = nil, nil, 0
	if s.cache != nil && kv != nil {
		s.cache.release(int64(kv.capPos) * s.m.kvBytesPerPos())
	}
}

// Insert adds a sequence read back from a disk cache (Model.ReadKV) as
// the most recently used one, for the prompt about to resume from it:
// less recently used kept sequences are dropped to make room. It reports
// whether the sequence was kept (not when it alone exceeds what the
// sequences in use leave of the budget).
func (c *KVCache) Insert(st *StoredKV) bool {
	if st == nil || st.kv == nil || len(st.Tokens) == 0 {
		return false
	}
	return c.insert(st, true)
}

// insert adds st; its bytes are new to the budget when fresh (else they
// are a session's, counted already). c.mu must not be held.
func (c *KVCache) insert(st *StoredKV, fresh bool) bool {
	bytes := int64(st.kv.capPos) * c.m.kvBytesPerPos()
	c.mu.Lock()
	var out []*StoredKV
	if fresh {
		free := c.budget - c.used
		for _, e := range c.kept {
			if !e.pinned {
				free += e.bytes
			}
		}
		if bytes > free {
			c.mu.Unlock()
			return false
		}
		out = c.evictLocked(bytes)
		c.used += bytes
	}
	// drop kept sequences of the scope that this one extends
	keep := c.kept[:0]
	for _, e := range c.kept {
		if e.Scope == st.Scope && !e.pinned && commonPrefix(e.Tokens, st.Tokens) == len(e.Tokens) {
			c.used -= e.bytes
			continue
		}
		keep = append(keep, e)
	}
	clear(c.kept[len(keep):])
	c.kept = keep
	c.tick++
	c.kept = append(c.kept, &kvEntry{StoredKV: *st, bytes: bytes, used: c.tick})
	out = append(out, c.evictLocked(0)...)
	c.mu.Unlock()
	c.hand(out)
	return true
}

// Kept returns the kept sequences, most recently used first (their keys
// and values stay valid even if the cache drops them), for writing them
// to a disk cache when the program stops.
func (c *KVCache) Kept() []*StoredKV {
	c.mu.Lock()
	defer c.mu.Unlock()
	es := append([]*kvEntry(nil), c.kept...)
	for i := 1; i < len(es); i++ { // insertion sort by recency, newest first
		for j := i; j > 0 && es[j].used > es[j-1].used; j-- {
			es[j], es[j-1] = es[j-1], es[j]
		}
	}
	out := make([]*StoredKV, len(es))
	for i, e := range es {
		st := e.StoredKV
		out[i] = &st
	}
	return out
}

// Match reports how many leading tokens of prompt a kept sequence of
// scope holds (0 when none), without taking anything.
func (c *KVCache) Match(scope string, prompt []int) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	best := 0
	for _, e := range c.kept {
		if e.Scope == scope {
			best = max(best, commonPrefix(e.Tokens, prompt))
		}
	}
	return best
}

// Forget drops the kept sequences of a tag (a deleted chat's).
func (c *KVCache) Forget(tag string) {
	c.mu.Lock()
	keep := c.kept[:0]
	for _, e := range c.kept {
		if e.Tag == tag && !e.pinned {
			c.used -= e.bytes
			continue
		}
		keep = append(keep, e)
	}
	clear(c.kept[len(keep):])
	c.kept = keep
	c.mu.Unlock()
}

// SetTag labels what the session keeps from now on (Keep) with the
// caller's tag: the chat the prompt belongs to, so that KVCache.Forget
// drops it with the chat.
func (s *Session) SetTag(tag string) { s.tag = tag }

// Clear drops every kept sequence (without the Evicted hook).
func (c *KVCache) Clear() {
	c.mu.Lock()
	for _, e := range c.kept {
		c.used -= e.bytes
	}
	c.kept = nil
	c.mu.Unlock()
}

func commonPrefix(a, b []int) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}
