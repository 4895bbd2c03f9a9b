package grammar

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/npuchat/npuchat/engine"
	"github.com/npuchat/npuchat/engine/sample"
	"github.com/npuchat/npuchat/engine/testmodel"
	"github.com/npuchat/npuchat/engine/tokenizer"
)

// modelSchemas are the schemas sampled from the random model. Strings
// are bounded so that a model whose every token is about equally likely
// closes them within the token budget (an unbounded string is closed by
// one token in 512).
var modelSchemas = map[string]string{
	"person": `{"type":"object","properties":{
		"name":{"type":"string","minLength":1,"maxLength":8},
		"age":{"type":"integer"},
		"email":{"type":"string","maxLength":6},
		"admin":{"type":"boolean"}},
		"required":["name","age"],"additionalProperties":false}`,
	"enum and const": `{"type":"object","properties":{
		"color":{"enum":["red","green","blue",null,3]},
		"kind":{"const":"fixed"},
		"score":{"type":"number"}},
		"required":["color","kind","score"],"additionalProperties":false}`,
	"arrays": `{"type":"object","properties":{
		"tags":{"type":"array","items":{"type":"string","maxLength":4},"minItems":1,"maxItems":3},
		"matrix":{"type":"array","items":{"type":"array","items":{"type":"integer"},"maxItems":2},"maxItems":2}},
		"required":["tags","matrix"]}`,
	"defs and refs": `{"$defs":{
		"point":{"type":"object","properties":{"x":{"type":"number"},"y":{"type":"number"}},"required":["x","y"],"additionalProperties":false},
		"label":{"anyOf":[{"type":"string","maxLength":5},{"type":"null"}]}},
		"type":"object","properties":{
		"from":{"$ref":"#/$defs/point"},"to":{"$ref":"#/$defs/point"},"label":{"$ref":"#/$defs/label"}},
		"required":["from","to","label"],"additionalProperties":false}`,
	"bounds, patterns, formats": `{"type":"object","properties":{
		"n":{"type":"integer","minimum":-3,"exclusiveMaximum":250},
		"x":{"type":"number","exclusiveMinimum":0.5,"maximum":2},
		"code":{"type":"string","pattern":"^[A-Z]{2}-[0-9]{1,3}$"},
		"day":{"type":"string","format":"date"},
		"id":{"type":"string","format":"uuid"},
		"pick":{"oneOf":[{"type":"integer","minimum":10,"maximum":12},{"type":"string","pattern":"^(yes|no)$"}]}},
		"required":["n","x","code","day","id","pick"],"additionalProperties":false}`,
	"unions that start alike": `{"type":"object","properties":{
		"when":{"anyOf":[{"type":"string","format":"date"},{"type":"string","maxLength":3}]},
		"shape":{"anyOf":[
			{"type":"object","properties":{"kind":{"const":"dot"},"r":{"type":"integer","minimum":0,"maximum":9}},"required":["kind","r"],"additionalProperties":false},
			{"type":"object","properties":{"kind":{"const":"box"},"w":{"type":"boolean"}},"required":["kind"],"additionalProperties":false}]},
		"tag":{"oneOf":[{"properties":{"t":{"const":"a"}},"required":["t"],"additionalProperties":false},{"properties":{"t":{"const":"b"},"n":{"type":"null"}},"required":["t"],"additionalProperties":false}]}},
		"required":["when","shape","tag"],"additionalProperties":false}`,
	"top-level array": `{"type":"array","items":{"type":["integer","boolean"]},"minItems":2,"maxItems":4}`,
	"nested optional": `{"type":"object","properties":{
		"a":{"type":"object","properties":{"b":{"type":"object","properties":{"c":{"type":"integer"}},"additionalProperties":false}},"additionalProperties":false},
		"d":{"type":"string","minLength":2,"maxLength":3}},"additionalProperties":false}`,
}

type smallModel struct {
	model *engine.Model
	tok   *tokenizer.Tokenizer
	eos   []int
	vocab *Vocab
}

func loadSmallModel(t testing.TB) *smallModel {
	t.Helper()
	// A tiny Llama (one layer, width 64) over testmodel's 512-token
	// byte-level vocabulary: the mask and the sampler see a real
	// tokenizer's tokens, and a forward pass costs little.
	shape := testmodel.Shape{Arch: testmodel.ArchLlama, Hidden: 64, Layers: 1, FFN: 128, Heads: 4, KVHeads: 2,
		HeadDim: 16, Vocab: 512, ContextLength: 4096, RopeTheta: 1e4, NormEps: 1e-6}
	w, err := testmodel.Random(11, shape)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "m.gguf")
	if err := testmodel.WriteGGUF(path, w, testmodel.F32); err != nil {
		t.Fatal(err)
	}
	m, err := engine.Load(path, engine.LoadOptions{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	tok, err := tokenizer.FromGGUF(m.GGUFMetadata())
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := tokenizer.ConfigFromGGUF(m.GGUFMetadata())
	if err != nil {
		t.Fatal(err)
	}
	eos := append(cfg.EOS, m.Config().EOS...)
	v, err := TokenizerVocab(tok, eos)
	if err != nil {
		t.Fatal(err)
	}
	return &smallModel{model: m, tok: tok, eos: eos, vocab: v}
}

// generate samples one constrained answer; it fails the test when the
// token budget runs out first.
func (sm *smallModel) generate(t *testing.T, sess *engine.Session, prompt []int, mk *Masker, seed int64, budget int) string {
	t.Helper()
	if err := sess.Rewind(0); err != nil {
		t.Fatal(err)
	}
	logits, err := sess.Prefill(prompt)
	if err != nil {
		t.Fatal(err)
	}
	s := sample.New(sample.Params{Temperature: 1, TopK: 0, Seed: seed, HasSeed: true})
	mt := mk.NewMatcher()
	var ids []int
	for n := 0; n < budget; n++ {
		id, err := s.SampleConstrained(logits, nil, mt)
		if err != nil {
			t.Fatalf("seed %d after %v: %v", seed, ids, err)
		}
		if err := mt.Accept(id); err != nil {
			t.Fatalf("seed %d: the sampler drew token %d, which the matcher refuses: %v", seed, id, err)
		}
		for _, e := range sm.eos {
			if id == e {
				text, _ := sm.tok.Decode(ids)
				return text
			}
		}
		ids = append(ids, id)
		if logits, err = sess.Forward(id); err != nil {
			t.Fatal(err)
		}
	}
	text, _ := sm.tok.Decode(ids)
	t.Fatalf("seed %d: no end token in %d tokens: %q", seed, budget, text)
	return ""
}

// On a small random model, 100 sampled answers for each schema all parse
// and validate against the schema, checked by an independent validator
// (santhosh-tekuri/jsonschema).
func TestRandomModelAnswersValidate(t *testing.T) {
	sm := loadSmallModel(t)
	sess := sm.model.NewSession(2048)
	prompt := sm.tok.Encode("<|im_start|>user\nanswer in JSON<|im_end|>\n<|im_start|>assistant\n")
	for name, schema := range modelSchemas {
		t.Run(name, func(t *testing.T) {
			g, err := FromSchema([]byte(schema))
			if err != nil {
				t.Fatal(err)
			}
			mk := NewMasker(g, sm.vocab)
			doc, err := jsonschema.UnmarshalJSON(bytes.NewReader([]byte(schema)))
			if err != nil {
				t.Fatal(err)
			}
			c := jsonschema.NewCompiler()
			if err := c.AddResource("schema.json", doc); err != nil {
				t.Fatal(err)
			}
			validator, err := c.Compile("schema.json")
			if err != nil {
				t.Fatal(err)
			}
			distinct := map[string]bool{}
			for seed := int64(0); seed < 100; seed++ {
				text := sm.generate(t, sess, prompt, mk, seed, 600)
				var v any
				if err := json.Unmarshal([]byte(text), &v); err != nil {
					t.Fatalf("seed %d: %q does not parse: %v", seed, text, err)
				}
				inst, _ := jsonschema.UnmarshalJSON(bytes.NewReader([]byte(text)))
				if err := validator.Validate(inst); err != nil {
					t.Fatalf("seed %d: %q does not validate: %v", seed, text, err)
				}
				distinct[text] = true
				if seed < 2 {
					t.Logf("seed %d: %s", seed, text)
				}
			}
			// Whitespace is bounded as llama.cpp bounds it, so short
			// answers vary in little else: 30 of 100 still shows sampling.
			if len(distinct) < 30 {
				t.Errorf("only %d distinct answers in 100: the sampler is not sampling", len(distinct))
			}
			walks, hits := mk.Stats()
			t.Logf("%d distinct answers; %d mask walks, %d cache hits", len(distinct), walks, hits)
		})
	}
}

// The mask equals, token by token, what stepping each token's bytes
// through the automaton says, at every state along sampled documents.
func TestMaskMatchesAllows(t *testing.T) {
	sm := loadSmallModel(t)
	docs := map[string]string{
		`{"type":"object","properties":{"s":{"type":"string","maxLength":3},"n":{"type":"number"},"l":{"type":"array","items":{"enum":["ab","abc",1]}}},"required":["s"]}`: `{"s": "é€", "n": -1.5e3, "l": ["abc", 1]}`,
		`{"type":"object"}`:          `{"the": [1, {"quick": "brown fox"}, true], "a": null}`,
		`{"type":"string"}`:          `"hello \"world\" \u00e9"`,
		`{"type":"integer"}`:         `1234`,
		`{"enum":[1,12,123,"x"]}`:    `12`,
		`{"type":["string","null"]}`: `null`,
		`{"anyOf":[{"type":"string","format":"date"},{"type":"string","maxLength":12}]}`:                              `"2024-01-3x"`,
		`{"anyOf":[{"properties":{"a":{"type":"integer"}},"required":["a"]},{"properties":{"a":{"type":"string"}}}]}`: `{"a": "x"}`,
		`{"properties":{"ab":{"type":"integer"}},"additionalProperties":{"type":"boolean"}}`:                          `{"ab": 1, "a": true, "abc": false}`,
	}
	mask := make([]uint64, words(sm.vocab.Size()))
	for schema, doc := range docs {
		g, err := FromSchema([]byte(schema))
		if err != nil {
			t.Fatal(err)
		}
		if !accepts(g, doc) {
			t.Fatalf("%s refuses %q", schema, doc)
		}
		mk := NewMasker(g, sm.vocab)
		mt := mk.NewMatcher()
		for i := 0; i <= len(doc); i++ {
			mt.Mask(mask)
			n := 0
			for id := 0; id < sm.vocab.Size(); id++ {
				if hasBit(mask, id) != mt.Allows(id) {
					t.Fatalf("%s after %q: token %d (%q): mask %v, Allows %v", schema, doc[:i], id, sm.vocab.bytes[id], hasBit(mask, id), mt.Allows(id))
				}
				if hasBit(mask, id) {
					n++
				}
			}
			if n == 0 {
				t.Fatalf("%s after %q: no token allowed", schema, doc[:i])
			}
			if i < len(doc) {
				if err := mt.AcceptBytes([]byte{doc[i]}); err != nil {
					t.Fatal(err)
				}
			}
		}
		if !mt.CanEnd() {
			t.Errorf("%s: cannot end after %q", schema, doc)
		}
		// Once complete, only the end tokens are allowed.
		for _, e := range sm.eos {
			if !mt.Allows(e) {
				t.Errorf("%s: end token %d refused after %q", schema, e, doc)
			}
		}
	}
	_ = fmt.Sprint
}
