package conformance

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/npuchat/npuchat/engine"
	"github.com/npuchat/npuchat/engine/sample"
	"github.com/npuchat/npuchat/engine/testmodel"
)

// steps is how many greedy tokens every comparison generates.
const steps = 32

// run is what one implementation computed for a prompt: the logits after
// every prompt token, then for each greedy step the logits the step's
// token is chosen from.
type run struct {
	Logits       [][]float32 `json:"logits"`
	Greedy       []int       `json:"greedy"`
	GreedyLogits [][]float32 `json:"greedy_logits"`
	Tokens       []int       `json:"tokens"`
}

// rows returns every logits row in order: prompt positions, then steps
// (the first step's row is the last prompt row, so it is skipped).
func (r *run) rows() [][]float32 {
	out := append([][]float32(nil), r.Logits...)
	if len(r.GreedyLogits) > 1 {
		out = append(out, r.GreedyLogits[1:]...)
	}
	return out
}

// llamaCpp runs llama.cpp on a GGUF: the prompt, then steps greedy tokens.
func llamaCpp(t *testing.T, gguf string, prompt []int) *run {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var ids []string
	for _, p := range prompt {
		ids = append(ids, strconv.Itoa(p))
	}
	cmd := exec.CommandContext(ctx, testmodel.LlamaRef(t), "-model", gguf, "-tokens", strings.Join(ids, ","),
		"-steps", strconv.Itoa(steps), "-threads", "1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("llama.cpp on %s: %v\n%s", filepath.Base(gguf), err, stderr.String())
	}
	var r run
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("llama.cpp output: %v", err)
	}
	if len(r.Logits) != len(prompt) || len(r.Greedy) != steps {
		t.Fatalf("llama.cpp gave %d logit rows and %d tokens, want %d and %d", len(r.Logits), len(r.Greedy), len(prompt), steps)
	}
	return &r
}

// engineRun loads path with the engine and runs the prompt one token at a
// time, then the steps with teacher forcing: it is fed the reference's
// greedy tokens (nil: its own), and its choice at each step is the argmax
// of its own logits. With identical choices this is free greedy decoding;
// where they differ the comparison still goes on over the same context,
// so every mismatch is reported rather than only the first.
func engineRun(t *testing.T, path string, opts engine.LoadOptions, prompt []int, teacher []int) *run {
	t.Helper()
	if opts.Threads == 0 {
		opts.Threads = 1
	}
	m, err := engine.Load(path, opts)
	if err != nil {
		t.Fatalf("engine: load %s: %v", filepath.Base(path), err)
	}
	defer m.Close()
	s := m.NewSession(len(prompt) + steps + 8)
	var r run
	for _, tok := range prompt {
		l, err := s.Forward(tok)
		if err != nil {
			t.Fatalf("engine: forward %d: %v", tok, err)
		}
		r.Logits = append(r.Logits, append([]float32(nil), l...))
	}
	last := r.Logits[len(r.Logits)-1]
	for i := 0; i < steps; i++ {
		tok := sample.Argmax(last)
		r.Greedy = append(r.Greedy, tok)
		r.GreedyLogits = append(r.GreedyLogits, last)
		if i+1 == steps {
			break
		}
		next := tok
		if teacher != nil {
			next = teacher[i]
		}
		l, err := s.Forward(next)
		if err != nil {
			t.Fatalf("engine: forward %d: %v", next, err)
		}
		last = append([]float32(nil), l...)
	}
	// Prefill must agree with token-at-a-time decoding.
	s2 := m.NewSession(len(prompt) + 8)
	l, err := s2.Prefill(prompt)
	if err != nil {
		t.Fatalf("engine: prefill: %v", err)
	}
	if d := relDiff(l, r.Logits[len(prompt)-1]); d > 1e-5 {
		t.Errorf("engine: Prefill's last logits differ from Forward's by %.3g (relative)", d)
	}
	return &r
}

// compareLogits fails when any row of got differs from want by more than
// tol relative to the row's largest |logit|, and returns the largest
// relative difference.
func compareLogits(t *testing.T, what string, got, want *run, tol float64) float64 {
	t.Helper()
	g, w := got.rows(), want.rows()
	if len(g) != len(w) {
		t.Fatalf("%s: %d logit rows, want %d", what, len(g), len(w))
	}
	worst, at := 0.0, 0
	for i := range g {
		if d := relDiff(g[i], w[i]); d > worst {
			worst, at = d, i
		}
	}
	if worst > tol {
		t.Errorf("%s: logits differ by %.3g relative to the row's max |logit| at row %d (tolerance %.1g)", what, worst, at, tol)
	}
	return worst
}

// compareGreedy fails unless got chose want's greedy token at every step,
// reporting the reference's margin (top-1 minus top-2 logit) at each
// mismatch; it returns the smallest reference margin.
func compareGreedy(t *testing.T, what string, got, want *run) float64 {
	t.Helper()
	minMargin := math.Inf(1)
	var bad []string
	for i := range want.Greedy {
		m := margin(want.GreedyLogits[i])
		minMargin = min(minMargin, m)
		if got.Greedy[i] != want.Greedy[i] {
			bad = append(bad, fmt.Sprintf("step %d: got %d want %d (reference margin %.4f; engine logits %.4f vs %.4f)",
				i, got.Greedy[i], want.Greedy[i], m, got.GreedyLogits[i][got.Greedy[i]], got.GreedyLogits[i][want.Greedy[i]]))
		}
	}
	if len(bad) > 0 {
		t.Errorf("%s: %d of %d greedy tokens differ:\n  %s\nreference tokens %v\nengine tokens    %v",
			what, len(bad), len(want.Greedy), strings.Join(bad, "\n  "), want.Greedy, got.Greedy)
	}
	return minMargin
}

// relDiff is max_i |a_i - b_i| / max_i |b_i|.
func relDiff(a, b []float32) float64 {
	if len(a) != len(b) {
		return math.Inf(1)
	}
	var d, s float64
	for i := range a {
		d = max(d, math.Abs(float64(a[i])-float64(b[i])))
		s = max(s, math.Abs(float64(b[i])))
	}
	if s == 0 {
		return d
	}
	return d / s
}

// maxAbsDiff is max_i |a_i - b_i| over every row.
func maxAbsDiff(a, b *run) float64 {
	var d float64
	ra, rb := a.rows(), b.rows()
	for i := range ra {
		for j := range ra[i] {
			d = max(d, math.Abs(float64(ra[i][j])-float64(rb[i][j])))
		}
	}
	return d
}

// margin is the gap between the largest and second-largest logit.
func margin(x []float32) float64 {
	s := append([]float32(nil), x...)
	sort.Slice(s, func(i, j int) bool { return s[i] > s[j] })
	return float64(s[0] - s[1])
}

// prompt is the test prompt for a vocabulary: <|im_start|> and a few
// ordinary tokens spread over the vocabulary.
func prompt(v *testmodel.Vocab) []int {
	n := v.Size()
	return []int{v.BOS, 104, 101, 108, 108, 111, n / 2, n - 5, 32, 263}
}

// model makes a shape's weights for a seed or stops the test.
func model(t *testing.T, s testmodel.Shape, seed uint64) *testmodel.Weights {
	t.Helper()
	w, err := testmodel.Random(seed, s)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// writeGGUF writes w as a GGUF of type typ in the test's temp dir.
func writeGGUF(t *testing.T, w *testmodel.Weights, typ testmodel.TensorType) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), fmt.Sprintf("%s-%s.gguf", w.Shape.Arch, typ))
	if err := testmodel.WriteGGUF(p, w, typ); err != nil {
		t.Fatal(err)
	}
	return p
}
