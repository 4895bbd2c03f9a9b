package engine

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/npuchat/npuchat/engine/sample"
	"github.com/npuchat/npuchat/engine/simd"
	"github.com/npuchat/npuchat/engine/simd/simdtest"
	"github.com/npuchat/npuchat/engine/testmodel"
)

// batchModel writes a MiniCPM5-shaped random model of type tt and loads
// it at level lvl.
func batchModel(t *testing.T, tt testmodel.TensorType, lvl simd.Level, opts LoadOptions) *Model {
	t.Helper()
	shape := testmodel.MiniCPM5Small()
	if opts.KVCacheType == KVTypeQ8 { // q8_0 needs a head dimension of 32 or more
		shape.Heads, shape.HeadDim = 8, 32
	}
	w := randomWeights(t, 41, shape)
	p := filepath.Join(t.TempDir(), "m.gguf")
	if err := testmodel.WriteGGUF(p, w, tt); err != nil {
		t.Fatal(err)
	}
	opts.SIMD = lvl.String()
	if opts.Threads == 0 {
		opts.Threads = 2
	}
	m := loadT(t, p, opts)
	if m.SIMD() != lvl.String() {
		t.Fatalf("model runs %s, asked %s", m.SIMD(), lvl)
	}
	return m
}

// batchPrompts are prompts of different lengths (one longer than a
// prefill chunk) for the batch tests.
func batchPrompts() [][]int {
	long := make([]int, 45)
	for i := range long {
		long[i] = (i*37 + 11) % 512
	}
	return [][]int{{3, 290, 17, 256, 42}, {7, 8}, long, {100, 200, 300, 400, 5, 6, 7, 8, 9, 10, 11}}
}

// greedyAlone decodes n tokens greedily after prompt in a session of its
// own and returns the tokens and each step's logits.
func greedyAlone(t *testing.T, m *Model, prompt []int, n int) ([]int, [][]float32) {
	t.Helper()
	s := m.NewSession(0)
	l, err := s.Prefill(prompt)
	if err != nil {
		t.Fatal(err)
	}
	var toks []int
	var logits [][]float32
	for range n {
		logits = append(logits, slices.Clone(l))
		tok := sample.Argmax(l)
		toks = append(toks, tok)
		if l, err = s.Forward(tok); err != nil {
			t.Fatal(err)
		}
	}
	return toks, logits
}

func sameBits(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return false
		}
	}
	return true
}

// TestBatchMatchesAlone: sessions computed together by Batch.Run (a
// prompt's chunk beside other sessions' decode tokens, sessions at
// different positions, one joining late, one leaving early) get bit for
// bit the logits they get alone, at every SIMD level, for the integer
// (Q4_0, Q8_0) and float (F32) paths and a float16 KV cache.
func TestBatchMatchesAlone(t *testing.T) {
	for _, tc := range []struct {
		name string
		tt   testmodel.TensorType
		f16  bool
	}{{"q4_0", testmodel.Q4_0, false}, {"q8_0", testmodel.Q8_0, false}, {"f32", testmodel.F32, false}, {"q4_0-kvf16", testmodel.Q4_0, true}, {"q4_0-kvq8_0", testmodel.Q4_0, false}} {
		t.Run(tc.name, func(t *testing.T) {
			simdtest.Each(t, func(t *testing.T, lvl simd.Level) {
				opts := LoadOptions{KVF16: tc.f16}
				if strings.HasSuffix(tc.name, "kvq8_0") {
					opts.KVCacheType = KVTypeQ8
				}
				m := batchModel(t, tc.tt, lvl, opts)
				if want := map[bool]string{false: KVTypeF32, true: KVTypeF16}[tc.f16]; opts.KVCacheType == "" && m.KVType() != want || opts.KVCacheType != "" && m.KVType() != opts.KVCacheType {
					t.Fatalf("%s: the model keeps a %s KV cache", tc.name, m.KVTypeChoice())
				}
				prompts := batchPrompts()
				const steps = 12
				want := make([][][]float32, len(prompts))
				wantTok := make([][]int, len(prompts))
				for i, p := range prompts {
					wantTok[i], want[i] = greedyAlone(t, m, p, steps)
				}
				// Session i joins at step join[i] (its whole prompt in one
				// Run, or in chunks of 16 for the long one) and leaves after
				// steps-leave[i] tokens.
				join := []int{0, 0, 3, 5}
				leave := []int{0, 4, 0, 0}
				b := m.NewBatch()
				type seq struct {
					s      *Session
					prompt []int
					toks   []int
					logits []float32
					done   int
				}
				seqs := make([]*seq, len(prompts))
				for i, p := range prompts {
					seqs[i] = &seq{s: m.NewSession(0), prompt: p}
				}
				for step := 0; ; step++ {
					var run []Step
					var who []int
					for i, q := range seqs {
						switch {
						case step < join[i] || q.done >= steps-leave[i]:
						case len(q.prompt) > 0:
							n := min(len(q.prompt), 16)
							run = append(run, Step{Session: q.s, Tokens: q.prompt[:n], Logits: n == len(q.prompt)})
							who = append(who, i)
						default:
							if got := q.logits; !sameBits(got, want[i][q.done]) {
								t.Fatalf("session %d token %d: logits differ from the session alone", i, q.done)
							}
							tok := sample.Argmax(q.logits)
							if tok != wantTok[i][q.done] {
								t.Fatalf("session %d token %d: %d, alone %d", i, q.done, tok, wantTok[i][q.done])
							}
							q.toks = append(q.toks, tok)
							q.done++
							if q.done < steps-leave[i] {
								run = append(run, Step{Session: q.s, Tokens: []int{tok}, Logits: true})
								who = append(who, i)
							}
						}
					}
					if len(run) == 0 {
						if step > 40 {
							break
						}
						continue
					}
					b.Run(run)
					for j, sp := range run {
						q := seqs[who[j]]
						if sp.Err != nil {
							t.Fatalf("session %d: %v", who[j], sp.Err)
						}
						if len(q.prompt) > 0 {
							q.prompt = q.prompt[len(sp.Tokens):]
						}
						if sp.Logits {
							q.logits = slices.Clone(sp.Out)
						}
					}
				}
				for i, q := range seqs {
					if len(q.toks) != steps-leave[i] {
						t.Errorf("session %d decoded %d tokens, want %d", i, len(q.toks), steps-leave[i])
					}
				}
			})
		})
	}
}

// TestBatchStepErrors: a step that cannot run (a token outside the
// vocabulary, a full context, a session given twice) gets its error and
// leaves its session as it was; the others of the batch run.
func TestBatchStepErrors(t *testing.T) {
	m := batchModel(t, testmodel.Q8_0, simd.None, LoadOptions{})
	ok, full := m.NewSession(0), m.NewSession(4)
	if _, err := full.Prefill([]int{1, 2, 3, 4}); err != nil {
		t.Fatal(err)
	}
	steps := []Step{
		{Session: ok, Tokens: []int{5, 6}, Logits: true},
		{Session: full, Tokens: []int{7}, Logits: true},
		{Session: ok, Tokens: []int{8}},
		{Session: m.NewSession(0), Tokens: []int{1 << 20}},
		{Session: m.NewSession(0)},
	}
	m.NewBatch().Run(steps)
	if steps[0].Err != nil || steps[0].Out == nil || ok.Pos() != 2 {
		t.Errorf("good step: %v, position %d", steps[0].Err, ok.Pos())
	}
	if !errors.Is(steps[1].Err, ErrContextFull) || full.Pos() != 4 {
		t.Errorf("full session: %v, position %d", steps[1].Err, full.Pos())
	}
	if !errors.Is(steps[2].Err, errTwice) {
		t.Errorf("session twice: %v", steps[2].Err)
	}
	if steps[3].Err == nil || steps[4].Err == nil {
		t.Errorf("bad token %v, no tokens %v", steps[3].Err, steps[4].Err)
	}
}

// TestSchedulerMatchesAlone: sequences on their own goroutines through a
// Scheduler (different prompts and lengths, one joining while others
// decode, one leaving early, one cancelled mid-answer) decode at
// temperature 0 exactly the tokens they decode alone, at every SIMD
// level.
func TestSchedulerMatchesAlone(t *testing.T) {
	simdtest.Each(t, func(t *testing.T, lvl simd.Level) {
		m := batchModel(t, testmodel.Q4_0, lvl, LoadOptions{})
		prompts := batchPrompts()
		const steps = 16
		wantTok := make([][]int, len(prompts))
		for i, p := range prompts {
			wantTok[i], _ = greedyAlone(t, m, p, steps)
		}
		sc := m.NewScheduler(SchedulerOptions{Chunk: 8})
		defer sc.Close()
		limit := []int{steps, 5, steps, steps}
		// sequence 2 starts once sequence 0 has 4 tokens; 3 is cancelled
		// after 6 of its tokens
		started := make(chan struct{})
		ctx3, cancel3 := context.WithCancel(context.Background())
		defer cancel3()
		got := make([][]int, len(prompts))
		errs := make([]error, len(prompts))
		var wg sync.WaitGroup
		for i, p := range prompts {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx := context.Background()
				if i == 3 {
					ctx = ctx3
				}
				if i == 2 {
					<-started
				}
				q := sc.Join(m.NewSession(0))
				defer q.Leave()
				l, err := q.Prefill(ctx, p)
				for err == nil && len(got[i]) < limit[i] {
					tok := sample.Argmax(l)
					got[i] = append(got[i], tok)
					if i == 0 && len(got[i]) == 4 {
						close(started)
					}
					if i == 3 && len(got[i]) == 6 {
						cancel3()
					}
					l, err = q.Forward(ctx, tok)
				}
				errs[i] = err
			}()
		}
		wg.Wait()
		for i := range prompts {
			if i == 3 {
				if !errors.Is(errs[i], context.Canceled) || len(got[i]) != 6 {
					t.Errorf("cancelled sequence: %v after %d tokens", errs[i], len(got[i]))
				}
			} else if errs[i] != nil {
				t.Errorf("sequence %d: %v", i, errs[i])
			}
			if w := wantTok[i][:len(got[i])]; fmt.Sprint(got[i]) != fmt.Sprint(w) {
				t.Errorf("sequence %d: %v, alone %v", i, got[i], w)
			}
		}
	})
}

// TestSchedulerSlowSequence: a sequence that does not ask for its next
// token (its client stopped reading) does not hold the others: they go
// on decoding while it waits, and it continues, exactly, when it asks.
func TestSchedulerSlowSequence(t *testing.T) {
	m := batchModel(t, testmodel.Q8_0, simd.None, LoadOptions{})
	prompts := batchPrompts()[:2]
	const steps = 10
	want := make([][]int, 2)
	for i, p := range prompts {
		want[i], _ = greedyAlone(t, m, p, steps)
	}
	sc := m.NewScheduler(SchedulerOptions{Grace: 5 * time.Millisecond})
	defer sc.Close()
	ctx := context.Background()
	slow := sc.Join(m.NewSession(0))
	l, err := slow.Prefill(ctx, prompts[0])
	if err != nil {
		t.Fatal(err)
	}
	// the slow sequence holds its logits and asks nothing while the
	// other decodes its whole answer
	first := sample.Argmax(l)
	fast := sc.Join(m.NewSession(0))
	fl, err := fast.Prefill(ctx, prompts[1])
	var fastTok []int
	for err == nil && len(fastTok) < steps {
		tok := sample.Argmax(fl)
		fastTok = append(fastTok, tok)
		fl, err = fast.Forward(ctx, tok)
	}
	fast.Leave()
	if err != nil || fmt.Sprint(fastTok) != fmt.Sprint(want[1]) {
		t.Fatalf("fast sequence beside a stalled one: %v %v, want %v", err, fastTok, want[1])
	}
	slowTok := []int{first}
	for len(slowTok) < steps {
		if l, err = slow.Forward(ctx, slowTok[len(slowTok)-1]); err != nil {
			t.Fatal(err)
		}
		slowTok = append(slowTok, sample.Argmax(l))
	}
	slow.Leave()
	if fmt.Sprint(slowTok) != fmt.Sprint(want[0]) {
		t.Errorf("stalled sequence: %v, want %v", slowTok, want[0])
	}
}

// TestSchedulerClose: steps asked of a closed scheduler fail with
// ErrSchedulerClosed, and a cancelled context stops a prefill.
func TestSchedulerClose(t *testing.T) {
	m := batchModel(t, testmodel.Q8_0, simd.None, LoadOptions{})
	sc := m.NewScheduler(SchedulerOptions{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := sc.Join(m.NewSession(0)).Prefill(ctx, []int{1, 2, 3}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled prefill: %v", err)
	}
	q := sc.Join(m.NewSession(4))
	if _, err := q.Prefill(context.Background(), []int{1, 2, 3, 4, 5}); !errors.Is(err, ErrContextFull) {
		t.Errorf("prompt past the context: %v", err)
	}
	sc.Close()
	if _, err := q.Prefill(context.Background(), []int{1, 2}); !errors.Is(err, ErrSchedulerClosed) {
		t.Errorf("after Close: %v", err)
	}
	q.Leave() // does not block
}

// countdownCtx is a context whose Err is nil for its first n calls and
// context.Canceled after: a cancellation at a known step.
type countdownCtx struct {
	context.Context
	mu sync.Mutex
	n  int
}

func (c *countdownCtx) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n--; c.n < 0 {
		return context.Canceled
	}
	return nil
}

// TestSchedulerCancelMidPrompt: a prompt cancelled while it is
// prefilled in chunks stops at the next step, keeping what was computed.
func TestSchedulerCancelMidPrompt(t *testing.T) {
	m := batchModel(t, testmodel.Q8_0, simd.None, LoadOptions{})
	sc := m.NewScheduler(SchedulerOptions{Chunk: 8})
	defer sc.Close()
	long := batchPrompts()[2]
	// Err is asked once when the prompt is handed over, then before each
	// step: the third step does not run (32 tokens per step alone)
	ctx := &countdownCtx{Context: context.Background(), n: 3}
	q := sc.Join(m.NewSession(0))
	_, err := q.Prefill(ctx, append(append([]int(nil), long...), long...))
	if !errors.Is(err, context.Canceled) || q.Session().Pos() != 64 {
		t.Errorf("cancelled prompt: %v at position %d, want context.Canceled at 64", err, q.Session().Pos())
	}
}
