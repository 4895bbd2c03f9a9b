package tokenizer

import (
	"math/rand/v2"
	"testing"
)

// pairTable behaves like a map, through growth and duplicate keys.
func TestPairTable(t *testing.T) {
	tab := newPairTable(1) // starts small, so it grows many times
	ref := map[uint64]merge{}
	r := rand.New(rand.NewPCG(5, 6))
	for i := 0; i < 20000; i++ {
		k := pairKey(r.IntN(300), r.IntN(300))
		v := merge{rank: int32(i), id: int32(r.IntN(1000))}
		_, dup := ref[k]
		if added := tab.add(k, v); added == dup {
			t.Fatalf("add(%x) = %v with the key already present: %v", k, added, dup)
		}
		if !dup {
			ref[k] = v
		}
	}
	for a := 0; a < 310; a++ {
		for b := 0; b < 310; b++ {
			k := pairKey(a, b)
			got, ok := tab.get(k)
			want, wok := ref[k]
			if ok != wok || got != want {
				t.Fatalf("get(%d,%d) = %v %v, want %v %v", a, b, got, ok, want, wok)
			}
		}
	}
	if tab.n != len(ref) {
		t.Errorf("n = %d, want %d", tab.n, len(ref))
	}
}
