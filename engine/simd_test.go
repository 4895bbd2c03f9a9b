package engine

import (
	"math"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/npuchat/npuchat/engine/quant"
	"github.com/npuchat/npuchat/engine/sample"
	"github.com/npuchat/npuchat/engine/simd"
	"github.com/npuchat/npuchat/engine/simd/simdtest"
	"github.com/npuchat/npuchat/engine/testmodel"
)

// TestForwardWithoutSIMD runs whole models with the SIMD kernels forced
// off (the plain-Go path other CPUs take) and with them on. On F32 the
// logits agree within float32 summation-order rounding. With 8-bit
// activations the integer block sums are the same, but a last-bit
// difference upstream can round an activation that sits on a rounding
// tie apart (see engine/conformance), which these random models amplify
// to a few percent: so there the logits must agree within that, with the
// same greedy choices but one. And batched prefill (four-vector kernels)
// gives exactly the last logits of token-by-token decoding.
func TestForwardWithoutSIMD(t *testing.T) {
	simdtest.Run(t, []simd.Level{simd.AVX2}, testForwardWithoutSIMD)
}

func testForwardWithoutSIMD(t *testing.T, lvl simd.Level) {
	w := randomWeights(t, 21, testmodel.MiniCPM5Small())
	for _, typ := range []testmodel.TensorType{testmodel.F32, testmodel.Q8_0, testmodel.Q4_0, testmodel.Q4_1} {
		t.Run(typ.String(), func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "m.gguf")
			if err := testmodel.WriteGGUF(p, w, typ); err != nil {
				t.Fatal(err)
			}
			fast := loadT(t, p, LoadOptions{Threads: 2, SIMD: lvl.String()})
			plain := loadT(t, p, LoadOptions{Threads: 2, SIMD: SIMDNone})
			if fast.SIMD() != lvl.String() || plain.SIMD() != SIMDNone {
				t.Fatalf("asked %s and none, ran %s and %s", lvl, fast.SIMDChoice(), plain.SIMDChoice())
			}
			a, b := logitsOf(t, fast, testTokens), logitsOf(t, plain, testTokens)
			tol, agree := 1e-3, 0
			if typ != testmodel.F32 {
				tol = 0.6 // logits spread about 6
			}
			for i := range a {
				for j := range a[i] {
					if d := math.Abs(float64(a[i][j] - b[i][j])); d > tol {
						t.Fatalf("position %d logit %d: SIMD %v, plain Go %v", i, j, a[i][j], b[i][j])
					}
				}
				if sample.Argmax(a[i]) == sample.Argmax(b[i]) {
					agree++
				}
			}
			if agree < len(a)-1 || typ == testmodel.F32 && agree < len(a) {
				t.Errorf("greedy choices agree at %d of %d positions", agree, len(a))
			}
			// batched prefill vs one token at a time, SIMD on
			s := fast.NewSession(0)
			got, err := s.Prefill(testTokens)
			if err != nil {
				t.Fatal(err)
			}
			want := a[len(a)-1]
			for j := range want {
				if got[j] != want[j] {
					t.Fatalf("prefill logit %d: %v, token by token %v", j, got[j], want[j])
				}
			}
		})
	}
}

// TestForwardAllocations: a decoded token allocates nothing beyond the
// KV cache's occasional growth (the matrix products, pool and scratch
// buffers are reused).
func TestForwardAllocations(t *testing.T) {
	w := randomWeights(t, 22, testmodel.MiniCPM5Small())
	p := filepath.Join(t.TempDir(), "m.gguf")
	if err := testmodel.WriteGGUF(p, w, testmodel.Q4_1); err != nil {
		t.Fatal(err)
	}
	s := loadT(t, p, LoadOptions{Threads: 2}).NewSession(4096)
	if _, err := s.Prefill(testTokens); err != nil {
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(200, func() {
		if _, err := s.Forward(7); err != nil {
			t.Fatal(err)
		}
	})
	// The KV cache (2 layers × keys and values) doubles now and then.
	if allocs > 0.5 {
		t.Errorf("%.2f allocations per decoded token", allocs)
	}
}

// TestSessionWorkersStop: a session's worker goroutines end once the
// session is unreachable.
func TestSessionWorkersStop(t *testing.T) {
	w := randomWeights(t, 23, testmodel.MiniCPM5Small())
	p := filepath.Join(t.TempDir(), "m.gguf")
	if err := testmodel.WriteGGUF(p, w, testmodel.Q8_0); err != nil {
		t.Fatal(err)
	}
	m := loadT(t, p, LoadOptions{Threads: 4})
	// Earlier tests' workers may still run: only this test's count.
	before := goroutinesIn(poolWorker)
	sessions := make([]*Session, 5) // held until counted: a GC meanwhile must not stop them
	for i := range sessions {
		sessions[i] = m.NewSession(0)
		if _, err := sessions[i].Prefill(testTokens); err != nil {
			t.Fatal(err)
		}
	}
	mine := newGoroutinesIn(poolWorker, before)
	runtime.KeepAlive(sessions)
	sessions = nil
	if len(mine) < 15 {
		t.Fatalf("%d new workers with 5 sessions of 4 threads: the test does not see the workers", len(mine))
	}
	waitEnded(t, poolWorker, mine, true)
}

// TestSIMDOption: LoadOptions.SIMD (or $NPUCHAT_SIMD) caps the kernels
// each matrix gets at load, an unknown level is an error naming the
// choices and where it came from, and at each level the CPU has (the
// others are skipped) the model runs that level (m.SIMD()) with its
// kernels on every matrix: avx2, avxvnni and avx512 pack, and give logits
// bit-identical to the plain-Go path, one vector or many at a time.
func TestSIMDOption(t *testing.T) {
	w := randomWeights(t, 24, testmodel.MiniCPM5Small())
	for _, typ := range []testmodel.TensorType{testmodel.Q4_0, testmodel.Q4_1, testmodel.Q8_0} {
		t.Run(typ.String(), func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "m.gguf")
			if err := testmodel.WriteGGUF(p, w, typ); err != nil {
				t.Fatal(err)
			}
			if _, err := Load(p, LoadOptions{SIMD: "sse9"}); err == nil || !strings.Contains(err.Error(), "avx512, avxvnni, avx2 or none") || !strings.Contains(err.Error(), "LoadOptions.SIMD") {
				t.Errorf("unknown level: %v", err)
			}
			t.Setenv(simd.EnvLevel, "fast")
			if _, err := Load(p, LoadOptions{}); err == nil || !strings.Contains(err.Error(), simd.EnvLevel) {
				t.Errorf("unknown level in $%s: %v", simd.EnvLevel, err)
			}
			t.Setenv(simd.EnvLevel, SIMDNone)
			if m := loadT(t, p, LoadOptions{}); m.SIMD() != SIMDNone || m.layers[0].wq.kern != kernQ8 || m.layers[0].wq.simd != simd.None {
				t.Errorf("$%s=none: SIMD %s, kernel %d at %s", simd.EnvLevel, m.SIMD(), m.layers[0].wq.kern, m.layers[0].wq.simd)
			}
			if m := loadT(t, p, LoadOptions{SIMD: SIMDAVX2}); m.SIMDChoice().Asked != SIMDAVX2 || m.SIMDChoice().AskedBy != "LoadOptions.SIMD" {
				t.Errorf("the option did not win over $%s: %+v", simd.EnvLevel, m.SIMDChoice().Request)
			}
			t.Setenv(simd.EnvLevel, SIMDAVXVNNI)
			if c := loadT(t, p, LoadOptions{}).SIMDChoice(); c.Asked != SIMDAVXVNNI || c.AskedBy != "$"+simd.EnvLevel {
				t.Errorf("$%s=avxvnni: asked %q by %q", simd.EnvLevel, c.Asked, c.AskedBy)
			}
			t.Setenv(simd.EnvLevel, "")
			plain := logitsOf(t, loadT(t, p, LoadOptions{SIMD: SIMDNone}), testTokens)
			simdtest.Run(t, []simd.Level{simd.AVX2, simd.AVXVNNI, simd.AVX512}, func(t *testing.T, lvl simd.Level) {
				m := loadT(t, p, LoadOptions{SIMD: lvl.String()})
				if m.SIMD() != lvl.String() || m.SIMDChoice().Replaced() {
					t.Fatalf("asked %s on a CPU that has it: %s", lvl, m.SIMDChoice())
				}
				packs := quant.HasPackedKernel(lvl, quant.Type(typ))
				if !packs {
					t.Fatalf("%s has no packed kernels for %s", lvl, typ)
				}
				for _, mat := range []*matrix{&m.layers[0].wq, &m.layers[1].down, &m.output} {
					if mat.simd != lvl || mat.kern.packed() != packs || (mat.packed != nil) != packs || !packs && mat.kern != kernQ8 {
						t.Fatalf("%s: a matrix has kernel %d at %s, packed %v; want packed %v", lvl, mat.kern, mat.simd, mat.packed != nil, packs)
					}
				}
				got := logitsOf(t, m, testTokens) // the one-vector kernels
				for i := range got {
					for j := range got[i] {
						if got[i][j] != plain[i][j] {
							t.Fatalf("%s: position %d logit %d = %v, plain Go %v", lvl, i, j, got[i][j], plain[i][j])
						}
					}
				}
				last, err := m.NewSession(0).Prefill(testTokens) // the many-vector kernels
				if err != nil {
					t.Fatal(err)
				}
				for j, v := range last {
					if want := plain[len(plain)-1][j]; v != want {
						t.Fatalf("%s: prefill logit %d = %v, plain Go %v", lvl, j, v, want)
					}
				}
			})
		})
	}
}

// TestCPUCeiling: a CPU ceiling (LoadOptions.CPUCeiling, else
// $NPUCHAT_CPU_CEILING) makes the CPU show no level above it: a model
// asked for avx512 runs the ceiling's level where the CPU has it (and
// never one above), says what capped it, and chooses that level's
// kernels; the test helper (simdtest) sees the same CPU; the option wins
// over the variable; a ceiling that is not a level is an error naming
// where it came from.
func TestCPUCeiling(t *testing.T) {
	w := randomWeights(t, 27, testmodel.MiniCPM5Small())
	p := filepath.Join(t.TempDir(), "m.gguf")
	if err := testmodel.WriteGGUF(p, w, testmodel.Q4_0); err != nil {
		t.Fatal(err)
	}
	t.Setenv(simd.EnvLevel, "")
	t.Setenv(simd.EnvCeiling, "")
	host := simd.Host()
	for _, ceil := range simd.Levels() {
		for _, byEnv := range []bool{false, true} {
			opts := LoadOptions{SIMD: SIMDAVX512, CPUCeiling: ceil.String()}
			if byEnv {
				opts.CPUCeiling = ""
				t.Setenv(simd.EnvCeiling, ceil.String())
			}
			m := loadT(t, p, opts)
			c := m.SIMDChoice()
			got, _ := simd.Parse(m.SIMD())
			if got > ceil || host.Has(ceil) && got != ceil {
				t.Errorf("ceiling %s (env %v): ran %s (CPU has %s: %v)", ceil, byEnv, got, ceil, host.Has(ceil))
			}
			for l := ceil + 1; l < simd.NumLevels; l++ {
				if c.CPU.Has(l) {
					t.Errorf("ceiling %s: the CPU still shows %s", ceil, l)
				}
				if host.Has(l) && !strings.Contains(c.CPU.Lacks(l), "capped at "+ceil.String()) {
					t.Errorf("ceiling %s: %s is missing because %q", ceil, l, c.CPU.Lacks(l))
				}
			}
			if ceil < simd.AVX512 && host.Has(simd.AVX512) && !strings.Contains(c.String(), "capped at "+ceil.String()) {
				t.Errorf("ceiling %s: the choice says %q", ceil, c)
			}
			if wq := m.layers[0].wq; wq.simd != got || got == simd.None && wq.kern != kernQ8 {
				t.Errorf("ceiling %s: kernel %d at %s", ceil, wq.kern, wq.simd)
			}
			if byEnv {
				if tc := simdtest.CPU(t); tc != c.CPU {
					t.Errorf("ceiling %s: simdtest sees %s, the model %s", ceil, tc, c.CPU)
				}
				t.Setenv(simd.EnvCeiling, "")
			}
			t.Logf("ceiling %s (env %v): %s", ceil, byEnv, c)
		}
	}
	t.Setenv(simd.EnvCeiling, SIMDNone)
	if m := loadT(t, p, LoadOptions{CPUCeiling: SIMDAVX512}); m.SIMD() != host.Best(simd.Top).String() {
		t.Errorf("LoadOptions.CPUCeiling avx512 under $%s=none: ran %s", simd.EnvCeiling, m.SIMD())
	}
	for _, bad := range []struct{ opt, env, by string }{{"sse9", "", "LoadOptions.CPUCeiling"}, {"", "auto", "$" + simd.EnvCeiling}} {
		t.Setenv(simd.EnvCeiling, bad.env)
		if _, err := Load(p, LoadOptions{CPUCeiling: bad.opt}); err == nil || !strings.Contains(err.Error(), bad.by) || !strings.Contains(err.Error(), "avx2 or none") {
			t.Errorf("ceiling %q/%q: %v", bad.opt, bad.env, err)
		}
	}
}

// TestQ4NXLevels: a q4nx model, whose loader packs while it reads, runs
// each level asked for ($NPUCHAT_SIMD) with that level's kernels: packed
// where the level has packed kernels, the rows otherwise.
func TestQ4NXLevels(t *testing.T) {
	w := randomWeights(t, 28, testmodel.MiniCPM5Small())
	dir := filepath.Join(t.TempDir(), "flm")
	if err := testmodel.WriteFLM(dir, w, testmodel.FLMOptions{}); err != nil {
		t.Fatal(err)
	}
	simdtest.Each(t, func(t *testing.T, lvl simd.Level) {
		t.Setenv(simd.EnvLevel, lvl.String())
		m := loadT(t, dir, LoadOptions{})
		s := m.NewSession(0)
		if _, err := s.Prefill(testTokens); err != nil {
			t.Fatal(err)
		}
		packs := quant.HasPackedKernel(lvl, quant.Q4_1BF16)
		if m.SIMD() != lvl.String() || m.layers[0].wq.simd != lvl || m.layers[0].wq.kern.packed() != packs {
			t.Errorf("model SIMD %s, kernel %d at %s (packed kernels at %s: %v)", m.SIMD(), m.layers[0].wq.kern, m.layers[0].wq.simd, lvl, packs)
		}
	})
}

// TestPackerFollowsLevel: the weights a model repacks at load are packed
// by its own level's packer (quant.Packer: avx512's at avx512, avx2's at
// avxvnni and avx2), never by one above it, and the model's record
// (SIMDChoice, what npuchat bench and the log print) says which ran; at
// none nothing is repacked and the record says nothing of packing. So
// under NPUCHAT_CPU_CEILING=avx2 an AVX-512 machine packs as an AVX2 one
// does. Both loaders that pack: GGUF (Model.prepare) and q4nx (packs
// while it reads; from its cache it does not pack at all).
func TestPackerFollowsLevel(t *testing.T) {
	w := randomWeights(t, 29, testmodel.MiniCPM5Small())
	gguf := filepath.Join(t.TempDir(), "m.gguf")
	if err := testmodel.WriteGGUF(gguf, w, testmodel.Q4_0); err != nil {
		t.Fatal(err)
	}
	flm := filepath.Join(t.TempDir(), "flm")
	if err := testmodel.WriteFLM(flm, w, testmodel.FLMOptions{}); err != nil {
		t.Fatal(err)
	}
	simdtest.Each(t, func(t *testing.T, lvl simd.Level) {
		for _, c := range []struct {
			name, path string
			typ        quant.Type
			cache      bool
		}{{"gguf", gguf, quant.Q4_0, false}, {"q4nx", flm, quant.Q4_1BF16, false}, {"q4nx cached", flm, quant.Q4_1BF16, true}} {
			opts := LoadOptions{Threads: 2, SIMD: lvl.String()}
			if c.cache {
				opts.CacheDir = t.TempDir()
				loadT(t, c.path, opts) // writes the cache the next load reads
			}
			m := loadT(t, c.path, opts)
			ch := m.SIMDChoice()
			if ch.Level != lvl || m.SIMD() != lvl.String() {
				t.Fatalf("%s: asked %s on a CPU that has it, ran %s", c.name, lvl, ch)
			}
			packs := quant.HasPackedKernel(lvl, c.typ) && !c.cache
			if ch.Packed != packs || packs && (ch.Packer != quant.Packer(lvl) || ch.Packer > lvl) {
				t.Errorf("%s at %s: packed %v by %s; want packed %v by %s", c.name, lvl, ch.Packed, ch.Packer, packs, quant.Packer(lvl))
			}
			if says := "weights packed by " + quant.Packer(lvl).String(); strings.Contains(ch.String(), says) != packs || !packs && strings.Contains(ch.String(), "packed") {
				t.Errorf("%s at %s: the record says %q", c.name, lvl, ch)
			}
			if c.cache && m.layers[0].wq.kern.packed() != quant.HasPackedKernel(lvl, c.typ) {
				t.Errorf("%s at %s: kernel %d", c.name, lvl, m.layers[0].wq.kern)
			}
		}
	})
}

// TestPhysicalCores: the default thread count is at least 1 and at most
// the CPUs this process may use.
func TestPhysicalCores(t *testing.T) {
	if n := physicalCores(); n < 1 || n > runtime.NumCPU() {
		t.Errorf("%d physical cores, %d CPUs", n, runtime.NumCPU())
	}
	if n := (LoadOptions{}).threads(); n != physicalCores() {
		t.Errorf("default threads %d, physical cores %d", n, physicalCores())
	}
}

// TestKVTypes: a float16 and a q8_0 KV cache compute the same model as
// the float32 one (the default, llama.cpp-exact in the oracle tests)
// within the rounding of keys and values when stored, with the same
// greedy choices, for prefill and decode alike, and rewinding works on
// them. The model is MiniCPM5Small with 32-dimension heads (q8_0's
// least), float weights; logits spread about 6, a broken cache is off by
// whole units. Measured (see the log), over 64 positions: f16 moves
// logits by at most 0.009 (0.0015 on average) from f32; q8_0 by at most
// 0.24 (0.039 on average) from f32 and from f16, and changes the greedy
// token where two logits are nearly tied.
func TestKVTypes(t *testing.T) {
	shape := testmodel.MiniCPM5Small()
	shape.Heads, shape.HeadDim = 8, 32
	w := randomWeights(t, 25, shape)
	p := filepath.Join(t.TempDir(), "m.gguf")
	if err := testmodel.WriteGGUF(p, w, testmodel.F32); err != nil {
		t.Fatal(err)
	}
	prompt := append(append([]int(nil), testTokens...), seqTokens(9, 56)...) // 64 positions, 4 blocks
	logits := map[string][][]float32{}
	for _, typ := range KVTypes() {
		m := loadT(t, p, LoadOptions{Threads: 2, KVCacheType: typ})
		if m.KVType() != typ {
			t.Fatalf("asked for a %s KV cache: %s", typ, m.KVTypeChoice())
		}
		got := logitsOf(t, m, prompt)
		logits[typ] = got
		s := m.NewSession(0)
		last, err := s.Prefill(prompt)
		if err != nil {
			t.Fatal(err)
		}
		want := got[len(got)-1]
		for j := range want {
			if math.Abs(float64(last[j]-want[j])) > 1e-4 {
				t.Fatalf("%s: prefill logit %d: %v, token by token %v", typ, j, last[j], want[j])
			}
		}
		if err := s.Rewind(3); err != nil {
			t.Fatal(err)
		}
		l, err := s.Forward(prompt[3])
		if err != nil {
			t.Fatal(err)
		}
		for j := range l {
			if math.Abs(float64(l[j]-got[3][j])) > 1e-4 {
				t.Fatalf("%s: after rewind, logit %d: %v, want %v", typ, j, l[j], got[3][j])
			}
		}
	}
	for _, tc := range []struct {
		typ, vs string
		most    float64
	}{{KVTypeF16, KVTypeF32, 0.05}, {KVTypeQ8, KVTypeF32, 0.5}, {KVTypeQ8, KVTypeF16, 0.5}} {
		got, ref := logits[tc.typ], logits[tc.vs]
		maxd, sum, n, spread, flips := 0.0, 0.0, 0, 0.0, 0
		for i := range got {
			rowd := 0.0
			for j := range got[i] {
				d := math.Abs(float64(got[i][j] - ref[i][j]))
				maxd, sum, n, rowd = max(maxd, d), sum+d, n+1, max(rowd, d)
				spread = max(spread, math.Abs(float64(ref[i][j])))
			}
			// a greedy choice may change only between two logits closer
			// than the cache's rounding moved them
			if a, b := sample.Argmax(got[i]), sample.Argmax(ref[i]); a != b {
				flips++
				if gap := float64(ref[i][b] - ref[i][a]); gap > 2*rowd {
					t.Errorf("%s vs %s, position %d: greedy %d, %d %.3g apart (logits moved %.3g)", tc.typ, tc.vs, i, a, b, gap, rowd)
				}
			}
		}
		if maxd > tc.most || maxd == 0 {
			t.Errorf("%s vs %s: logits move by %g (want a little, not 0, under %g)", tc.typ, tc.vs, maxd, tc.most)
		}
		t.Logf("%s vs %s KV cache: logits differ by at most %.3g, on average %.3g (largest logit %.3g); greedy differs at %d of %d positions (near ties)",
			tc.typ, tc.vs, maxd, sum/float64(n), spread, flips, len(got))
	}
}
