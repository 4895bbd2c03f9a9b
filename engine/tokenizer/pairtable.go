package tokenizer

// pairTable maps a pair of ids to its merge: an open-addressing hash table
// with linear probing, about twice as fast as a Go map for the 150,000
// merges of a Qwen vocabulary, where lookups are most of BPE's time.
type pairTable struct {
	keys  []uint64 // pairKey+1; 0 marks an empty slot
	vals  []merge
	shift uint
	n     int
}

func newPairTable(capacity int) *pairTable {
	size, shift := 16, uint(60)
	for size < capacity*2 {
		size *= 2
		shift--
	}
	return &pairTable{keys: make([]uint64, size), vals: make([]merge, size), shift: shift}
}

func (t *pairTable) slot(k uint64) int {
	return int((k * 0x9E3779B97F4A7C15) >> t.shift)
}

// get returns the merge of the pair k.
func (t *pairTable) get(k uint64) (merge, bool) {
	k++
	mask := len(t.keys) - 1
	for i := t.slot(k); ; i = (i + 1) & mask {
		switch t.keys[i] {
		case k:
			return t.vals[i], true
		case 0:
			return merge{}, false
		}
	}
}

// add stores v for k unless k is already there; it reports whether it did.
func (t *pairTable) add(k uint64, v merge) bool {
	if (t.n+1)*2 > len(t.keys) {
		t.grow()
	}
	k++
	mask := len(t.keys) - 1
	for i := t.slot(k); ; i = (i + 1) & mask {
		switch t.keys[i] {
		case k:
			return false
		case 0:
			t.keys[i], t.vals[i] = k, v
			t.n++
			return true
		}
	}
}

func (t *pairTable) grow() {
	old := *t
	*t = *newPairTable(len(old.keys))
	for i, k := range old.keys {
		if k != 0 {
			t.add(k-1, old.vals[i])
		}
	}
}
