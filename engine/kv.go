package engine

import (
	"fmt"
	"strings"

	"github.com/npuchat/npuchat/engine/quant"
)

// The KV cache types (LoadOptions.KVCacheType), named as llama.cpp's
// --cache-type-k/-v name them.
const (
	// KVTypeF32 keeps keys and values as float32: the default, whose
	// answers are llama.cpp's token for token in the oracle tests.
	KVTypeF32 = "f32"
	// KVTypeF16 keeps them as float16: half the memory, each value
	// rounded once when it is stored.
	KVTypeF16 = "f16"
	// KVTypeQ8 keeps them as llama.cpp's q8_0 blocks (32 values of 8
	// bits and one float16 scale): about a quarter of float32's memory,
	// half of float16's. It needs a head dimension that is a multiple
	// of 32; a model whose is not keeps float16 (Model.KVTypeChoice).
	KVTypeQ8 = "q8_0"
)

// KVTypes lists the KV cache types, the default first.
func KVTypes() []string { return []string{KVTypeF32, KVTypeF16, KVTypeQ8} }

// ParseKVType checks a KV cache type's name ("" is the default, f32).
func ParseKVType(s string) (string, error) {
	switch s {
	case "":
		return KVTypeF32, nil
	case KVTypeF32, KVTypeF16, KVTypeQ8:
		return s, nil
	}
	return "", fmt.Errorf("KV cache type %q: want one of %s", s, strings.Join(KVTypes(), ", "))
}

// KVTypeBytes32 is the memory one cached key or value element of a KV
// cache type takes, in 32nds of a byte (f32 128, f16 64, q8_0 34: 32
// bytes and a 2-byte scale per 32 values).
func KVTypeBytes32(typ string) int64 {
	switch typ {
	case KVTypeF16:
		return 64
	case KVTypeQ8:
		return 34
	}
	return 128
}

// kvKind is a model's KV cache type.
type kvKind uint8

const (
	kvF32 kvKind = iota
	kvF16
	kvQ8
)

func (k kvKind) String() string { return [...]string{KVTypeF32, KVTypeF16, KVTypeQ8}[k] }

// kvSlabs is one sequence's keys and values, one slab per layer, in the
// layout the attention kernels read (Session's doc comment): keys in
// blocks of quant.AttnBlock positions, values position-major. Exactly one
// of the float32, float16 and 8-bit sets is used (the model's kvKind).
// The 8-bit set is quant.Attn's K8/KD and V8/VD: keys8 in the keys'
// layout with keysD holding, per block, the scale of each position's 32
// dimensions (dimension block c of lane i at c*16+i, for every KV head
// in turn); values8 position-major with valuesD holding each position's
// kvDim/32 scales.
//
// The slabs are allocated for capPos positions (a multiple of
// quant.AttnBlock) and sliced to what is filled, so remember's appends
// never reallocate; grow makes room explicitly. The memory a sequence
// takes is therefore capPos × the model's bytes per position, exactly,
// which is what a KVCache budgets.
type kvSlabs struct {
	keys, values     [][]float32
	keys16, values16 [][]uint16
	keys8, values8   [][]int8
	keysD, valuesD   [][]uint16
	capPos           int
}

// kvBytesPerPos is the memory one position takes in a sequence's KV:
// a key and a value of every KV head in every layer.
func (m *Model) kvBytesPerPos() int64 {
	c := &m.cfg
	return int64(c.Layers) * 2 * int64(c.KVHeads*c.HeadDim) * KVTypeBytes32(m.kv.String()) / 32
}

// KVBytes is the memory the keys and values of n positions take (what a
// context of n tokens costs, shown beside the context length setting).
func (m *Model) KVBytes(n int) int64 { return int64(roundBlock(n)) * m.kvBytesPerPos() }

// KVType names the KV cache's type: KVTypeF32, KVTypeF16 or KVTypeQ8.
func (m *Model) KVType() string { return m.kv.String() }

// KVTypeChoice says which KV cache type was asked for and which is used
// ("q8_0", or "f16 (q8_0 asked: head dimension 16 is not a multiple of
// 32)").
func (m *Model) KVTypeChoice() string { return m.kvChoice }

// resolveKVType is the KV cache type a model with head dimension hd
// keeps for opts, and the sentence KVTypeChoice gives.
func resolveKVType(opts LoadOptions, hd int) (kvKind, string, error) {
	typ, err := ParseKVType(opts.KVCacheType)
	if err != nil {
		return 0, "", err
	}
	if opts.KVCacheType == "" && opts.KVF16 {
		typ = KVTypeF16
	}
	switch typ {
	case KVTypeF16:
		return kvF16, typ, nil
	case KVTypeQ8:
		if hd%quant.KVBlock8 != 0 {
			return kvF16, fmt.Sprintf("%s (%s asked: head dimension %d is not a multiple of %d)", KVTypeF16, typ, hd, quant.KVBlock8), nil
		}
		return kvQ8, typ, nil
	}
	return kvF32, typ, nil
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
	switch m.kv {
	case kvQ8:
		const b8 = quant.KVBlock8
		kv.keys8, kv.values8 = make([][]int8, c.Layers), make([][]int8, c.Layers)
		kv.keysD, kv.valuesD = make([][]uint16, c.Layers), make([][]uint16, c.Layers)
		for l := range c.Layers {
			kv.keys8[l] = make([]int8, nk, capPos*kvDim)
			kv.values8[l] = make([]int8, nv, capPos*kvDim)
			kv.keysD[l] = make([]uint16, nk/b8, capPos*kvDim/b8)
			kv.valuesD[l] = make([]uint16, nv/b8, capPos*kvDim/b8)
			if from != nil {
				copy(kv.keys8[l], from.keys8[l][:nk])
				copy(kv.values8[l], from.values8[l][:nv])
				copy(kv.keysD[l], from.keysD[l][:nk/b8])
				copy(kv.valuesD[l], from.valuesD[l][:nv/b8])
			}
		}
		return kv
	case kvF16:
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
	const b8 = quant.KVBlock8
	for l := range kv.keys8 {
		kv.keys8[l] = kv.keys8[l][:nk]
		kv.values8[l] = kv.values8[l][:n*kvDim]
		kv.keysD[l] = kv.keysD[l][:nk/b8]
		kv.valuesD[l] = kv.valuesD[l][:n*kvDim/b8]
	}
}
