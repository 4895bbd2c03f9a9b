package engine

import "unsafe"

// kvPart is one of the arrays a layer's keys and values are kept in
// (kvSlabs): for float32 and float16, the keys and the values; a KV type
// kept in more arrays (8-bit values and their scales) has more. A KV
// file holds each layer's parts in the order of Model.kvParts, each
// whole and starting at a multiple of kvAlign, so that every part
// can be mapped as its array and checked on its own.
type kvPart struct {
	name string
	// blocks says the part holds whole quant.AttnBlock blocks of
	// positions (the keys), not just the positions.
	blocks bool
	// perPos is the part's bytes per position.
	perPos int
	// finite reports whether the bytes (of whole elements) hold no
	// infinity or NaN; nil where every byte pattern is a value (int8).
	finite func(b []byte) bool
	// bytes is the first n positions of layer l's array as bytes (n
	// within its capacity), without changing the array.
	bytes func(kv *kvSlabs, l, n int) []byte
	// cut sets layer l's array to its first n positions.
	cut func(kv *kvSlabs, l, n int)
	// place makes layer l (of layers) of the array the memory at p, n
	// positions long with room for capPos.
	place func(kv *kvSlabs, layers, l int, p unsafe.Pointer, n, capPos int)
}

// positions is how many positions the part of a sequence of n holds.
func (p *kvPart) positions(n int) int {
	if p.blocks {
		return roundBlock(n)
	}
	return n
}

// kvParts are the arrays of the model's KV type, in file order.
func (m *Model) kvParts() []kvPart {
	kvDim := m.cfg.KVHeads * m.cfg.HeadDim
	if m.kvF16 {
		return []kvPart{
			slabPart("keys", true, kvDim, func(kv *kvSlabs) *[][]uint16 { return &kv.keys16 }, finiteF16),
			slabPart("values", false, kvDim, func(kv *kvSlabs) *[][]uint16 { return &kv.values16 }, finiteF16),
		}
	}
	return []kvPart{
		slabPart("keys", true, kvDim, func(kv *kvSlabs) *[][]float32 { return &kv.keys }, finiteF32),
		slabPart("values", false, kvDim, func(kv *kvSlabs) *[][]float32 { return &kv.values }, finiteF32),
	}
}

// slabPart is the part kept in the arrays arr of kvSlabs, perPos
// elements a position; finite (nil: none) tests its elements.
func slabPart[T any](name string, blocks bool, perPos int, arr func(*kvSlabs) *[][]T, finite func([]T) bool) kvPart {
	var zero T
	size := int(unsafe.Sizeof(zero))
	p := kvPart{name: name, blocks: blocks, perPos: perPos * size}
	p.bytes = func(kv *kvSlabs, l, n int) []byte { return asBytes((*arr(kv))[l][:n*perPos]) }
	p.cut = func(kv *kvSlabs, l, n int) {
		a := *arr(kv)
		a[l] = a[l][:n*perPos]
	}
	p.place = func(kv *kvSlabs, layers, l int, at unsafe.Pointer, n, capPos int) {
		a := arr(kv)
		if *a == nil {
			*a = make([][]T, layers)
		}
		(*a)[l] = unsafe.Slice((*T)(at), capPos*perPos)[:n*perPos]
	}
	if finite != nil {
		p.finite = func(b []byte) bool {
			return finite(unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(b))), len(b)/size))
		}
	}
	return p
}

// asBytes views a slice as its bytes (the file is little endian, as
// every CPU the engine runs on).
func asBytes[T any](x []T) []byte {
	if len(x) == 0 {
		return nil
	}
	var zero T
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(x))), len(x)*int(unsafe.Sizeof(zero)))
}
