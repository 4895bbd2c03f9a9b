package grammar

import "sort"

// The literals of enum, const, true/false/null and a tool call's names
// are matched through a byte trie, so that a byte costs one search among
// the next bytes of the literals that are still possible, not a scan of
// all of them (a 100,000-value enum cost seconds per token that way).

// litNode is a node of a grammar's literal trie: its outgoing edges are
// litEdges[first : first+n], sorted by byte; end is the index of the
// literal that ends here (in its node's lits), -1 when none does.
type litNode struct {
	first int32
	n     int32
	end   int32
}

// litEdge leads from a trie node by byte b to node next.
type litEdge struct {
	b    byte
	next int32
}

// buildTrie adds the trie of lits to g and returns its root.
func (g *Grammar) buildTrie(lits [][]byte) int32 {
	// Build with maps, then flatten so that every node's edges are one
	// sorted run.
	type tmp struct {
		kids map[byte]int
		end  int32
	}
	nodes := []tmp{{kids: map[byte]int{}, end: -1}}
	for i, l := range lits {
		at := 0
		for _, c := range l {
			next, ok := nodes[at].kids[c]
			if !ok {
				nodes = append(nodes, tmp{kids: map[byte]int{}, end: -1})
				next = len(nodes) - 1
				nodes[at].kids[c] = next
			}
			at = next
		}
		if nodes[at].end < 0 {
			nodes[at].end = int32(i)
		}
	}
	base := int32(len(g.lit))
	for _, t := range nodes {
		first := int32(len(g.litEdges))
		keys := make([]int, 0, len(t.kids))
		for c := range t.kids {
			keys = append(keys, int(c))
		}
		sort.Ints(keys)
		for _, c := range keys {
			g.litEdges = append(g.litEdges, litEdge{b: byte(c), next: base + int32(t.kids[byte(c)])})
		}
		g.lit = append(g.lit, litNode{first: first, n: int32(len(keys)), end: t.end})
	}
	return base
}

// litNext is the trie node after byte c from node at, or -1.
func (g *Grammar) litNext(at int32, c byte) int32 {
	n := &g.lit[at]
	edges := g.litEdges[n.first : n.first+n.n]
	i := sort.Search(len(edges), func(i int) bool { return edges[i].b >= c })
	if i < len(edges) && edges[i].b == c {
		return edges[i].next
	}
	return -1
}

// litFirst marks the bytes literals of the trie at root can start with.
func (g *Grammar) litFirst(root int32, f *[256]bool) {
	n := &g.lit[root]
	for _, e := range g.litEdges[n.first : n.first+n.n] {
		f[e.b] = true
	}
}
