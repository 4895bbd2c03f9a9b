package web

import "testing"

// TestSchemaMinSize: the smallest document's length is a lower bound,
// exact for these: every required property, item and character counted
// once, alternatives and enums at their smallest, optional properties
// and recursion not at all.
func TestSchemaMinSize(t *testing.T) {
	for _, c := range []struct {
		schema, smallest string
	}{
		{`{"type": "string", "minLength": 3}`, `"aaa"`},
		{`{"type": "integer"}`, `0`},
		{`{"type": "boolean"}`, `true`},
		{`{"type": ["string", "null"], "minLength": 10}`, `null`},
		{`{"type": "object", "properties": {"ab": {"type": "string", "minLength": 2}, "c": {"type": "integer"}}, "required": ["ab", "c", "ab"]}`, `{"ab":"xx","c":0}`},
		{`{"type": "object", "properties": {"a": {"type": "string", "minLength": 99}}}`, `{}`},
		{`{"type": "array", "minItems": 3, "items": {"type": "integer"}}`, `[0,0,0]`},
		{`{"type": "array", "minItems": 2}`, `[0,0]`},
		{`{"enum": ["long one", 7, null]}`, `7`},
		{`{"const": {"k": [1, 2]}}`, `{"k":[1,2]}`},
		{`{"anyOf": [{"type": "string", "minLength": 5}, {"type": "array", "minItems": 1}]}`, `[0]`},
		{`{"$defs": {"s": {"type": "string", "minLength": 4}}, "type": "object", "properties": {"x": {"$ref": "#/$defs/s"}}, "required": ["x"]}`, `{"x":"aaaa"}`},
		{`{"$defs": {"n": {"type": "object", "properties": {"n": {"$ref": "#/$defs/n"}}, "required": ["n"]}}, "$ref": "#/$defs/n"}`, `{"n":}`},
		{`true`, `0`},
	} {
		root, err := decodeSchema([]byte(c.schema))
		if err != nil {
			t.Fatal(err)
		}
		z := &schemaSizer{visiting: map[string]bool{}}
		z.root, _ = root.(map[string]any)
		got, err := z.size(root, "#", 0)
		if err != nil || got != int64(len(c.smallest)) {
			t.Errorf("%s: %d, %v; want %d (%s)", c.schema, got, err, len(c.smallest), c.smallest)
		}
	}
}
