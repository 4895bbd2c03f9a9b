package engine

import (
	"math"
	"path/filepath"
	"runtime"
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
			fast := loadT(t, p, LoadOptions{Threads: 2})
			plain := loadT(t, p, LoadOptions{Threads: 2})
			plain.arith.noSIMD = true
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
	before := runtime.NumGoroutine()
	for range 5 {
		s := m.NewSession(0)
		if _, err := s.Prefill(testTokens); err != nil {
			t.Fatal(err)
		}
	}
	if n := runtime.NumGoroutine(); n < before+15 {
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
