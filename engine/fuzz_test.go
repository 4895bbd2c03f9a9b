package engine

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/npuchat/npuchat/engine/testmodel"
)

// FuzzLoadGGUF feeds mutated model files to the whole GGUF loader: it must
// return a model or an error, never panic or allocate without bound. A
// model it accepts must run a token.
func FuzzLoadGGUF(f *testing.F) {
	s := testmodel.Qwen3Small()
	s.Hidden, s.FFN, s.Heads, s.KVHeads, s.HeadDim, s.Layers, s.Vocab = 32, 64, 2, 1, 16, 1, 260
	w, err := testmodel.Random(1, s)
	if err != nil {
		f.Fatal(err)
	}
	p := filepath.Join(f.TempDir(), "seed.gguf")
	if err := testmodel.WriteGGUF(p, w, testmodel.Q8_0); err != nil {
		f.Fatal(err)
	}
	seed, err := os.ReadFile(p)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed)
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := loadGGUFData(data, LoadOptions{Threads: 1}, nil)
		if err != nil {
			return
		}
		c := m.Config()
		if c.Hidden*c.VocabSize > 1<<22 || c.Layers*c.FFN*c.Hidden > 1<<24 {
			return // a valid but large model: too slow to run here
		}
		if _, err := m.NewSession(2).Forward(0); err != nil {
			t.Fatalf("accepted model cannot run: %v", err)
		}
	})
}
