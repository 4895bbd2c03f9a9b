package conformance

import (
	"context"
	"fmt"
	"testing"

	"github.com/npuchat/npuchat/engine"
	"github.com/npuchat/npuchat/engine/sample"
	"github.com/npuchat/npuchat/engine/testmodel"
)

// TestSpeculativeGreedyMatchesLlamaCpp: on the oracle's models (F32
// GGUFs, whose greedy tokens are llama.cpp's), greedy decoding through
// an engine.Decoder that guesses ahead gives llama.cpp's tokens over 32
// steps, as plain decoding does; guesses were made, and kept.
func TestSpeculativeGreedyMatchesLlamaCpp(t *testing.T) {
	var total engine.DecodeStats
	for _, sh := range shapes {
		t.Run(sh.name, func(t *testing.T) {
			w := model(t, sh.shape, sh.seed)
			p := prompt(w.Vocab)
			path := writeGGUF(t, w, testmodel.F32)
			ref := llamaCpp(t, path, p)
			m, err := engine.Load(path, engine.LoadOptions{Threads: 1})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			s := m.NewSession(0)
			l, err := s.Prefill(p)
			if err != nil {
				t.Fatal(err)
			}
			d := s.NewDecoder(engine.DecodeOptions{})
			var got []int
			for range steps {
				tok := sample.Argmax(l)
				got = append(got, tok)
				if l, err = d.Forward(context.Background(), tok); err != nil {
					t.Fatal(err)
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(ref.Greedy) {
				t.Errorf("speculative greedy %v, llama.cpp %v", got, ref.Greedy)
			}
			st := d.Stats()
			t.Logf("%d of %d guesses kept", st.Accepted, st.Drafted)
			total.Drafted += st.Drafted
			total.Accepted += st.Accepted
		})
	}
	if total.Accepted == 0 {
		t.Errorf("guesses %+v: none kept, the test checks nothing of them", total)
	}
}
