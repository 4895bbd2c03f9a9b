package tokenizer

import (
	"container/heap"
	"fmt"
	"sync"
	"unicode/utf8"
)

// bpe is the model: a vocabulary and ranked merges.
type bpe struct {
	vocab  map[string]int // token text (byte-level form for byte-level models) -> id
	merges *pairTable

	// byteLevel models start every word from one symbol per byte
	// (byteIDs); the others start from one symbol per character.
	byteLevel bool
	byteIDs   [256]int // -1 when the byte's character is not in the vocabulary
	byteRunes [256]rune

	byteFallback bool // an unknown character becomes its <0xAB> byte tokens
	unk          int  // id of the unknown token, or -1
	fuseUnk      bool
	ignoreMerges bool // a word that is itself in the vocabulary is one token

	cache *wordCache
}

// merge is what a pair of adjacent symbols becomes.
type merge struct {
	rank int32
	id   int32
}

func pairKey(a, b int) uint64 { return uint64(uint32(a))<<32 | uint64(uint32(b)) }

// addMerge records that left and right merge into left+right with the
// given rank. Both halves and the result must be in the vocabulary.
func (m *bpe) addMerge(left, right string, rank int) error {
	a, ok := m.vocab[left]
	if !ok {
		return fmt.Errorf("merge %d (%q %q): %q is not in the vocabulary", rank, left, right, left)
	}
	b, ok := m.vocab[right]
	if !ok {
		return fmt.Errorf("merge %d (%q %q): %q is not in the vocabulary", rank, left, right, right)
	}
	c, ok := m.vocab[left+right]
	if !ok {
		return fmt.Errorf("merge %d (%q %q): %q is not in the vocabulary", rank, left, right, left+right)
	}
	m.merges.add(pairKey(a, b), merge{rank: int32(rank), id: int32(c)}) // the first (best) rank wins, as in HF
	return nil
}

// word returns the ids of one pre-tokenized piece. For byte-level models
// piece holds the raw bytes; for the others, the normalized text.
func (m *bpe) word(piece string, out []int) []int {
	if ids, ok := m.cache.get(piece); ok {
		return append(out, ids...)
	}
	start := len(out)
	out = m.encodeWord(piece, out)
	m.cache.put(piece, out[start:])
	return out
}

func (m *bpe) encodeWord(piece string, out []int) []int {
	if m.ignoreMerges {
		key := piece
		if m.byteLevel {
			key = byteLevelString(piece, &m.byteRunes)
		}
		if id, ok := m.vocab[key]; ok {
			return append(out, id)
		}
	}
	syms := make([]int, 0, len(piece))
	if m.byteLevel {
		for i := 0; i < len(piece); i++ {
			if id := m.byteIDs[piece[i]]; id >= 0 {
				syms = append(syms, id)
			}
		}
	} else {
		lastUnk := false
		for _, r := range piece {
			if id, ok := m.vocab[string(r)]; ok {
				syms = append(syms, id)
				lastUnk = false
				continue
			}
			if m.byteFallback {
				var buf [utf8.UTFMax]byte
				n := utf8.EncodeRune(buf[:], r)
				all := true
				ids := make([]int, 0, n)
				for _, b := range buf[:n] {
					id, ok := m.vocab[fmt.Sprintf("<0x%02X>", b)]
					if !ok {
						all = false
						break
					}
					ids = append(ids, id)
				}
				if all {
					syms = append(syms, ids...)
					lastUnk = false
					continue
				}
			}
			if m.unk >= 0 && !(m.fuseUnk && lastUnk) {
				syms = append(syms, m.unk)
			}
			lastUnk = m.unk >= 0
		}
	}
	return append(out, m.mergeAll(syms)...)
}

// mergeAll applies merges to syms, always the pair with the lowest rank
// first and, among equal ranks, the leftmost, as the Rust library does.
func (m *bpe) mergeAll(syms []int) []int {
	n := len(syms)
	if n < 2 {
		return syms
	}
	if n <= shortWord {
		return m.mergeShort(syms)
	}
	prev := make([]int, n)
	next := make([]int, n)
	for i := range syms {
		prev[i], next[i] = i-1, i+1
	}
	next[n-1] = -1
	q := make(mergeQueue, 0, n)
	for i := 0; i+1 < n; i++ {
		if mg, ok := m.merges.get(pairKey(syms[i], syms[i+1])); ok {
			q = append(q, candidate{pos: i, rank: mg.rank, id: mg.id})
		}
	}
	heap.Init(&q)
	for q.Len() > 0 {
		c := heap.Pop(&q).(candidate)
		if syms[c.pos] < 0 || next[c.pos] < 0 {
			continue
		}
		r := next[c.pos]
		mg, ok := m.merges.get(pairKey(syms[c.pos], syms[r]))
		if !ok || mg.id != c.id {
			continue // stale: one side was merged since
		}
		syms[c.pos] = int(c.id)
		syms[r] = -1
		next[c.pos] = next[r]
		if next[r] >= 0 {
			prev[next[r]] = c.pos
		}
		if p := prev[c.pos]; p >= 0 {
			if mg, ok := m.merges.get(pairKey(syms[p], syms[c.pos])); ok {
				heap.Push(&q, candidate{pos: p, rank: mg.rank, id: mg.id})
			}
		}
		if nx := next[c.pos]; nx >= 0 {
			if mg, ok := m.merges.get(pairKey(syms[c.pos], syms[nx])); ok {
				heap.Push(&q, candidate{pos: c.pos, rank: mg.rank, id: mg.id})
			}
		}
	}
	out := syms[:0]
	for i := 0; i >= 0; i = next[i] {
		out = append(out, syms[i])
	}
	return out
}

// shortWord is the length up to which mergeShort is used: for the short
// words that make up most text, a scan over an array of ranks beats a heap.
const shortWord = 48

// mergeShort does what mergeAll does, for short words: it keeps the rank of
// every adjacent pair and merges the lowest (leftmost on ties) until none
// is left.
func (m *bpe) mergeShort(syms []int) []int {
	const none = int32(1<<31 - 1)
	var rankBuf, idBuf [shortWord]int32
	n := len(syms)
	ranks, ids := rankBuf[:n-1], idBuf[:n-1]
	look := func(i int) {
		if mg, ok := m.merges.get(pairKey(syms[i], syms[i+1])); ok {
			ranks[i], ids[i] = mg.rank, mg.id
		} else {
			ranks[i] = none
		}
	}
	for i := range ranks {
		look(i)
	}
	for len(ranks) > 0 {
		best := 0
		for i := 1; i < len(ranks); i++ {
			if ranks[i] < ranks[best] {
				best = i
			}
		}
		if ranks[best] == none {
			break
		}
		syms[best] = int(ids[best])
		syms = append(syms[:best+1], syms[best+2:]...)
		ranks = append(ranks[:best], ranks[best+1:]...)
		ids = append(ids[:best], ids[best+1:]...)
		if best < len(ranks) {
			look(best)
		}
		if best > 0 {
			look(best - 1)
		}
	}
	return syms
}

type candidate struct {
	pos  int
	rank int32
	id   int32
}

type mergeQueue []candidate

func (q mergeQueue) Len() int { return len(q) }
func (q mergeQueue) Less(i, j int) bool {
	if q[i].rank != q[j].rank {
		return q[i].rank < q[j].rank
	}
	return q[i].pos < q[j].pos
}
func (q mergeQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *mergeQueue) Push(x any)   { *q = append(*q, x.(candidate)) }
func (q *mergeQueue) Pop() any {
	old := *q
	x := old[len(old)-1]
	*q = old[:len(old)-1]
	return x
}

// wordCache remembers the ids of recent words. It is bounded: once full it
// stops adding, as the Rust library's cache does, so memory stays fixed
// however much text goes through.
type wordCache struct {
	mu  sync.RWMutex
	m   map[string][]int
	max int
}

// cacheWords is how many words the cache holds, and cacheWordLen the
// longest word (in bytes) it keeps.
const (
	cacheWords   = 20000
	cacheWordLen = 256
)

func newWordCache(max int) *wordCache {
	return &wordCache{m: make(map[string][]int, 1024), max: max}
}

func (c *wordCache) get(w string) ([]int, bool) {
	if len(w) > cacheWordLen {
		return nil, false
	}
	c.mu.RLock()
	ids, ok := c.m[w]
	c.mu.RUnlock()
	return ids, ok
}

func (c *wordCache) put(w string, ids []int) {
	if len(w) > cacheWordLen {
		return
	}
	c.mu.Lock()
	if len(c.m) < c.max {
		c.m[w] = append([]int(nil), ids...)
	}
	c.mu.Unlock()
}
