package engine

import (
	"math"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

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
	w := randomWeights(t, 21, testmodel.MiniCPM5Small())
	for _, typ := range []testmodel.TensorType{testmodel.F32, testmodel.Q8_0, testmodel.Q4_0, testmodel.Q4_1} {
		t.Run(typ.String(), func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "m.gguf")
			if err := testmodel.WriteGGUF(p, w, typ); err != nil {
				t.Fatal(err)
			}
			fast := loadT(t, p, LoadOptions{Threads: 2, SIMD: SIMDAVX2})
			plain := loadT(t, p, LoadOptions{Threads: 2, SIMD: SIMDNone})
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
				if argmaxF(a[i]) == argmaxF(b[i]) {
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

func argmaxF(x []float32) int {
	best := 0
	for i, v := range x {
		if v > x[best] {
			best = i
		}
	}
	return best
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
	// let the workers of earlier tests' sessions stop first
	before := runtime.NumGoroutine()
	for range 50 {
		runtime.GC()
		time.Sleep(5 * time.Millisecond)
		n := runtime.NumGoroutine()
		if n == before {
			break
		}
		before = n
	}
	sessions := make([]*Session, 5) // held until counted: a GC meanwhile must not stop them
	for i := range sessions {
		sessions[i] = m.NewSession(0)
		if _, err := sessions[i].Prefill(testTokens); err != nil {
			t.Fatal(err)
		}
	}
	n := runtime.NumGoroutine()
	sessions = nil
	if n < before+15 {
		t.Fatalf("%d goroutines with 5 sessions of 4 threads, %d before: the test does not see the workers", n, before)
	}
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		t.Errorf("%d goroutines after the sessions were dropped, %d before", n, before)
	}
}

// TestSIMDOption: LoadOptions.SIMD (or $NPUCHAT_SIMD) caps the kernels
// each matrix gets at load, an unknown level is an error naming the
// choices, and for each block type every level gives logits
// bit-identical to the plain-Go path: AVX-512, AVX-VNNI and AVX2 on
// packed weights.
func TestSIMDOption(t *testing.T) {
	w := randomWeights(t, 24, testmodel.MiniCPM5Small())
	for _, typ := range []testmodel.TensorType{testmodel.Q4_0, testmodel.Q4_1, testmodel.Q8_0} {
		t.Run(typ.String(), func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "m.gguf")
			if err := testmodel.WriteGGUF(p, w, typ); err != nil {
				t.Fatal(err)
			}
			if _, err := Load(p, LoadOptions{SIMD: "sse9"}); err == nil || !strings.Contains(err.Error(), "avx512, avxvnni, avx2 or none") {
				t.Errorf("unknown level: %v", err)
			}
			t.Setenv(simdEnv, "fast")
			if _, err := Load(p, LoadOptions{}); err == nil || !strings.Contains(err.Error(), simdEnv) {
				t.Errorf("unknown level in $%s: %v", simdEnv, err)
			}
			t.Setenv(simdEnv, SIMDNone)
			if m := loadT(t, p, LoadOptions{}); m.SIMD() != SIMDNone || m.layers[0].wq.kern != kernQ8Ref {
				t.Errorf("$%s=none: SIMD %s, kernel %d", simdEnv, m.SIMD(), m.layers[0].wq.kern)
			}
			t.Setenv(simdEnv, SIMDAVXVNNI)
			if m := loadT(t, p, LoadOptions{}); m.simd != capLevel(levelAVXVNNI) {
				t.Errorf("$%s=avxvnni: SIMD %s, want %s", simdEnv, m.SIMD(), capLevel(levelAVXVNNI))
			}
			t.Setenv(simdEnv, "")
			plain := logitsOf(t, loadT(t, p, LoadOptions{SIMD: SIMDNone}), testTokens)
			for _, c := range []struct {
				lvl  simdLevel
				kern kernel // of the packed levels' matrices
			}{{levelAVX2, kernPackedAVX2}, {levelAVXVNNI, kernPackedAVX}, {levelAVX512, kernPacked}} {
				m := loadT(t, p, LoadOptions{SIMD: c.lvl.String()})
				if want := capLevel(c.lvl); m.simd != want {
					t.Fatalf("SIMD %s: model uses %s, want %s", c.lvl, m.simd, want)
				}
				if m.simd != c.lvl {
					t.Logf("%s: this CPU has no %s (it runs %s)", typ, c.lvl, m.simd)
					continue
				}
				if m.layers[0].wq.kern != c.kern || m.output.kern != c.kern || c.kern.packed() != (m.output.packed != nil) {
					t.Fatalf("%s: kernel %d (output %d), want %d; output packed %v", c.lvl, m.layers[0].wq.kern, m.output.kern, c.kern, m.output.packed != nil)
				}
				got := logitsOf(t, m, testTokens) // the one-vector kernels
				for i := range got {
					for j := range got[i] {
						if got[i][j] != plain[i][j] {
							t.Fatalf("%s: position %d logit %d = %v, plain Go %v", c.lvl, i, j, got[i][j], plain[i][j])
						}
					}
				}
				last, err := m.NewSession(0).Prefill(testTokens) // the many-vector kernels
				if err != nil {
					t.Fatal(err)
				}
				for j, v := range last {
					if want := plain[len(plain)-1][j]; v != want {
						t.Fatalf("%s: prefill logit %d = %v, plain Go %v", c.lvl, j, v, want)
					}
				}
			}
		})
	}
}

// TestSIMDLevels: a level resolves to the highest one up to it that the
// CPU runs, which need not be the next one down (AVX-512 VNNI without
// AVX-VNNI exists), and names itself.
func TestSIMDLevels(t *testing.T) {
	t.Setenv(simdEnv, "") // "" means auto here
	for _, c := range []struct {
		opt  string
		want simdLevel
	}{
		{"", cpuLevel()}, {SIMDAuto, cpuLevel()}, {SIMDAVX512, capLevel(levelAVX512)},
		{SIMDAVXVNNI, capLevel(levelAVXVNNI)}, {SIMDAVX2, capLevel(levelAVX2)}, {SIMDNone, levelNone},
	} {
		got, err := LoadOptions{SIMD: c.opt}.simdLevel()
		if err != nil || got != c.want {
			t.Errorf("SIMD %q: %s, %v; want %s", c.opt, got, err, c.want)
		}
		if !cpuHas(got) || got > c.want {
			t.Errorf("SIMD %q resolves to %s, which this CPU does not run", c.opt, got)
		}
	}
	for l := levelNone; l <= levelAVX512; l++ {
		if got := capLevel(l); got > l || !cpuHas(got) {
			t.Errorf("capLevel(%s) = %s", l, got)
		}
		if cpuHas(l) && capLevel(l) != l {
			t.Errorf("capLevel(%s) = %s, and the CPU has %s", l, capLevel(l), l)
		}
		if opt, err := (LoadOptions{SIMD: l.String()}).simdLevel(); err != nil || opt != capLevel(l) {
			t.Errorf("SIMD %q: %s, %v", l, opt, err)
		}
	}
	t.Logf("this CPU: %s; AVX-512 VNNI %v, AVX-VNNI %v", cpuLevel(), cpuHas(levelAVX512), cpuHas(levelAVXVNNI))
	if !cpuHas(levelAVXVNNI) {
		t.Skip("this CPU has no AVX-VNNI: the avxvnni level falls back, checked above")
	}
	if got, _ := (LoadOptions{SIMD: SIMDAVXVNNI}).simdLevel(); got != levelAVXVNNI {
		t.Errorf("avxvnni on a CPU with AVX-VNNI: %s", got)
	}
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

// TestKVF16: a float16 KV cache computes the same model within the
// rounding of keys and values to float16 (logits spread about 6; a
// broken cache is off by whole units), with the same greedy choices, for
// prefill and decode alike, and rewinding works on it.
func TestKVF16(t *testing.T) {
	w := randomWeights(t, 25, testmodel.MiniCPM5Small())
	p := filepath.Join(t.TempDir(), "m.gguf")
	if err := testmodel.WriteGGUF(p, w, testmodel.F32); err != nil {
		t.Fatal(err)
	}
	ref := logitsOf(t, loadT(t, p, LoadOptions{Threads: 2}), testTokens)
	m := loadT(t, p, LoadOptions{Threads: 2, KVF16: true})
	got := logitsOf(t, m, testTokens)
	maxd := 0.0
	for i := range got {
		for j := range got[i] {
			maxd = max(maxd, math.Abs(float64(got[i][j]-ref[i][j])))
		}
		if argmaxF(got[i]) != argmaxF(ref[i]) {
			t.Errorf("position %d: greedy %d, float32 cache %d", i, argmaxF(got[i]), argmaxF(ref[i]))
		}
	}
	if maxd > 0.05 || maxd == 0 {
		t.Errorf("float16 cache moves logits by %g (want a little, not 0, under 0.05)", maxd)
	}
	t.Logf("float16 KV cache: logits within %.3g", maxd)
	s := m.NewSession(0)
	last, err := s.Prefill(testTokens)
	if err != nil {
		t.Fatal(err)
	}
	want := got[len(got)-1]
	for j := range want {
		if math.Abs(float64(last[j]-want[j])) > 1e-4 {
			t.Fatalf("prefill logit %d: %v, token by token %v", j, last[j], want[j])
		}
	}
	if err := s.Rewind(3); err != nil {
		t.Fatal(err)
	}
	l, err := s.Forward(testTokens[3])
	if err != nil {
		t.Fatal(err)
	}
	for j := range l {
		if math.Abs(float64(l[j]-got[3][j])) > 1e-4 {
			t.Fatalf("after rewind, logit %d: %v, want %v", j, l[j], got[3][j])
		}
	}
}
