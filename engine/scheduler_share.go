package engine

import "github.com/npuchat/npuchat/engine/quant"

// share lets prompts that start alike compute their shared prefix once:
// two requests arriving together with the same long system prompt, or
// one arriving while another with its prefix is still being computed
// (the KV cache's prefix reuse, Session.Resume, only finds sequences
// kept after their request ended). For each pending prompt it looks for
// a sequence pending beside it, of the same KV cache and scope (so one
// client cannot time another's prompt), whose tokens share more whole
// attention blocks with it than it holds. When that sequence has
// computed them, their keys and values are copied into the prompt's
// session (a memory copy, far cheaper than computing them; every step's
// sessions belong to the loop, their goroutines waiting for its answer);
// until then the prompt follows it: it takes no part of the step's
// prompt budget, which goes to the one computing the prefix.
//
// A sequence leads another when it has computed more positions, or as
// many and joined first: a strict order, so that no two follow each
// other, and every step computes something.
func (sc *Scheduler) share() {
	for i, r := range sc.pending {
		r.follow = false
		s := r.q.s
		if r.decode || r.pool != nil || s.cache == nil || s.kv == nil {
			continue // an embedding computes every position: it takes no copy
		}
		total := s.pos + len(r.tokens)
		var lead *schedReq
		best := 0
		for j, l := range sc.pending {
			ls := l.q.s
			if j == i || l.pool != nil || ls.cache != s.cache || ls.scope != s.scope || ls.pos < s.pos || (ls.pos == s.pos && j > i) {
				continue
			}
			// at most all but the last prompt token (its logits are the
			// prompt's own), in whole blocks (a copy takes whole blocks
			// of keys)
			n := min(sharedPrefix(s, r.tokens, ls, l.tokens), total-1) / quant.AttnBlock * quant.AttnBlock
			if n >= s.pos+quant.AttnBlock && n > best {
				lead, best = l, n
			}
		}
		if lead == nil {
			continue
		}
		ls := lead.q.s
		if ls.pos < best {
			r.follow = true // lead computes them first
			continue
		}
		copied := best - s.pos
		s.kv = s.m.newKVSlabs(s.kv.capPos, ls.kv, best) // the same room: the same bytes of the budget
		s.tokens = append([]int(nil), ls.tokens[:best]...)
		s.pos = best
		r.tokens = r.tokens[copied:]
		r.q.copied += copied
		sc.stats.Lock()
		sc.stats.Shared += int64(copied)
		sc.stats.Unlock()
	}
}

// sharedPrefix is how many leading tokens the sequences a (its session's
// tokens, then at) and b (likewise) have in common.
func sharedPrefix(a *Session, at []int, b *Session, bt []int) int {
	tok := func(s *Session, rest []int, k int) (int, bool) {
		if k < len(s.tokens) {
			return s.tokens[k], true
		}
		if k -= len(s.tokens); k < len(rest) {
			return rest[k], true
		}
		return 0, false
	}
	n := 0
	for {
		x, ok := tok(a, at, n)
		y, ok2 := tok(b, bt, n)
		if !ok || !ok2 || x != y {
			return n
		}
		n++
	}
}
