package grammar

import (
	"fmt"
	"sort"

	"github.com/npuchat/npuchat/engine/tokenizer"
)

// Vocab is a model's vocabulary as the mask needs it: each token's bytes
// in a trie, the tokens a grammar never allows (special and empty ones)
// and the end tokens. It is immutable and safe for concurrent use; build
// one per tokenizer.
type Vocab struct {
	size  int
	bytes [][]byte
	eos   []int
	// banned has a bit per token a grammar never allows (special tokens,
	// tokens with no bytes); the end tokens among them are allowed once
	// the value is finished.
	banned []uint64
	// trie nodes in depth-first preorder: a subtree is a contiguous range,
	// so a refused byte skips to end.
	trie    []trieNode
	tokIDs  []int32
	maxLen  int
	allEOS  []uint64 // the end tokens' bits
	eosMask []uint64 // what a finished value allows: the end tokens
}

type trieNode struct {
	b        byte
	depth    uint16 // 1 for a token's first byte
	end      int32  // index after this node's subtree
	tokFirst int32  // tokIDs[tokFirst:tokFirst+tokN] end here
	tokN     int32
}

// NewVocab builds the trie of tokens (tokens[id] is the bytes of token
// id; nil for ids not in the vocabulary). special[id] marks control
// tokens (nil: none), which a grammar never allows; eos are the tokens
// that end a generation, allowed once the value is complete.
func NewVocab(tokens [][]byte, special []bool, eos []int) (*Vocab, error) {
	n := len(tokens)
	v := &Vocab{size: n, bytes: tokens, banned: make([]uint64, words(n)), allEOS: make([]uint64, words(n))}
	for _, id := range eos {
		if id < 0 || id >= n {
			return nil, fmt.Errorf("grammar vocabulary: end token %d is outside 0..%d", id, n-1)
		}
		v.eos = append(v.eos, id)
		setBit(v.allEOS, id)
	}
	v.eosMask = v.allEOS
	type build struct {
		kids map[byte]*build
		toks []int32
	}
	root := &build{}
	for id, b := range tokens {
		if len(b) == 0 || special != nil && id < len(special) && special[id] || hasBit(v.allEOS, id) {
			setBit(v.banned, id)
			continue
		}
		v.maxLen = max(v.maxLen, len(b))
		nd := root
		for _, c := range b {
			if nd.kids == nil {
				nd.kids = map[byte]*build{}
			}
			k := nd.kids[c]
			if k == nil {
				k = &build{}
				nd.kids[c] = k
			}
			nd = k
		}
		nd.toks = append(nd.toks, int32(id))
	}
	var walk func(nd *build, c byte, depth int)
	walk = func(nd *build, c byte, depth int) {
		i := len(v.trie)
		v.trie = append(v.trie, trieNode{b: c, depth: uint16(depth), tokFirst: int32(len(v.tokIDs)), tokN: int32(len(nd.toks))})
		v.tokIDs = append(v.tokIDs, nd.toks...)
		keys := make([]int, 0, len(nd.kids))
		for k := range nd.kids {
			keys = append(keys, int(k))
		}
		sort.Ints(keys)
		for _, k := range keys {
			walk(nd.kids[byte(k)], byte(k), depth+1)
		}
		v.trie[i].end = int32(len(v.trie))
	}
	keys := make([]int, 0, len(root.kids))
	for k := range root.kids {
		keys = append(keys, int(k))
	}
	sort.Ints(keys)
	for _, k := range keys {
		walk(root.kids[byte(k)], byte(k), 1)
	}
	return v, nil
}

// Size is the number of token ids.
func (v *Vocab) Size() int { return v.size }

// TrieNodes is the number of trie nodes (for benchmarks and logs).
func (v *Vocab) TrieNodes() int { return len(v.trie) }

func words(n int) int { return (n + 63) / 64 }

func setBit(m []uint64, i int) { m[i>>6] |= 1 << (uint(i) & 63) }

func hasBit(m []uint64, i int) bool { return m[i>>6]&(1<<(uint(i)&63)) != 0 }

// TokenizerVocab is the vocabulary of tok: each id's bytes, its special
// tokens (never allowed), and eos, the ids that end a generation.
func TokenizerVocab(tok *tokenizer.Tokenizer, eos []int) (*Vocab, error) {
	n := tok.Size()
	tokens := make([][]byte, n)
	special := make([]bool, n)
	for id := 0; id < n; id++ {
		if b, err := tok.TokenBytes(id); err == nil {
			tokens[id] = b
		}
		special[id] = tok.IsSpecial(id)
	}
	return NewVocab(tokens, special, eos)
}
