package grammar

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"unsafe"
)

// maskCacheSize is how many masks a Masker keeps (about 16 KiB each for a
// 130,000-token vocabulary).
const maskCacheSize = 128

// Masker computes token masks of one grammar over one vocabulary and
// caches them by automaton state. It is safe for concurrent use; build
// one per grammar and vocabulary and keep it (see [Cache]).
type Masker struct {
	g *Grammar
	v *Vocab

	mu    sync.Mutex // guards cache and ring
	cache map[string][]uint64
	ring  []string // insertion order, for eviction
	// Walks and Hits count full trie walks and cache hits (for tests and
	// benchmarks).
	walks, hits int
}

// NewMasker returns the masker of g over v.
func NewMasker(g *Grammar, v *Vocab) *Masker {
	return &Masker{g: g, v: v, cache: map[string][]uint64{}}
}

// Grammar is the grammar the masker applies.
func (m *Masker) Grammar() *Grammar { return m.g }

// Stats returns how many masks were computed by a walk of the trie and how
// many came from the cache.
func (m *Masker) Stats() (walks, hits int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.walks, m.hits
}

// NewMatcher starts a generation.
func (m *Masker) NewMatcher() *Matcher {
	return &Matcher{m: m, st: m.g.initial()}
}

// ErrRefused is returned by [Matcher.Accept] for a token the grammar does
// not allow at that point.
var ErrRefused = errors.New("token not allowed by the grammar")

// Matcher is the state of one constrained generation. It is not safe for
// concurrent use.
type Matcher struct {
	m         *Masker
	st        state
	tmp, tmp2 state
	sc        scratch
	bufs      []state // per trie depth, for walks
	key       []byte
	eosSet    bool
}

// Done reports whether the value is finished: only an end token may come.
func (t *Matcher) Done() bool { return t.st.done() }

// CanEnd reports whether the output may stop here (the value is finished,
// or a top-level number or literal is complete).
func (t *Matcher) CanEnd() bool { return t.m.g.canEnd(t.st) }

// Allows reports whether token id may come next.
func (t *Matcher) Allows(id int) bool {
	v := t.m.v
	if id < 0 || id >= v.size {
		return false
	}
	if hasBit(v.banned, id) {
		return hasBit(v.allEOS, id) && t.CanEnd()
	}
	return t.run(v.bytes[id]) == nil
}

// run steps a copy of the state (left in t.tmp) by text, or says which
// byte was refused.
func (t *Matcher) run(text []byte) error {
	t.tmp.set(&t.st)
	for i, c := range text {
		if !t.m.g.advance(&t.tmp2, &t.tmp, c, &t.sc) {
			return fmt.Errorf("byte %d (%q) of %q: %w", i, c, text, ErrRefused)
		}
		t.tmp, t.tmp2 = t.tmp2, t.tmp
	}
	return nil
}

// Accept moves the state past token id. An end token is accepted when the
// output may end, and then leaves the matcher finished.
func (t *Matcher) Accept(id int) error {
	if !t.Allows(id) {
		return fmt.Errorf("token %d: %w", id, ErrRefused)
	}
	if hasBit(t.m.v.banned, id) { // an end token
		t.st.finish()
		return nil
	}
	t.st, t.tmp = t.tmp, t.st
	return nil
}

// AcceptBytes moves the state past text (for a prefix the caller writes
// itself, such as the start of a tool call).
func (t *Matcher) AcceptBytes(text []byte) error {
	if err := t.run(text); err != nil {
		return err
	}
	t.st, t.tmp = t.tmp, t.st
	return nil
}

// Mask sets allowed to the tokens that may come next: len(allowed) must be
// at least (vocabulary size + 63) / 64. The result must not be modified
// by the caller after the next call (it may be shared with the cache): it
// is copied into allowed.
func (t *Matcher) Mask(allowed []uint64) {
	copy(allowed, t.mask())
}

// mask returns the (cached) mask of the current state.
func (t *Matcher) mask() []uint64 {
	m := t.m
	if t.st.done() {
		return m.v.eosMask
	}
	t.key = stateKey(t.key[:0], &t.st)
	m.mu.Lock()
	if mk, ok := m.cache[string(t.key)]; ok {
		m.hits++
		m.mu.Unlock()
		return mk
	}
	m.mu.Unlock()
	mk := t.walk()
	m.mu.Lock()
	m.walks++
	if _, ok := m.cache[string(t.key)]; !ok {
		if len(m.ring) >= maskCacheSize {
			delete(m.cache, m.ring[0])
			m.ring = m.ring[1:]
		}
		k := string(t.key)
		m.cache[k] = mk
		m.ring = append(m.ring, k)
	}
	m.mu.Unlock()
	return mk
}

// stateKey is s as bytes: the number of stacks, their ends, their frames.
func stateKey(dst []byte, s *state) []byte {
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(s.end)))
	for _, e := range s.end {
		dst = binary.LittleEndian.AppendUint32(dst, uint32(e))
	}
	if len(s.f) == 0 {
		return dst
	}
	p := unsafe.Slice((*byte)(unsafe.Pointer(&s.f[0])), len(s.f)*int(unsafe.Sizeof(frame{})))
	return append(dst, p...)
}

// walk computes the mask of the current state: a depth-first walk of the
// token trie, stepping a copy of the state per byte and skipping the
// subtree under a refused byte.
func (t *Matcher) walk() []uint64 {
	g, v := t.m.g, t.m.v
	out := make([]uint64, words(v.size))
	if g.canEnd(t.st) {
		copy(out, v.allEOS)
	}
	if cap(t.bufs) < v.maxLen+1 {
		t.bufs = make([]state, v.maxLen+1)
	}
	bufs := t.bufs[:v.maxLen+1]
	// ref[d] is the buffer that holds the state at depth d (a byte that
	// leaves the state as it was shares its parent's buffer).
	ref := make([]int, v.maxLen+1)
	bufs[0].set(&t.st)
	trie := v.trie
	for i := 0; i < len(trie); {
		nd := &trie[i]
		d := int(nd.depth)
		parent := &bufs[ref[d-1]]
		c := nd.b
		if parent.done() {
			i = int(nd.end) // the value is finished: no byte may follow
			continue
		}
		// A plain character inside a string without limits changes
		// nothing: share the parent's state.
		if c >= 0x20 && c < 0x80 && c != '"' && c != '\\' && g.freeStrings(parent) {
			ref[d] = ref[d-1]
			for _, id := range v.tokIDs[nd.tokFirst : nd.tokFirst+nd.tokN] {
				setBit(out, int(id))
			}
			i++
			continue
		}
		if !g.advance(&bufs[d], parent, c, &t.sc) {
			i = int(nd.end)
			continue
		}
		ref[d] = d
		for _, id := range v.tokIDs[nd.tokFirst : nd.tokFirst+nd.tokN] {
			setBit(out, int(id))
		}
		i++
	}
	return out
}

// freeStrings reports whether every stack of s is inside a string
// without limits (where a plain character changes nothing).
func (g *Grammar) freeStrings(s *state) bool {
	lo := int32(0)
	for _, hi := range s.end {
		if hi == lo {
			return false
		}
		top := &s.f[hi-1]
		if top.st != stStr {
			return false
		}
		if sn := &g.nodes[top.n]; sn.maxLen >= 0 || sn.minLen > 0 || sn.re != nil {
			return false
		}
		lo = hi
	}
	return true
}
