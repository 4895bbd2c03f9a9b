package engine

import (
	"github.com/npuchat/npuchat/engine/quant"
)

// kvSlabs is one sequence's keys and values, one slab per layer, in the
// layout the attention kernels read (Session's doc comment): keys in
// blocks of quant.AttnBlock positions, values position-major. Exactly one
// of the float32 and float16 pairs is used (LoadOptions.KVF16).
//
// The slabs are allocated for capPos positions (a multiple of
// quant.AttnBlock) and sliced to what is filled, so remember's appends
// never reallocate; grow makes room explicitly. The memory a sequence
// takes is therefore capPos × the model's bytes per position, exactly,
// which is what a KVCache budgets.
type kvSlabs struct {
	keys, values     [][]float32
	keys16, values16 [][]uint16
	capPos           int
	mapped           bool // the memory is a KV file's pages (ReadKVFile)
}

// kvBytesPerPos is the memory one position takes in a sequence's KV:
// a key and a value of every KV head in every layer.
func (m *Model) kvBytesPerPos() int64 {
	c := &m.cfg
	elem := int64(4)
	if m.kvF16 {
		elem = 2
	}
	return int64(c.Layers) * 2 * int64(c.KVHeads*c.HeadDim) * elem
}

// KVBytes is the memory the keys and values of n positions take (what a
// context of n tokens costs, shown beside the context length setting).
func (m *Model) KVBytes(n int) int64 { return int64(roundBlock(n)) * m.kvBytesPerPos() }

// KVType names the KV cache's element type: "f32" or "f16".
func (m *Model) KVType() string {
	if m.kvF16 {
		return "f16"
	}
	return "f32"
}

// roundBlock rounds n up to whole attention blocks.
func roundBlock(n int) int {
	return (n + quant.AttnBlock - 1) / quant.AttnBlock * quant.AttnBlock
}

// newKVSlabs allocates slabs for capPos positions (rounded up to whole
// blocks), holding the first pos positions of from (nil: none).
func (m *Model) newKVSlabs(capPos int, from *kvSlabs, pos int) *kvSlabs {
	c := &m.cfg
	kvDim := c.KVHeads * c.HeadDim
	capPos = roundBlock(max(capPos, pos, 1))
	kv := &kvSlabs{capPos: capPos}
	nk := roundBlock(pos) * kvDim // keys: whole blocks
	nv := pos * kvDim
	if m.kvF16 {
		kv.keys16, kv.values16 = make([][]uint16, c.Layers), make([][]uint16, c.Layers)
		for l := range c.Layers {
			kv.keys16[l] = make([]uint16, nk, capPos*kvDim)
			kv.values16[l] = make([]uint16, nv, capPos*kvDim)
			if from != nil {
				copy(kv.keys16[l], from.keys16[l][:nk])
				copy(kv.values16[l], from.values16[l][:nv])
			}
		}
		return kv
	}
	kv.keys, kv.values = make([][]float32, c.Layers), make([][]float32, c.Layers)
	for l := range c.Layers {
		kv.keys[l] = make([]float32, nk, capPos*kvDim)
		kv.values[l] = make([]float32, nv, capPos*kvDim)
		if from != nil {
			copy(kv.keys[l], from.keys[l][:nk])
			copy(kv.values[l], from.values[l][:nv])
		}
	}
	return kv
}

// truncate slices every layer to its first n positions (keys in whole
// blocks: the stale positions past n in the last block are overwritten
// before they are read).
func (kv *kvSlabs) truncate(n, kvDim int) {
	nk := roundBlock(n) * kvDim
	for l := range kv.keys {
		kv.keys[l] = kv.keys[l][:nk]
		kv.values[l] = kv.values[l][:n*kvDim]
	}
	for l := range kv.keys16 {
		kv.keys16[l] = kv.keys16[l][:nk]
		kv.values16[l] = kv.values16[l][:n*kvDim]
	}
}
