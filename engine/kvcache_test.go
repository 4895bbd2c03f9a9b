package engine

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/npuchat/npuchat/engine/testmodel"
)

// kvModel loads a small random model for the KV cache tests.
func kvModel(t *testing.T, opts LoadOptions) *Model {
	t.Helper()
	return kvModelOf(t, testmodel.Qwen3Small(), opts)
}

// tinyShape is the smallest model the writers make with two layers and
// grouped KV heads: for tests of the cache's bookkeeping, whose checks do
// not depend on the model's size (a position's bytes, whole blocks and
// the budget scale with it), so that many requests stay fast with the
// plain-Go kernels (NPUCHAT_CPU_CEILING=none).
func tinyShape() testmodel.Shape {
	s := testmodel.Qwen3Small()
	s.Hidden, s.FFN, s.Heads, s.KVHeads, s.HeadDim, s.Vocab = 32, 32, 2, 1, 16, 320
	return s
}

func kvModelOf(t *testing.T, shape testmodel.Shape, opts LoadOptions) *Model {
	t.Helper()
	w := randomWeights(t, 3, shape)
	p := filepath.Join(t.TempDir(), "m.gguf")
	if err := testmodel.WriteGGUF(p, w, testmodel.Q8_0); err != nil {
		t.Fatal(err)
	}
	if opts.Threads == 0 {
		opts.Threads = 2
	}
	return loadT(t, p, opts)
}

// seqTokens is n tokens of a seeded sequence (tokens in 1..300).
func seqTokens(seed uint64, n int) []int {
	r := rand.New(rand.NewPCG(seed, 7))
	out := make([]int, n)
	for i := range out {
		out[i] = 1 + r.IntN(300)
	}
	return out
}

func cat(parts ...[]int) []int {
	var out []int
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// freshLogits is the last logits of prompt computed from nothing.
func freshLogits(t *testing.T, m *Model, prompt []int) string {
	t.Helper()
	l, err := m.NewSession(0).Prefill(prompt)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprint(l)
}

// TestKVCacheReusesPrefixAcrossSessions: a prompt that shares a prefix
// with a sequence another session computed resumes from it (taken over
// when the prompt extends it, copied when the prompt leaves its tail),
// computes only the rest, and gets bit for bit the logits of a fresh
// computation; the copied-from sequence stays usable.
func TestKVCacheReusesPrefixAcrossSessions(t *testing.T) {
	for _, f16 := range []bool{false, true} {
		t.Run(fmt.Sprintf("f16=%v", f16), func(t *testing.T) {
			m := kvModel(t, LoadOptions{KVF16: f16})
			c := m.NewKVCache(KVCacheOptions{Budget: 1 << 30})
			system := seqTokens(1, 70) // a shared system prompt
			chatA := cat(system, seqTokens(2, 40))
			chatB := cat(system, seqTokens(3, 25))

			a := c.NewSession(0)
			if n, err := a.Resume("", chatA); err != nil || n != 0 {
				t.Fatalf("first resume: %d, %v", n, err)
			}
			if _, err := a.Prefill(chatA); err != nil {
				t.Fatal(err)
			}
			a.Keep()

			// another session, another chat with the same system prompt: a copy
			b := c.NewSession(0)
			n, err := b.Resume("", chatB)
			if err != nil || n != len(system) {
				t.Fatalf("chat B resumed %d positions (%v), want the system prompt's %d", n, err, len(system))
			}
			l, err := b.Prefill(chatB[n:])
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(l) != freshLogits(t, m, chatB) {
				t.Error("chat B from the copied prefix: logits differ from a fresh computation")
			}
			b.Keep()
			if st := c.Stats(); st.Sequences != 2 || st.Tokens != len(chatA)+len(chatB) {
				t.Errorf("stats %+v, want 2 sequences of %d tokens", st, len(chatA)+len(chatB))
			}

			// chat A one turn on: taken over, only the new turn computed
			nextA := cat(chatA, seqTokens(4, 12))
			n, err = a.Resume("", nextA)
			if err != nil || n != len(chatA) {
				t.Fatalf("chat A's next turn resumed %d (%v), want %d", n, err, len(chatA))
			}
			if c.Stats().Sequences != 1 {
				t.Errorf("after taking chat A over: %d kept, want 1", c.Stats().Sequences)
			}
			l, err = a.Prefill(nextA[n:])
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(l) != freshLogits(t, m, nextA) {
				t.Error("chat A's next turn: logits differ from a fresh computation")
			}
			// decoding on from a resumed sequence equals decoding from scratch
			l1, _ := a.Forward(9)
			got := fmt.Sprint(l1)
			want := freshLogits(t, m, cat(nextA, []int{9}))
			if got != want {
				t.Error("Forward after a resumed prefix differs from a fresh computation")
			}
			a.Keep()

			// another scope sees nothing
			o := c.NewSession(0)
			if n, _ := o.Resume("other client", nextA); n != 0 {
				t.Errorf("another scope resumed %d positions, want 0", n)
			}
			o.Discard()

			// the whole prompt held: all but the last token reused
			d := c.NewSession(0)
			if n, _ := d.Resume("", chatB); n != len(chatB)-1 {
				t.Errorf("a prompt held whole resumed %d, want %d", n, len(chatB)-1)
			}
			d.Discard()
		})
	}
}

// TestKVCacheEvictsLeastRecentlyUsed: when a sequence needs room, the
// kept sequence used longest ago goes first (a match counts as a use),
// and the Evicted hook sees it with its tokens.
func TestKVCacheEvictsLeastRecentlyUsed(t *testing.T) {
	m := kvModel(t, LoadOptions{})
	per := m.KVBytes(16) / 16
	var evicted [][]int
	// room for three 64-token sequences (each kept at exactly 64 positions)
	c := m.NewKVCache(KVCacheOptions{Budget: 3*64*per + 32*per, Evicted: func(st *StoredKV) {
		evicted = append(evicted, st.Tokens)
	}})
	s := c.NewSession(64) // no room past 64 positions: each is kept at 64
	prompts := [][]int{seqTokens(10, 64), seqTokens(11, 64), seqTokens(12, 64)}
	for _, p := range prompts {
		if _, err := s.Resume("", p); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Prefill(p[s.Pos():]); err != nil {
			t.Fatal(err)
		}
		s.Keep()
	}
	if st := c.Stats(); st.Sequences != 3 {
		t.Fatalf("%d kept, want 3 (stats %+v)", st.Sequences, st)
	}
	// use the oldest again (a partial match: copied, so it is a use)
	p0 := cat(prompts[0][:20], seqTokens(13, 20))
	n, err := s.Resume("", p0)
	if err != nil || n != 20 {
		t.Fatalf("resume: %d %v", n, err)
	}
	if _, err := s.Prefill(p0[n:]); err != nil {
		t.Fatal(err)
	}
	s.Keep()
	// The fourth sequence made room: prompts[1] was the least recently used.
	if len(evicted) == 0 || fmt.Sprint(evicted[0]) != fmt.Sprint(prompts[1]) {
		t.Fatalf("evicted %d sequences, first %v; want prompts[1] first", len(evicted), firstOr(evicted))
	}
	if c.Match("", prompts[0]) != 64 {
		t.Error("the sequence used again was evicted")
	}
	if c.Match("", prompts[1]) != 0 {
		t.Error("the least recently used sequence is still there")
	}
}

func firstOr(x [][]int) any {
	if len(x) == 0 {
		return nil
	}
	return x[0]
}

// slabBytes is the memory a sequence's slabs really take (their
// capacities), to check the cache's accounting against.
func slabBytes(kv *kvSlabs) int64 {
	if kv == nil {
		return 0
	}
	var n int64
	for l := range kv.keys {
		n += int64(cap(kv.keys[l])+cap(kv.values[l])) * 4
	}
	for l := range kv.keys16 {
		n += int64(cap(kv.keys16[l])+cap(kv.values16[l])) * 2
	}
	return n
}

// TestKVCacheBudgetHolds: under many prompts of random lengths and
// prefixes, from two sessions, the memory of every slab (counted from
// their real capacities, not the cache's bookkeeping) stays within the
// budget at every step, and the bookkeeping equals it.
func TestKVCacheBudgetHolds(t *testing.T) {
	m := kvModelOf(t, tinyShape(), LoadOptions{KVF16: true})
	budget := m.KVBytes(700)
	c := m.NewKVCache(KVCacheOptions{Budget: budget})
	sessions := []*Session{c.NewSession(0), c.NewSession(0)}
	if got := sessions[0].MaxContext(); got != 704 {
		t.Errorf("a session's limit is %d positions, want the 704 the budget holds", got)
	}
	r := rand.New(rand.NewPCG(5, 5))
	bases := [][]int{seqTokens(20, 300), seqTokens(21, 300), seqTokens(22, 300)}
	check := func(step int) {
		t.Helper()
		real := int64(0)
		for _, e := range c.kept {
			real += slabBytes(e.kv)
		}
		for _, s := range sessions {
			real += slabBytes(s.kv)
		}
		st := c.Stats()
		if real != st.Bytes {
			t.Fatalf("step %d: the slabs take %d bytes, the cache counts %d", step, real, st.Bytes)
		}
		if float64(real) > 1.05*float64(budget) {
			t.Fatalf("step %d: %d bytes held, budget %d", step, real, budget)
		}
	}
	for step := range 120 {
		s := sessions[r.IntN(2)]
		base := bases[r.IntN(len(bases))]
		p := cat(base[:1+r.IntN(len(base)-1)], seqTokens(uint64(100+step), 1+r.IntN(200)))
		if len(p) > s.MaxContext()-8 {
			p = p[:s.MaxContext()-8]
		}
		n, err := s.Resume("", p)
		if err != nil {
			t.Fatal(err)
		}
		check(step)
		if _, err := s.Prefill(p[n:]); err != nil {
			t.Fatalf("step %d: prefill %d at %d: %v", step, len(p)-n, n, err)
		}
		for range r.IntN(8) {
			if _, err := s.Forward(1 + r.IntN(300)); err != nil && !errors.Is(err, ErrContextFull) {
				t.Fatal(err)
			}
		}
		check(step)
		if r.IntN(4) == 0 {
			s.Discard()
		} else {
			s.Keep()
		}
		check(step)
	}
	for _, s := range sessions {
		s.Keep()
	}
	check(-1)
}
