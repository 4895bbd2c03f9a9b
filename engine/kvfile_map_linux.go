package engine

import (
	"bufio"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"sort"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// mapKV reads f by mapping its keys and values (ReadKVFile). It reports
// mapped false, having decided nothing, where it cannot map (pages
// larger than kvAlign, a mapping refused): the caller reads the file.
func (m *Model) mapKV(f *os.File, identity string, opts ReadKVOptions) (st *StoredKV, h *KVFileHeader, mapped bool, err error) {
	if kvAlign%os.Getpagesize() != 0 {
		return nil, nil, false, nil
	}
	sum := kvSum()
	h, tokens, raw, err := m.readKVHead(bufio.NewReaderSize(io.NewSectionReader(f, 0, 1<<62), 1<<16), identity, sum)
	if err != nil {
		return nil, nil, true, err
	}
	lo := m.layout(h, raw)
	if err := m.checkKVSize(f, lo); err != nil {
		return nil, nil, true, err
	}
	// the head's zeros and the checksums are read; the head is checked
	// before anything is mapped
	rest := make([]byte, lo.head-int64(raw))
	want := make([]byte, 4*(1+2*lo.layers))
	if _, err := f.ReadAt(rest, int64(raw)); err != nil {
		return nil, nil, true, fmt.Errorf("KV file: head: %w", err)
	}
	if _, err := f.ReadAt(want, lo.sums()); err != nil {
		return nil, nil, true, fmt.Errorf("KV file: checksums: %w", err)
	}
	sum.Write(rest)
	sums := make([]uint32, 1+2*lo.layers)
	sums[0] = sum.Sum32()
	if err := checkSums(want[:4], sums[:1]); err != nil {
		return nil, nil, true, err
	}

	n := h.Tokens
	keep := keptOf(n, opts)
	capPos := roundBlock(max(opts.Capacity, keep, 1))
	capBytes := int64(capPos * h.KVDim * lo.elem)
	// each slab's room: its part of the file, mapped, then anonymous
	// memory up to its capacity
	kr, vr := alignUp(max(capBytes, lo.kb)), alignUp(max(capBytes, lo.vb))
	reg, err := kvMaps.take(uintptr(int64(lo.layers) * (kr + vr)))
	if err != nil {
		return nil, nil, false, nil
	}
	keysAt := func(l int) unsafe.Pointer { return unsafe.Add(reg.base, int64(l)*(kr+vr)) }
	valuesAt := func(l int) unsafe.Pointer { return unsafe.Add(keysAt(l), kr) }
	for l := range lo.layers {
		for _, p := range []struct {
			at   unsafe.Pointer
			off  int64
			size int64
		}{{keysAt(l), lo.keysAt(l), lo.kb}, {valuesAt(l), lo.valuesAt(l), lo.vb}} {
			if _, err := unix.MmapPtr(int(f.Fd()), p.off, p.at, uintptr(p.size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_FIXED); err != nil {
				kvMaps.give(reg)
				return nil, nil, false, nil
			}
		}
	}
	runtime.KeepAlive(f)

	// the checksums of every part, and the kept values' finiteness, on two
	// threads, the parts dealt out in turn
	nk, nv := roundBlock(keep)*h.KVDim, keep*h.KVDim
	bytesAt := func(p unsafe.Pointer, size int64) []byte { return unsafe.Slice((*byte)(p), size) }
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for k := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// a file cut short meanwhile (by someone else) faults: an error
			defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
			defer func() {
				if r := recover(); r != nil {
					errs[k] = fmt.Errorf("KV file: changed while it was read (%v)", r)
				}
			}()
			for i := 1 + k; i < len(sums); i += len(errs) {
				l, values := (i-1)/2, i%2 == 0
				at, size, kept := keysAt(l), lo.kb, nk
				if values {
					at, size, kept = valuesAt(l), lo.vb, nv
				}
				b := bytesAt(at, size)
				sums[i] = crc32.Update(0, castagnoli, b)
				finite := finiteF32(unsafe.Slice((*float32)(at), kept))
				if lo.elem == 2 {
					finite = finiteF16(unsafe.Slice((*uint16)(at), kept))
				}
				if !finite && errs[k] == nil {
					what := "keys"
					if values {
						what = "values"
					}
					errs[k] = fmt.Errorf("KV file: layer %d %s holds a value that is not finite", l, what)
				}
			}
		}()
	}
	wg.Wait()
	if err := checkSums(want, sums); err != nil {
		kvMaps.give(reg)
		return nil, nil, true, err
	}
	for _, err := range errs {
		if err != nil {
			kvMaps.give(reg)
			return nil, nil, true, err
		}
	}

	kv := &kvSlabs{capPos: capPos, mapped: true}
	capElems := capPos * h.KVDim
	if lo.elem == 2 {
		kv.keys16, kv.values16 = make([][]uint16, lo.layers), make([][]uint16, lo.layers)
		for l := range lo.layers {
			kv.keys16[l] = unsafe.Slice((*uint16)(keysAt(l)), capElems)[:nk]
			kv.values16[l] = unsafe.Slice((*uint16)(valuesAt(l)), capElems)[:nv]
		}
	} else {
		kv.keys, kv.values = make([][]float32, lo.layers), make([][]float32, lo.layers)
		for l := range lo.layers {
			kv.keys[l] = unsafe.Slice((*float32)(keysAt(l)), capElems)[:nk]
			kv.values[l] = unsafe.Slice((*float32)(valuesAt(l)), capElems)[:nv]
		}
	}
	// the mapping goes when the slabs do (no session, kept sequence or
	// file writer holds them any more)
	runtime.AddCleanup(kv, kvMaps.give, reg)
	return &StoredKV{Scope: h.Scope, Tag: h.Tag, Tokens: tokens[:keep], kv: kv}, h, true, nil
}

// kvMaps are the address ranges of mapped slabs.
var kvMaps kvRegions

// kvRegions hands out address ranges for mapped slabs. A range whose
// slabs are gone is emptied (its pages, the file's or anonymous, are
// dropped) but stays reserved, inaccessible, for the next mapping,
// rather than unmapped: a range unmapped could become the Go heap's,
// and a stale slice into it (one left in a scratch structure after its
// step) would then look to the garbage collector like a pointer into
// the heap. The ranges are address space only, no memory; it is
// process-wide because address space is.
type kvRegions struct {
	mu   sync.Mutex
	free []kvRegion // by size, smallest first
}

// kvRegion is a reserved address range.
type kvRegion struct {
	base unsafe.Pointer
	size uintptr
}

// take returns a range of at least n bytes, readable and writable, of
// zeros not yet backed by memory.
func (r *kvRegions) take(n uintptr) (kvRegion, error) {
	n = (n + kvAlign - 1) / kvAlign * kvAlign
	r.mu.Lock()
	i := sort.Search(len(r.free), func(i int) bool { return r.free[i].size >= n })
	if i < len(r.free) {
		reg := r.free[i]
		r.free = append(r.free[:i], r.free[i+1:]...)
		r.mu.Unlock()
		if _, err := unix.MmapPtr(-1, 0, reg.base, reg.size, unix.PROT_READ|unix.PROT_WRITE,
			unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_FIXED|unix.MAP_NORESERVE); err != nil {
			r.give(reg)
			return kvRegion{}, err
		}
		return reg, nil
	}
	r.mu.Unlock()
	p, err := unix.MmapPtr(-1, 0, nil, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_NORESERVE)
	if err != nil {
		return kvRegion{}, err
	}
	return kvRegion{base: p, size: n}, nil
}

// give empties a range and keeps it for take.
func (r *kvRegions) give(reg kvRegion) {
	if _, err := unix.MmapPtr(-1, 0, reg.base, reg.size, unix.PROT_NONE,
		unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_FIXED|unix.MAP_NORESERVE); err != nil {
		return // still mapped as it was: kept out of the list, never reused
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	i := sort.Search(len(r.free), func(i int) bool { return r.free[i].size >= reg.size })
	r.free = append(r.free, kvRegion{})
	copy(r.free[i+1:], r.free[i:])
	r.free[i] = reg
}
