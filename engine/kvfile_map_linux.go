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
	// a file not in the page cache (after a reboot) is read ahead as a
	// whole, not a fault at a time (only advice: nothing to do if refused)
	_ = unix.Fadvise(int(f.Fd()), 0, lo.size(), unix.FADV_WILLNEED)
	// the head's zeros and the checksums are read; the head is checked
	// before anything is mapped
	rest := make([]byte, lo.head-int64(raw))
	want := make([]byte, 4*lo.count())
	if _, err := f.ReadAt(rest, int64(raw)); err != nil {
		return nil, nil, true, fmt.Errorf("KV file: head: %w", err)
	}
	if _, err := f.ReadAt(want, lo.sums()); err != nil {
		return nil, nil, true, fmt.Errorf("KV file: checksums: %w", err)
	}
	sum.Write(rest)
	sums := make([]uint32, lo.count())
	sums[0] = sum.Sum32()
	if err := lo.check(want[:4], sums[:1]); err != nil {
		return nil, nil, true, err
	}

	keep := keptOf(h.Tokens, opts)
	capPos := roundBlock(max(opts.Capacity, keep, 1))
	// each array's room: its part of the file, mapped, then anonymous
	// memory up to its capacity
	room := make([]int64, len(lo.parts))
	var layer int64
	for i, p := range lo.parts {
		room[i] = alignUp(max(int64(capPos*p.perPos), lo.sizes[i]))
		layer += room[i]
	}
	reg, err := kvMaps.take(uintptr(int64(lo.layers) * layer))
	if err != nil {
		return nil, nil, false, nil
	}
	arrayAt := func(l, i int) unsafe.Pointer {
		off := int64(l) * layer
		for _, r := range room[:i] {
			off += r
		}
		return unsafe.Add(reg.base, off)
	}
	for l := range lo.layers {
		for i := range lo.parts {
			if _, err := unix.MmapPtr(int(f.Fd()), lo.at(l, i), arrayAt(l, i), uintptr(lo.sizes[i]),
				unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_FIXED); err != nil {
				kvMaps.give(reg)
				return nil, nil, false, nil
			}
		}
	}
	runtime.KeepAlive(f)

	// the checksums of every part, and the kept values' finiteness, on two
	// threads, the parts dealt out in turn
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
			for j := 1 + k; j < len(sums); j += len(errs) {
				l, i := (j-1)/len(lo.parts), (j-1)%len(lo.parts)
				p := &lo.parts[i]
				b := unsafe.Slice((*byte)(arrayAt(l, i)), lo.sizes[i])
				sums[j] = crc32.Update(0, castagnoli, b)
				if p.finite != nil && !p.finite(b[:p.positions(keep)*p.perPos]) && errs[k] == nil {
					errs[k] = fmt.Errorf("KV file: %s holds a value that is not finite", lo.name(j))
				}
			}
		}()
	}
	wg.Wait()
	if err := lo.check(want, sums); err != nil {
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
	for l := range lo.layers {
		for i, p := range lo.parts {
			p.place(kv, lo.layers, l, arrayAt(l, i), p.positions(keep), capPos)
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
