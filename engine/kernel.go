package engine

import (
	"errors"
	"os"
	"sync"
	"unsafe"

	"github.com/npuchat/npuchat/engine/quant"
	"github.com/npuchat/npuchat/engine/simd"
)

// SIMD levels for LoadOptions.SIMD and $NPUCHAT_SIMD: the fastest kernels
// a model may use, the rungs of the ladder in engine/simd. The CPU's own
// limit applies on top: a level the CPU lacks is replaced, once, at load,
// by the highest one below it that the CPU has (simd.Resolve), and the
// model says so (Model.SIMDChoice).
const (
	// SIMDAuto (or "") uses the best kernels the CPU has.
	SIMDAuto = simd.Auto
	// SIMDAVX512 allows the AVX-512 VNNI kernels on packed weights
	// (quant.Packed), which need AVX-512 F, BW, VL and VNNI.
	SIMDAVX512 = "avx512"
	// SIMDAVXVNNI stops at the 256-bit AVX-VNNI kernels on the same
	// packed weights (CPUs with AVX-VNNI but no AVX-512: Intel Alder Lake
	// and later client cores), the AVX2 attention kernels.
	SIMDAVXVNNI = "avxvnni"
	// SIMDAVX2 stops at the AVX2 kernels (VPMADDUBSW, no VNNI) on the
	// same packed weights: every x86-64 CPU since Haswell and AMD Zen.
	SIMDAVX2 = "avx2"
	// SIMDNone uses the plain-Go kernels only.
	SIMDNone = "none"
)

// resolveSIMD is the one place a model's level is decided: the option
// (or $NPUCHAT_SIMD when it is empty) against this CPU, capped at
// LoadOptions.CPUCeiling (or $NPUCHAT_CPU_CEILING). Load calls it once;
// every kernel choice after it reads the result.
func (o LoadOptions) resolveSIMD() (simd.Choice, error) {
	getenv := o.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	envLevel, envCeiling := simd.Env(getenv)
	asked, by := o.SIMD, "LoadOptions.SIMD"
	if asked == "" {
		asked, by = envLevel, "$"+simd.EnvLevel
		if asked == "" {
			by = ""
		}
	}
	ceiling, cby := o.CPUCeiling, "LoadOptions.CPUCeiling"
	if ceiling == "" {
		ceiling, cby = envCeiling, "$"+simd.EnvCeiling
	}
	return simd.Resolve(simd.Request{Asked: asked, AskedBy: by, Ceiling: ceiling, CeilingBy: cby}, simd.Host())
}

// kernel is how products with one matrix compute. It is chosen once, when
// the model is loaded (prepare), from the matrix's type, the activations
// (8-bit or float) and the model's level; the level's own kernels for it
// (matrix.simd) run.
type kernel int

const (
	kernDot    kernel = iota // quant.Dot on float activations
	kernSums                 // quant.DotSums with block sums (Q4_1, Q4_K on float activations)
	kernF32                  // F32 rows, quant.DotF32Row (SIMD float dot; avx2 and up)
	kernQ8                   // rows as stored on 8-bit activations: quant.DotQ8, DotQ8x4 (avx2 and up, where a type has no packed kernels) or DotQ8Ref (none)
	kernPacked               // quant.Packed on 8-bit activations, the level's packed kernels (quant.HasPackedKernel)
)

// packed reports whether k reads quant.Packed weights.
func (k kernel) packed() bool { return k == kernPacked }

// choose sets m's kernel and level for a model at level lvl.
func (m *matrix) choose(floatAct bool, lvl simd.Level) {
	m.kern, m.simd = chooseKernel(m, floatAct, lvl), lvl
}

// chooseKernel picks m's kernel at level lvl.
func chooseKernel(m *matrix, floatAct bool, lvl simd.Level) kernel {
	q8 := !floatAct && quant.HasQ8Kernel(m.Type) && m.Cols%32 == 0
	switch {
	case q8 && quant.HasPackedKernel(lvl, m.Type) && quant.CanPack(m.Type, m.Cols):
		return kernPacked
	case q8:
		return kernQ8
	case m.Type == quant.Q4_1 || m.Type == quant.Q4_1BF16 || m.Type == quant.Q4_K:
		return kernSums
	case m.Type == quant.F32 && lvl >= simd.AVX2:
		return kernF32
	}
	return kernDot
}

// prepare chooses every product matrix's kernel and packs the weights
// the level's packed kernels read (quant.HasPackedKernel), with the
// level's packer, splitting the packing across threads, and records the
// packer that ran in m.simd. The
// token embedding is only ever read row by row and stays as stored. Once
// a matrix is packed its original bytes are no longer read: release is
// called with them (to drop a file mapping's pages), and a heap copy is
// dropped.
func (m *Model) prepare(choice simd.Choice, threads int, release func([]byte)) error {
	m.simd = choice
	lvl := choice.Level
	mats := []*matrix{&m.output}
	for i := range m.layers {
		w := &m.layers[i]
		mats = append(mats, &w.wq, &w.wk, &w.wv, &w.wo, &w.gate, &w.up, &w.down)
	}
	total := 0
	for _, mat := range mats {
		if mat.packed != nil {
			// packed as it was read (q4nx) or by the cache, at a level
			// that packs: that level's packed kernels
			if k := chooseKernel(mat, m.arith.floatAct, lvl); k.packed() {
				mat.kern = k
			}
			mat.simd = lvl
			continue
		}
		mat.choose(m.arith.floatAct, lvl)
		if mat.kern.packed() {
			total += arenaSize(quant.PackedBytes(mat.Type, mat.Rows, mat.Cols))
		}
	}
	m.arena.reserve(total) // one block: no partly used huge pages between blocks
	var todo []*matrix
	for _, mat := range mats {
		if mat.packed == nil && mat.kern.packed() {
			todo = append(todo, mat)
		}
	}
	for i, mat := range todo {
		if i == 0 {
			m.willNeed(mat.Data)
		}
		if i+1 < len(todo) {
			m.willNeed(todo[i+1].Data) // read ahead while this one packs
		}
		if err := mat.pack(threads, &m.arena); err != nil {
			return err
		}
		if m.cfg.Tied && mat == &m.output {
			continue // the embedding still reads these bytes
		}
		release(mat.Data)
		if !m.mapped(mat.Data) {
			mat.Data = nil
		}
	}
	m.arena.adviseHuge()
	// what packed: here, and the q4nx loader's packing before (both
	// into m.arena)
	m.simd.Packed, m.simd.Packer = m.arena.packed, m.arena.packer
	return nil
}

// willNeed starts reading data ahead if it lies in a mapped file.
func (m *Model) willNeed(data []byte) {
	for _, f := range m.files {
		f.WillNeed(data)
	}
}

// mapped reports whether data lies in one of the model's mapped files.
func (m *Model) mapped(data []byte) bool {
	for _, f := range m.files {
		if f.Contains(data) {
			return true
		}
	}
	return false
}

// pack fills m.packed from m.Data with the packer of m's level
// (quant.Pack), threads groups at a time, in memory from a.
func (m *matrix) pack(threads int, a *arena) error {
	p, err := packParallel(m.simd, m.Type, m.Rows, m.Cols, m.Data, threads, a)
	if err != nil {
		return err
	}
	m.packed = p
	return nil
}

// packParallel is quant.Pack at level l (the model's, resolved once at
// load) with the groups split across threads, into memory from a, which
// records the highest level whose packer ran (arena.packer).
func packParallel(l simd.Level, t quant.Type, rows, cols int, data []byte, threads int, a *arena) (*quant.Packed, error) {
	dst := a.alloc(quant.PackedBytes(t, rows, cols))
	groups := (rows + quant.GroupRows - 1) / quant.GroupRows
	gb := quant.PackedBytes(t, quant.GroupRows, cols) // one group
	threads = max(1, min(threads, groups))
	errs := make([]error, threads)
	used := make([]simd.Level, threads)
	var wg sync.WaitGroup
	for k := range threads {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if lo, hi := share(k, threads, groups); lo < hi {
				populate(dst[lo*gb : hi*gb]) // this thread's share, at once
				_, used[k], errs[k] = quant.Pack(l, t, rows, cols, data, dst, lo, hi)
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	a.packed = true
	for _, u := range used {
		a.packer = max(a.packer, u)
	}
	return quant.NewPacked(t, rows, cols, dst)
}

// hugePage is the size of a transparent huge page on x86-64 and arm64.
const hugePage = 2 << 20

// arenaBlock is the least an arena allocates at a time.
const arenaBlock = 256 << 20

// arena hands out the memory packed weights are written to: cut from
// large blocks aligned to hugePage and, once written, advised to be
// backed by huge pages (adviseHuge), so that the decode kernels, which
// stream every weight once per token, do not miss the TLB every 4 KB. Memory that does not
// fit a block's rest starts a new block; the rest is never touched, so it
// costs address space, not memory. Blocks are ordinary Go memory (the
// garbage collector frees them with the model).
type arena struct {
	free   []byte
	blocks [][]byte // every block, to advise once packed
	// packed is whether packParallel wrote any matrix here, packer the
	// highest level whose packer ran (the model's record: Model.prepare
	// copies both into its simd.Choice)
	packed bool
	packer simd.Level
}

// arenaSize is how much of an arena alloc(n) takes.
func arenaSize(n int) int { return (n + 63) &^ 63 }

// reserve makes sure the next allocations of n bytes in all come from
// one block.
func (a *arena) reserve(n int) {
	if n > 0 && len(a.free) < n {
		a.free = hugeBytes(n)
		a.blocks = append(a.blocks, a.free)
	}
}

// adviseHuge asks for the blocks to be backed by huge pages now that
// they are written. Not before: in a virtual machine that hands free
// memory back to its host in 2 MB blocks (virtio-balloon free page
// reporting, as the Firecracker VM this was measured on does), a huge
// page touched for the first time is such a block, which the host has
// to back at once; packing into huge pages took about 5 times the
// system time of packing into 4 KB pages, which the kernel takes from
// memory it still holds (docs/performance.md, "Loading a GGUF file").
// Advised afterwards, the kernel's khugepaged merges the pages into huge
// ones in the background.
func (a *arena) adviseHuge() {
	for _, b := range a.blocks {
		adviseHuge(b)
	}
	a.blocks = nil
}

// alloc returns n bytes (not necessarily zero: Pack writes every byte).
func (a *arena) alloc(n int) []byte {
	size := arenaSize(n)
	if len(a.free) < size {
		a.free = hugeBytes(max(size, arenaBlock))
		a.blocks = append(a.blocks, a.free)
	}
	b := a.free[:n:n]
	a.free = a.free[size:]
	return b
}

// hugeBytes returns n bytes (rounded up to whole huge pages) starting at
// a huge-page boundary.
func hugeBytes(n int) []byte {
	n = (n + hugePage - 1) &^ (hugePage - 1)
	b := make([]byte, n+hugePage)
	off := int(-uintptr(unsafe.Pointer(&b[0])) & (hugePage - 1))
	return b[off : off+n : off+n]
}
