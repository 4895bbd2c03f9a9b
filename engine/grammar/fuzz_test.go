package grammar

import (
	"encoding/json"
	"testing"
)

// FuzzFromSchema compiles arbitrary schemas: the compiler must return a
// grammar or an error, never panic or run long, and whatever a compiled
// grammar accepts whole is valid JSON.
//
//	go test ./engine/grammar -run XXX -fuzz FuzzFromSchema -fuzztime 1m
func FuzzFromSchema(f *testing.F) {
	seeds := []struct{ schema, doc string }{
		{`{"type":"object","properties":{"a":{"type":"integer","minimum":-3,"exclusiveMaximum":250}},"required":["a"]}`, `{"a":12}`},
		{`{"type":"number","minimum":0.5,"maximum":2}`, `1.25`},
		{`{"type":"string","pattern":"^[A-Z]{2}-[0-9]{1,3}$"}`, `"AB-1"`},
		{`{"type":"string","format":"date-time"}`, `"2024-01-02T03:04:05Z"`},
		{`{"enum":["a","ab",1,12,null,{"x":[1]}]}`, `"ab"`},
		{`{"oneOf":[{"type":"string"},{"type":"array","items":{"$ref":"#"}}]}`, `[["x"],[]]`},
		{`{"$defs":{"a":{"$ref":"#/$defs/b"},"b":{"$ref":"#/$defs/a"}},"$ref":"#/$defs/a"}`, `1`},
		{`{"type":"object","properties":{"n":{"$ref":"#"}},"required":["n"]}`, `{}`},
		{`{"type":"string","pattern":"(a|b)*a(a|b){12}"}`, `"ab"`},
		{`{"additionalProperties":{"type":"boolean"}}`, `{"k": true}`},
		{`{"type":"array","items":{"type":"string","maxLength":2},"minItems":1,"maxItems":3}`, "[\n  \"a\"]"},
		{`{"anyOf":[{"type":"string","format":"date"},{"type":"string"},{"type":"object","properties":{"a":{"const":1}}},{"type":"object"}]}`, `{"a":1}`},
		{`{"oneOf":[{"properties":{"k":{"const":"x"}},"required":["k"]},{"properties":{"k":{"const":"y"},"v":{}},"required":["k"]}]}`, `{"k":"y","v":[]}`},
		{`{"properties":{"a":{"type":"integer"},"ab":{}},"required":["a"],"additionalProperties":{"anyOf":[{"type":"string"},{"type":"string","maxLength":1}]}}`, `{"a":1,"abc":"x"}`},
	}
	for _, s := range seeds {
		f.Add([]byte(s.schema), []byte(s.doc))
	}
	f.Fuzz(func(t *testing.T, schema, doc []byte) {
		if len(schema) > 4096 {
			return
		}
		g, err := FromSchema(schema)
		if err != nil {
			return
		}
		s := g.initial()
		for _, c := range doc {
			if g.step(&s, c) == reject {
				return
			}
		}
		if g.canEnd(s) && !json.Valid(doc) {
			t.Fatalf("schema %s accepted %q, which is not JSON", schema, doc)
		}
	})
}
