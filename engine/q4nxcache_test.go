package engine

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/npuchat/npuchat/engine/quant"
	"github.com/npuchat/npuchat/engine/simd"
	"github.com/npuchat/npuchat/engine/simd/simdtest"
	"github.com/npuchat/npuchat/engine/testmodel"
)

// TestQ4NXCache: with a cache folder, the first load of a model.q4nx
// writes one cache file there (nothing in the model's folder) and reports
// progress up to the whole file; the next load maps that file (already
// folded: 8 → 2 KV heads) and computes bit-identical logits to an
// uncached load; a changed model.q4nx and another kernel level each make
// their own file, and a damaged cache file is rebuilt, not trusted.
// (The levels are set explicitly, so $NPUCHAT_SIMD does not change the
// test.)
func TestQ4NXCache(t *testing.T) {
	w := randomWeights(t, 31, testmodel.MiniCPM5Small())
	dir := filepath.Join(t.TempDir(), "flm")
	if err := testmodel.WriteFLM(dir, w, testmodel.FLMOptions{ReplicateKV: 4}); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadDir(dir)
	cache := filepath.Join(t.TempDir(), "cache")
	want := logitsOf(t, loadT(t, dir, LoadOptions{Threads: 2, SIMD: SIMDAuto}), testTokens)

	var done, total int64
	first := loadT(t, dir, LoadOptions{Threads: 2, SIMD: SIMDAuto, CacheDir: cache, Progress: func(d, n int64) { done, total = d, n }})
	if first.CacheError() != nil || first.cachedKV != 0 {
		t.Fatalf("first load: cache error %v, from cache %v", first.CacheError(), first.cachedKV != 0)
	}
	if st, _ := os.Stat(filepath.Join(dir, "model.q4nx")); done != total || total != st.Size() {
		t.Errorf("progress ended at %d of %d, file %d bytes", done, total, st.Size())
	}
	files, _ := os.ReadDir(cache)
	if len(files) != 1 {
		t.Fatalf("%d files in the cache folder, want 1", len(files))
	}
	if after, _ := os.ReadDir(dir); len(after) != len(before) {
		t.Errorf("the model folder went from %d to %d entries", len(before), len(after))
	}
	check := func(name string, m *Model) {
		t.Helper()
		got := logitsOf(t, m, testTokens)
		for i := range got {
			for j := range got[i] {
				if got[i][j] != want[i][j] {
					t.Fatalf("%s: position %d logit %d = %v, uncached %v", name, i, j, got[i][j], want[i][j])
				}
			}
		}
	}
	check("first load", first)

	start := time.Now()
	second := loadT(t, dir, LoadOptions{Threads: 2, SIMD: SIMDAuto, CacheDir: cache})
	if second.cachedKV != 4*second.cfg.KVHeads || second.cfg.FileKVHeads != second.cachedKV {
		t.Fatalf("second load did not come from the folded cache: cached %d, KV heads %d of %d", second.cachedKV, second.cfg.KVHeads, second.cfg.FileKVHeads)
	}
	t.Logf("second load %v", time.Since(start))
	check("cached load", second)

	// auto packs where its level has packed kernels (avx2 and up)
	packs := quant.HasPackedKernel(first.simd.Level, quant.Q4_1BF16)
	if packs != first.layers[0].wq.kern.packed() {
		t.Fatalf("auto ran %s: kernel %d, packed kernels %v", first.SIMD(), first.layers[0].wq.kern, packs)
	}

	// the AVX2 and AVX-VNNI levels read the same packed layout: the same
	// file, the same logits (Q4_1BF16 on their 256-bit kernels)
	simdtest.Run(t, []simd.Level{simd.AVX2, simd.AVXVNNI}, func(t *testing.T, lvl simd.Level) {
		m := loadT(t, dir, LoadOptions{Threads: 2, SIMD: lvl.String(), CacheDir: cache})
		if m.SIMD() != lvl.String() || m.layers[0].wq.kern != kernPacked {
			t.Fatalf("%s load: SIMD %s, kernel %d", lvl, m.SIMD(), m.layers[0].wq.kern)
		}
		if m.cachedKV == 0 && packs {
			t.Errorf("the %s load did not use the packed cache the %s load wrote", lvl, first.SIMD())
		}
		check(lvl.String()+" cached load", m)
		check(lvl.String()+" uncached load", loadT(t, dir, LoadOptions{Threads: 2, SIMD: lvl.String()}))
	})

	// another kernel level is another layout: its own file
	plain := loadT(t, dir, LoadOptions{Threads: 2, CacheDir: cache, SIMD: SIMDNone})
	if files, _ := os.ReadDir(cache); packs && len(files) != 2 {
		t.Errorf("%d cache files after a plain-Go load, want 2", len(files))
	}
	// (on a CPU without the packed kernels, auto wrote the rows layout
	// the plain-Go load reads too: then it shares that file)
	if packs && plain.cachedKV != 0 {
		t.Errorf("the plain-Go load used the packed cache (the first load ran %s)", first.SIMD())
	} else if !packs && plain.cachedKV == 0 {
		t.Errorf("the plain-Go load did not use the rows cache the %s load wrote", first.SIMD())
	}

	// a changed source makes a new file
	later := time.Now().Add(time.Hour)
	if err := os.Chtimes(filepath.Join(dir, "model.q4nx"), later, later); err != nil {
		t.Fatal(err)
	}
	if m := loadT(t, dir, LoadOptions{Threads: 2, SIMD: SIMDAuto, CacheDir: cache}); m.cachedKV != 0 {
		t.Error("a changed model.q4nx was served from the old cache")
	}
	// a damaged cache file is not trusted: it is rebuilt
	files, _ = os.ReadDir(cache)
	for _, f := range files {
		p := filepath.Join(cache, f.Name())
		b, _ := os.ReadFile(p)
		if err := os.WriteFile(p, b[:len(b)/2], 0o644); err != nil {
			t.Fatal(err)
		}
	}
	m := loadT(t, dir, LoadOptions{Threads: 2, SIMD: SIMDAuto, CacheDir: cache})
	if m.cachedKV != 0 {
		t.Error("a truncated cache file was used")
	}
	check("rebuilt", m)
	if m := loadT(t, dir, LoadOptions{Threads: 2, SIMD: SIMDAuto, CacheDir: cache}); m.cachedKV == 0 {
		t.Error("the rebuilt cache was not used")
	}
}
