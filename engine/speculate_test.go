package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/npuchat/npuchat/engine/sample"
	"github.com/npuchat/npuchat/engine/simd"
	"github.com/npuchat/npuchat/engine/simd/simdtest"
	"github.com/npuchat/npuchat/engine/testmodel"
)

// TestGuess: the draft is what followed the latest, longest earlier
// occurrence of the sequence's last 2 to 4 tokens; a continuation that
// runs into the guesses goes on with them.
func TestGuess(t *testing.T) {
	for _, tc := range []struct {
		name string
		hist []int
		tok  int
		k    int
		want []int
	}{
		{"no repeat", []int{1, 2, 3, 4}, 5, 4, nil},
		{"one token is not enough", []int{1, 2, 3, 4}, 1, 4, nil},
		{"bigram", []int{1, 2, 3, 4, 9, 1}, 2, 3, []int{3, 4, 9}},
		{"k bounds", []int{1, 2, 3, 4, 9, 1}, 2, 1, []int{3}},
		{"k zero", []int{1, 2, 3, 4, 9, 1}, 2, 0, nil},
		{"latest of equals", []int{1, 2, 3, 7, 1, 2, 4, 7, 1}, 2, 2, []int{4, 7}},
		{"longest wins over latest", []int{5, 1, 2, 3, 8, 6, 1, 2, 4, 8, 5, 1}, 2, 2, []int{3, 8}},
		{"runs into itself", []int{6, 6, 6}, 6, 5, []int{6, 6, 6, 6, 6}},
		{"short loop", []int{9, 1, 2, 1, 2, 1}, 2, 5, []int{1, 2, 1, 2, 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := guess(tc.hist, []int{tc.tok}, tc.k)
			if got[0] != tc.tok || fmt.Sprint(got[1:]) != fmt.Sprint(tc.want) && !(len(got) == 1 && tc.want == nil) {
				t.Errorf("guess after %v %d: %v, want %v", tc.hist, tc.tok, got[1:], tc.want)
			}
		})
	}
}

// specPrompts are prompts whose greedy continuations on batchModel's
// model repeat parts of themselves and of the prompt (guesses are made,
// some kept, some not), one with a loop in the prompt.
func specPrompts() [][]int {
	loop := []int{11, 12, 13, 14, 15, 16, 11, 12, 13, 14, 15, 16, 11, 12, 13}
	return append(batchPrompts()[:3], loop)
}

// specGreedy decodes n tokens greedily after prompt through a Decoder,
// checks every step's logits against want bit for bit, settles, and
// returns the tokens, the stats and the session.
func specGreedy(t *testing.T, m *Model, prompt []int, want [][]float32, opts DecodeOptions) ([]int, DecodeStats, *Session) {
	t.Helper()
	s := m.NewSession(0)
	l, err := s.Prefill(prompt)
	if err != nil {
		t.Fatal(err)
	}
	d := s.NewDecoder(opts)
	var toks []int
	for i := range want {
		if !sameBits(l, want[i]) {
			t.Fatalf("token %d: logits differ from plain decoding (stats %+v)", i, d.Stats())
		}
		tok := sample.Argmax(l)
		toks = append(toks, tok)
		if l, err = d.Forward(context.Background(), tok); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.Settle(); err != nil {
		t.Fatal(err)
	}
	return toks, d.Stats(), s
}

// TestDecoderMatchesPlain: greedy decoding through a Decoder that guesses
// gives plain decoding's logits bit for bit at every step, so its tokens,
// at every SIMD level, for the integer and float paths and every KV cache
// type; guesses were kept and rejected; settled, the session holds
// exactly what plain decoding leaves in it.
func TestDecoderMatchesPlain(t *testing.T) {
	for _, tc := range []struct {
		name string
		tt   testmodel.TensorType
		kv   string
	}{{"q4_0", testmodel.Q4_0, ""}, {"q8_0", testmodel.Q8_0, ""}, {"f32", testmodel.F32, ""},
		{"q4_0-kvf16", testmodel.Q4_0, KVTypeF16}, {"q4_0-kvq8_0", testmodel.Q4_0, KVTypeQ8}} {
		t.Run(tc.name, func(t *testing.T) {
			simdtest.Each(t, func(t *testing.T, lvl simd.Level) {
				m := batchModel(t, tc.tt, lvl, LoadOptions{KVCacheType: tc.kv})
				const steps = 48
				var total DecodeStats
				for i, p := range specPrompts() {
					wantTok, want := greedyAlone(t, m, p, steps)
					plain := m.NewSession(0)
					if _, err := plain.Prefill(append(slices.Clone(p), wantTok...)); err != nil {
						t.Fatal(err)
					}
					toks, st, s := specGreedy(t, m, p, want, DecodeOptions{})
					if fmt.Sprint(toks) != fmt.Sprint(wantTok) {
						t.Errorf("prompt %d: %v, plain %v", i, toks, wantTok)
					}
					if fmt.Sprint(s.Tokens()) != fmt.Sprint(plain.Tokens()) {
						t.Errorf("prompt %d: the settled session holds %d tokens, plain decoding %d", i, s.Pos(), plain.Pos())
					}
					total.Drafted += st.Drafted
					total.Accepted += st.Accepted
				}
				if total.Accepted == 0 || total.Accepted == total.Drafted {
					t.Fatalf("guesses %+v: want some kept and some rejected, or the test checks nothing", total)
				}
				t.Logf("%d of %d guesses kept", total.Accepted, total.Drafted)
			})
		})
	}
}

// TestDecoderOff: a Decoder that is off never guesses and computes
// plain decoding.
func TestDecoderOff(t *testing.T) {
	m := batchModel(t, testmodel.Q8_0, simd.None, LoadOptions{})
	p := specPrompts()[3]
	_, want := greedyAlone(t, m, p, 24)
	_, st, _ := specGreedy(t, m, p, want, DecodeOptions{Speculative: SpeculativeOff})
	if st != (DecodeStats{}) {
		t.Errorf("off guessed: %+v", st)
	}
	for _, s := range []string{"", "auto", "off"} {
		if _, err := ParseSpeculative(s); err != nil {
			t.Errorf("ParseSpeculative(%q): %v", s, err)
		}
	}
	if _, err := ParseSpeculative("on"); err == nil || !strings.Contains(err.Error(), "auto or off") {
		t.Errorf("ParseSpeculative(on): %v", err)
	}
}

// blocks is a teacher sequence of n blocks of fixed, then a token new in
// each block (from 100 on): every guess made after a block's start is
// kept through the fixed part and rejected at the new token.
func blocks(fixed []int, n int) []int {
	var out []int
	for i := range n {
		out = append(out, fixed...)
		out = append(out, 100+i)
	}
	return out
}

// forced feeds teacher through a Decoder of a new session after prompt
// and checks each step's logits against a plain session's bit for bit;
// it returns the session and the settled decoder.
func forced(t *testing.T, m *Model, prompt, teacher []int, opts DecodeOptions) (*Session, *Decoder) {
	t.Helper()
	want := logitsOf(t, m, append(slices.Clone(prompt), teacher...))[len(prompt)-1:]
	s := m.NewSession(0)
	l, err := s.Prefill(prompt)
	if err != nil {
		t.Fatal(err)
	}
	d := s.NewDecoder(opts)
	for i, tok := range teacher {
		if !sameBits(l, want[i]) {
			t.Fatalf("teacher token %d: logits differ from plain decoding (stats %+v)", i, d.Stats())
		}
		if l, err = d.Forward(context.Background(), tok); err != nil {
			t.Fatal(err)
		}
	}
	if !sameBits(l, want[len(teacher)]) {
		t.Fatal("the last logits differ from plain decoding")
	}
	if err := d.Settle(); err != nil {
		t.Fatal(err)
	}
	return s, d
}

// TestDecoderRollback: a session whose guesses were rejected at every
// offset of a draft (the positions rolled back mid attention block and
// across blocks), settled with guesses pending, then continued with a
// new turn, computes the turn's logits bit for bit as a session that
// never guessed, for every KV cache type.
func TestDecoderRollback(t *testing.T) {
	for _, kv := range KVTypes() {
		t.Run(kv, func(t *testing.T) {
			m := batchModel(t, testmodel.Q4_0, simd.None, LoadOptions{KVCacheType: kv})
			prompt := []int{1, 2, 3}
			// blocks of 2 to 7 fixed tokens: drafts kept 1 to 6 deep,
			// then rejected; the last block ends in its fixed part, where
			// a draft is pending
			var teacher []int
			for n := 2; n <= 7; n++ {
				fixed := make([]int, n)
				for i := range fixed {
					fixed[i] = 10*n + i
				}
				teacher = append(teacher, blocks(fixed, 4)...)
			}
			teacher = append(teacher, 70, 71, 72)
			s, d := forced(t, m, prompt, teacher, DecodeOptions{})
			st := d.Stats()
			if st.Accepted == 0 || st.Drafted == st.Accepted {
				t.Fatalf("guesses %+v: want some kept and some rejected", st)
			}
			all := append(slices.Clone(prompt), teacher...)
			if s.Pos() != len(all) || fmt.Sprint(s.Tokens()) != fmt.Sprint(all) {
				t.Fatalf("settled session holds %d positions, want %d", s.Pos(), len(all))
			}
			next := []int{5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20}
			want := logitsOf(t, m, append(all, next...))[len(all):]
			for i, tok := range next {
				l, err := s.Forward(tok)
				if err != nil {
					t.Fatal(err)
				}
				if !sameBits(l, want[i]) {
					t.Fatalf("next turn token %d: logits differ from a session that never guessed", i)
				}
			}
		})
	}
}

// TestDecoderFallback: on a sequence whose guesses always fail, the
// decoder stops guessing after failLimit failed checks and probes again
// only after pauses that double: over 600 tokens it checks a bounded
// number of guesses, its draft shrunk to one, and is pausing at the end.
func TestDecoderFallback(t *testing.T) {
	m := batchModel(t, testmodel.Q8_0, simd.None, LoadOptions{})
	// after each "1 2", "1 2 <last block's new token>" is guessed and the
	// teacher writes a new one
	teacher := blocks([]int{1, 2}, 200)
	_, d := forced(t, m, []int{7}, teacher, DecodeOptions{})
	st := d.Stats()
	if d.Guessing() {
		t.Error("still guessing at the end: want a pause (plain decoding)")
	}
	if st.Accepted != 0 {
		t.Fatalf("kept %d guesses of a sequence that never repeats its continuations", st.Accepted)
	}
	// a check every 3 tokens (after each "1 2"): failLimit failed
	// checks (9 tokens), a pause of 32 tokens, 9 more, 64, 9, 128, 9,
	// 256, 9: the fifth fallback at about token 525, its pause of 512
	// running at the end
	if st.Fallbacks < 4 || st.Fallbacks > 5 {
		t.Errorf("fallbacks %d, want 4 or 5 in 600 tokens (pauses of 32, 64, 128, 256, 512)", st.Fallbacks)
	}
	if max := failLimit*st.Fallbacks + failLimit; st.Checks > max {
		t.Errorf("%d checks, want at most %d", st.Checks, max)
	}
	// the first draft is 4 long, every one after a failure 1
	if max := 4 + st.Checks - 1; st.Drafted > max {
		t.Errorf("%d tokens guessed, want at most %d (one at a time after the first failure)", st.Drafted, max)
	}
	t.Logf("%+v", st)
}

// TestDecoderInScheduler: sequences decoded together by a Scheduler,
// each guessing on its own through a Decoder of its Seq, decode at
// temperature 0 exactly the tokens they decode alone (plain), at every
// SIMD level; their guesses are checked in the batch's steps.
func TestDecoderInScheduler(t *testing.T) {
	simdtest.Each(t, func(t *testing.T, lvl simd.Level) {
		m := batchModel(t, testmodel.Q4_0, lvl, LoadOptions{})
		prompts := specPrompts()
		const steps = 40
		wantTok := make([][]int, len(prompts))
		for i, p := range prompts {
			wantTok[i], _ = greedyAlone(t, m, p, steps)
		}
		sc := m.NewScheduler(SchedulerOptions{Chunk: 8})
		defer sc.Close()
		got := make([][]int, len(prompts))
		errs := make([]error, len(prompts))
		stats := make([]DecodeStats, len(prompts))
		var wg sync.WaitGroup
		for i, p := range prompts {
			wg.Go(func() {
				ctx := context.Background()
				q := sc.Join(m.NewSession(0))
				defer q.Leave()
				d := q.NewDecoder(DecodeOptions{Speculative: map[bool]Speculative{true: SpeculativeOff, false: SpeculativeAuto}[i == 1]})
				l, err := q.Prefill(ctx, p)
				for err == nil && len(got[i]) < steps {
					tok := sample.Argmax(l)
					got[i] = append(got[i], tok)
					l, err = d.Forward(ctx, tok)
				}
				if err == nil {
					err = d.Settle()
				}
				errs[i], stats[i] = err, d.Stats()
			})
		}
		wg.Wait()
		var kept int
		for i := range prompts {
			if errs[i] != nil {
				t.Errorf("sequence %d: %v", i, errs[i])
			}
			if fmt.Sprint(got[i]) != fmt.Sprint(wantTok[i]) {
				t.Errorf("sequence %d: %v, alone %v", i, got[i], wantTok[i])
			}
			kept += stats[i].Accepted
		}
		if stats[1].Drafted != 0 || kept == 0 {
			t.Errorf("guesses %+v: want none in the sequence that is off, some kept in the others", stats)
		}
	})
}

// TestDecoderShortOfKVMemory: when a KV cache's budget has no room for
// a check's guesses, the token is computed alone (the same logits as a
// session of its own), until the budget is full, where Forward fails
// with ErrKVBudget as Session.Forward does.
func TestDecoderShortOfKVMemory(t *testing.T) {
	m := batchModel(t, testmodel.Q8_0, simd.None, LoadOptions{})
	c := m.NewKVCache(KVCacheOptions{Budget: m.KVBytes(96)})
	other := c.NewSession(48) // holds 48 positions of the 96
	if _, err := other.Prefill(make([]int, 40)); err != nil {
		t.Fatal(err)
	}
	s := c.NewSession(0)
	loop := []int{5, 6, 7, 8, 9, 10, 11, 12}
	prompt := append(slices.Clone(loop), loop[:4]...) // 12 tokens: 48 positions reserved (the rest of the budget)
	l, err := s.Prefill(prompt)
	if err != nil {
		t.Fatal(err)
	}
	var teacher []int
	for i := 4; len(teacher) < 40; i++ {
		teacher = append(teacher, loop[i%len(loop)])
	}
	want := logitsOf(t, m, append(slices.Clone(prompt), teacher...))[len(prompt)-1:]
	d := s.NewDecoder(DecodeOptions{})
	var n int
	for n = 0; n < len(teacher); n++ {
		if !sameBits(l, want[n]) {
			t.Fatalf("token %d: logits differ from a session of its own", n)
		}
		if l, err = d.Forward(context.Background(), teacher[n]); err != nil {
			break
		}
	}
	if !errors.Is(err, ErrKVBudget) || s.Pos() != 48 {
		t.Fatalf("after %d tokens at position %d: %v, want ErrKVBudget at position 48 (the budget's 96 less the other's 48)", n, s.Pos(), err)
	}
	if st := d.Stats(); st.Accepted == 0 {
		t.Errorf("guesses %+v: none kept before the budget filled", st)
	}
}
