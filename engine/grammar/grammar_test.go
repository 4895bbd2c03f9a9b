package grammar

import (
	"fmt"
	"strings"
	"testing"
)

// accepts reports whether the whole of doc is in g's language.
func accepts(g *Grammar, doc string) bool {
	s := g.initial()
	for i := 0; i < len(doc); i++ {
		if g.step(&s, doc[i]) == reject {
			return false
		}
	}
	return g.canEnd(s)
}

func mustSchema(t *testing.T, schema string) *Grammar {
	t.Helper()
	g, err := FromSchema([]byte(schema))
	if err != nil {
		t.Fatalf("%s: %v", schema, err)
	}
	return g
}

func TestSchemaLanguage(t *testing.T) {
	tests := []struct {
		name   string
		schema string
		ok     []string
		bad    []string
	}{
		{"string", `{"type":"string"}`,
			[]string{`""`, `"abc"`, `"a\"b\\c\n\u00e9\u20AC"`, ` "x"`, `"héllo €😀"`},
			[]string{`abc`, `"abc`, `"a` + "\n" + `"`, `"\x"`, `"\ud800"`, `"x" `, `"x""`, "\"\xff\"", "\"\xc3\"", "\"\xed\xa0\x80\""}},
		{"string lengths", `{"type":"string","minLength":2,"maxLength":3}`,
			[]string{`"ab"`, `"abc"`, `"é€"`, `"\n\t"`, `"😀😀😀"`},
			[]string{`""`, `"a"`, `"abcd"`, `"😀"`, `"\u0041"`}},
		{"integer", `{"type":"integer"}`,
			[]string{`0`, `-0`, `7`, `-12`, `123456789012345`},
			[]string{`01`, `1.5`, `1e3`, `-`, `+1`, `1234567890123456`, `""`}},
		{"number", `{"type":"number"}`,
			[]string{`0`, `-1.25`, `3e10`, `2.5E-3`, `0.0`, `1e+99`},
			[]string{`.5`, `1.`, `1e`, `1e+`, `00`, `1e100`, `- 1`}},
		{"boolean and null", `{"type":["boolean","null"]}`,
			[]string{`true`, `false`, `null`},
			[]string{`nul`, `truex`, `0`, `"true"`}},
		{"enum", `{"enum":["red","green",1,12,null,{"a":[1,2]}]}`,
			[]string{`"red"`, `"green"`, `1`, `12`, `null`, `{"a":[1,2]}`},
			[]string{`"blue"`, `2`, `123`, `"re"`, `{"a":[1]}`}},
		{"const", `{"const":"x"}`, []string{`"x"`}, []string{`"y"`, `x`}},
		{"integer range", `{"type":"integer","minimum":-5,"maximum":120}`,
			[]string{`-5`, `-0`, `0`, `7`, `99`, `120`, `100`},
			[]string{`-6`, `-10`, `121`, `130`, `1000`, `-50`, `1.5`, `01`}},
		{"integer exclusive", `{"type":"integer","exclusiveMinimum":0,"exclusiveMaximum":10}`,
			[]string{`1`, `9`},
			[]string{`0`, `-0`, `10`, `-1`, `11`}},
		{"integer draft 4 exclusive", `{"type":"integer","minimum":0,"exclusiveMinimum":true,"maximum":3}`,
			[]string{`1`, `3`}, []string{`0`, `4`}},
		{"integer high minimum", `{"type":"integer","minimum":1000}`,
			[]string{`1000`, `999999`, `123456789012345`}, []string{`999`, `0`, `-1000`, `1`}},
		{"number range", `{"type":"number","minimum":0.5,"exclusiveMaximum":2}`,
			[]string{`0.5`, `1`, `1.999`, `0.75`},
			[]string{`0.4`, `0.49999`, `2`, `2.0`, `-1`, `1e0`, `0`}},
		{"number negative range", `{"type":"number","minimum":-1.5,"maximum":-0.25}`,
			[]string{`-1.5`, `-1`, `-0.25`, `-0.3`},
			[]string{`-1.51`, `-2`, `-0.2`, `0`, `1`}},
		{"enum within bounds", `{"enum":[1,5,"a"],"minimum":2}`, []string{`5`, `"a"`}, []string{`1`}},
		{"pattern unanchored", `{"type":"string","pattern":"ab+c"}`,
			[]string{`"abc"`, `"xxabbbcyy"`, `"\u0061bc"`, `"é abc é"`},
			[]string{`"ac"`, `""`, `"abx"`}},
		{"pattern anchored", `{"type":"string","pattern":"^[A-Z][a-z]{1,3}(-[0-9]+)?$"}`,
			[]string{`"Ab"`, `"Abcd"`, `"Ab-12"`},
			[]string{`"ab"`, `"Abcde"`, `"Ab-"`, `"xAb"`, `"Ab "`}},
		{"pattern with escapes", `{"type":"string","pattern":"^\"[\\n\\t]é€$"}`,
			[]string{`"\"\né€"`, `"\"\t\u00e9\u20ac"`},
			[]string{`"\"\ré€"`, `"\"\né"`, `"\"\n\u00e8€"`}},
		{"format date", `{"type":"string","format":"date"}`,
			[]string{`"2024-02-29"`, `"1999-12-31"`},
			[]string{`"2024-13-01"`, `"2024-1-01"`, `"2024-01-32"`, `"x2024-01-01"`}},
		{"format date-time", `{"type":"string","format":"date-time"}`,
			[]string{`"2024-02-29T23:59:59Z"`, `"2024-02-29T08:00:00.123+05:30"`},
			[]string{`"2024-02-29 08:00:00Z"`, `"2024-02-29T24:00:00Z"`, `"2024-02-29T08:00:00"`}},
		{"format time", `{"type":"string","format":"time"}`,
			[]string{`"08:30:00Z"`, `"23:59:59.5-01:00"`}, []string{`"8:30:00Z"`, `"08:30Z"`}},
		{"format uuid", `{"type":"string","format":"uuid"}`,
			[]string{`"123e4567-e89b-12d3-a456-426614174000"`},
			[]string{`"123e4567e89b12d3a456426614174000"`, `"123e4567-e89b-12d3-a456-42661417400g"`}},
		{"integer format int32", `{"type":"integer","format":"int32"}`,
			[]string{`2147483647`, `-2147483648`}, []string{`2147483648`}},
		{"oneOf", `{"oneOf":[{"type":"string"},{"type":"integer","maximum":3}]}`, []string{`"x"`, `3`}, []string{`4`, `null`}},
		{"enum filtered by type", `{"type":"string","enum":["a",1,"bb"],"maxLength":1}`, []string{`"a"`}, []string{`1`, `"bb"`}},
		{"object in declared order", `{"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer"},"tag":{"type":"string"}},"required":["name","tag"]}`,
			[]string{`{"name":"a","tag":"t"}`, `{"name":"a","age":3,"tag":"t"}`, `{ "name": "a" , "tag": "t" }`, "{\n  \"name\": \"a\",\n  \"tag\": \"t\"\n}"},
			[]string{`{"name":"a"}`, `{"tag":"t","name":"a"}`, `{"name":"a","tag":"t","x":1}`, `{"name":"a",,"tag":"t"}`, `{"name" :"a","tag":"t"}`, `{"name":1,"tag":"t"}`, `{}`, `{"name":"a","tag":"t",}`}},
		{"optional only", `{"properties":{"a":{"type":"integer"},"b":{"type":"integer"}},"additionalProperties":false}`,
			[]string{`{}`, `{"a":1}`, `{"b":2}`, `{"a":1,"b":2}`},
			[]string{`{"b":2,"a":1}`, `{"c":1}`, `{"a":1,}`}},
		{"prefix keys", `{"properties":{"ab":{"type":"integer"},"a":{"type":"integer"}},"required":["a"]}`,
			[]string{`{"a":1}`, `{"ab":1,"a":2}`}, []string{`{"ab":1}`, `{"a":1,"ab":2}`}},
		{"free object", `{"type":"object"}`,
			[]string{`{}`, `{"x":1,"y":[true,{"z":null}],"w":"s"}`, `{"":-1.5e3}`},
			[]string{`[]`, `{"x"}`, `{1:2}`, `{"x":1,}`}},
		{"free object with value schema", `{"type":"object","additionalProperties":{"type":"integer"}}`,
			[]string{`{}`, `{"a":1,"b":2}`}, []string{`{"a":"x"}`}},
		{"no properties at all", `{"type":"object","additionalProperties":false}`, []string{`{}`, `{ }`}, []string{`{"a":1}`}},
		{"array", `{"type":"array","items":{"type":"integer"},"minItems":1,"maxItems":3}`,
			[]string{`[1]`, `[1,2,3]`, `[ 1 , 2 ]`},
			[]string{`[]`, `[1,2,3,4]`, `[1,]`, `["a"]`, `[,1]`}},
		{"array of anything", `{"type":"array"}`, []string{`[]`, `[1,"a",[],{}]`}, []string{`[`, `]`}},
		{"nullable string", `{"anyOf":[{"type":"string","maxLength":2},{"type":"null"}]}`,
			[]string{`"ab"`, `null`}, []string{`"abc"`, `1`}},
		{"defs and ref", `{"$defs":{"pt":{"type":"object","properties":{"x":{"type":"number"},"y":{"type":"number"}},"required":["x","y"]}},"type":"array","items":{"$ref":"#/$defs/pt"}}`,
			[]string{`[]`, `[{"x":1,"y":2},{"x":-1.5,"y":0}]`}, []string{`[{"x":1}]`}},
		{"recursive", `{"type":"object","properties":{"v":{"type":"integer"},"kids":{"type":"array","items":{"$ref":"#"}}},"required":["v"]}`,
			[]string{`{"v":1}`, `{"v":1,"kids":[{"v":2,"kids":[{"v":3}]}]}`}, []string{`{"v":1,"kids":[{}]}`}},
		{"any", `{}`, []string{`1`, `"s"`, `null`, `[{"a":{}}]`, `{}`}, []string{`nope`, `{`}},
		{"annotations ignored", `{"title":"T","description":"d","$schema":"https://json-schema.org/draft/2020-12/schema","type":"string","default":"x","examples":["y"]}`,
			[]string{`"z"`}, []string{`1`}},
		{"anyOf sharing a first byte", `{"anyOf":[{"type":"string","format":"date"},{"type":"string","maxLength":3}]}`,
			[]string{`"2024-02-29"`, `"ab"`, `""`, `"202"`},
			[]string{`"2024-02"`, `"abcd"`, `1`}},
		{"anyOf of two objects", `{"anyOf":[{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"],"additionalProperties":false},{"type":"object","properties":{"b":{"type":"string"}},"required":["b"],"additionalProperties":false}]}`,
			[]string{`{"a":1}`, `{"b":"x"}`, `{ "b": "x" }`},
			[]string{`{}`, `{"a":"x"}`, `{"b":1}`, `{"a":1,"b":"x"}`}},
		{"anyOf of objects with a common prefix", `{"anyOf":[{"properties":{"t":{"const":"point"},"x":{"type":"integer"}},"required":["t","x"]},{"properties":{"t":{"const":"pair"},"x":{"type":"string"}},"required":["t","x"]}]}`,
			[]string{`{"t":"point","x":1}`, `{"t":"pair","x":"a"}`},
			[]string{`{"t":"point","x":"a"}`, `{"t":"pair","x":1}`, `{"t":"po","x":1}`}},
		{"anyOf of numbers", `{"type":"array","items":{"anyOf":[{"type":"integer","maximum":9},{"type":"number","minimum":100}]}}`,
			[]string{`[1,2]`, `[100.5,3]`, `[-5,250]`},
			[]string{`[10]`, `[99.5]`, `[1.5]`}},
		{"anyOf of same alternatives", `{"anyOf":[{"type":"string"},{"type":"string"},{}]}`,
			[]string{`"x"`, `1`, `{"a":[]}`}, []string{`x`}},
		{"oneOf with a discriminator", `{"oneOf":[{"properties":{"kind":{"const":"cat"},"lives":{"type":"integer"}},"required":["kind"]},{"properties":{"kind":{"enum":["dog","wolf"]},"bark":{"type":"boolean"}},"required":["kind"]}],"discriminator":{"propertyName":"kind"}}`,
			[]string{`{"kind":"cat","lives":9}`, `{"kind":"dog"}`, `{"kind":"wolf","bark":true}`},
			[]string{`{"kind":"cat","bark":true}`, `{"kind":"dog","lives":1}`, `{}`}},
		{"oneOf of literals", `{"oneOf":[{"enum":["a","ab"]},{"const":"abc"}]}`,
			[]string{`"a"`, `"ab"`, `"abc"`}, []string{`"b"`, `"abcd"`}},
		{"additional properties beside declared ones", `{"properties":{"name":{"type":"string"},"age":{"type":"integer"}},"required":["name"],"additionalProperties":{"type":"boolean"}}`,
			[]string{`{"name":"a"}`, `{"name":"a","age":3}`, `{"name":"a","x":true}`, `{"name":"a","age":3,"x":true,"y":false}`, `{"name":"a","nam":true}`, `{"name":"a","agee":false}`, `{"name":"a","":true}`},
			[]string{`{"x":true}`, `{"name":"a","x":1}`, `{"name":"a","age":true}`, `{"name":"a","name":true}`, `{"name":"a","x":true,"age":3}`, `{"name":"a","age":3,"age":true}`, `{"name":"a","\u0061ge":true}`, `{"x":true,"name":"a"}`}},
		{"additional properties true", `{"properties":{"a":{"type":"integer"}},"additionalProperties":true}`,
			[]string{`{}`, `{"a":1}`, `{"a":1,"b":[null]}`, `{"b":"x","c":{}}`}, []string{`{"a":"x"}`, `{"b":1,"a":2}`}},
		{"additional properties absent", `{"properties":{"a":{"type":"integer"}}}`,
			[]string{`{}`, `{"a":1}`}, []string{`{"b":1}`, `{"a":1,"b":1}`}},
		{"additional after a key with a multi-byte start", `{"properties":{"é":{"type":"integer"}},"additionalProperties":{"type":"null"}}`,
			[]string{`{"é":1}`, `{"è":null}`, `{"é":1,"ê":null}`, `{"éa":null}`}, []string{`{"é":null}`, `{"è":1}`}},
		{"propertyNames on free keys", `{"type":"object","propertyNames":{"pattern":"^[a-z]{1,3}$"},"additionalProperties":{"type":"integer"}}`,
			[]string{`{}`, `{"a":1}`, `{"abc":1,"x":2}`}, []string{`{"abcd":1}`, `{"A":1}`, `{"":1}`, `{"\u0061":1}`, `{"a":"x"}`}},
		{"propertyNames beside properties", `{"properties":{"id":{"type":"integer"},"toolong":{"type":"integer"}},"propertyNames":{"maxLength":3},"additionalProperties":{"type":"boolean"}}`,
			[]string{`{"id":1}`, `{"id":1,"ab":true}`, `{"i":true}`, `{"idx":false}`}, []string{`{"toolong":1}`, `{"id":1,"abcd":true}`, `{"id":true}`}},
		{"required not declared", `{"type":"object","required":["q"],"additionalProperties":{"type":"boolean"}}`,
			[]string{`{"q":true}`}, []string{`{}`, `{"q":1}`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g := mustSchema(t, tc.schema)
			for _, doc := range tc.ok {
				if !accepts(g, doc) {
					t.Errorf("refused %q", doc)
				}
			}
			for _, doc := range tc.bad {
				if accepts(g, doc) {
					t.Errorf("accepted %q", doc)
				}
			}
		})
	}
}

func TestSchemaRefused(t *testing.T) {
	tests := []struct{ schema, want string }{
		{`{"type":"string","pattern":"^a\\b"}`, `pattern: "^a\\b" uses an assertion`},
		{`{"type":"string","pattern":"(a"}`, `pattern: "(a" is not a regular expression`},
		{`{"type":"string","pattern":"^(a|b)*a(a|b){15}$"}`, `is too complex`},
		{`{"type":"string","pattern":"^[^\\x00-\\x{10FFFF}]$"}`, `matches no string`},
		{`{"type":"string","pattern":"^a+$","maxLength":3}`, `minLength or maxLength beside pattern`},
		{`{"type":"string","format":"hostname"}`, `format: "hostname" is not a format`},
		{`{"type":"integer","format":"int128"}`, `format: "int128"`},
		{`{"type":"integer","minimum":5,"maximum":4}`, `nothing can match`},
		{`{"type":"integer","exclusiveMinimum":4,"exclusiveMaximum":5}`, `nothing can match`},
		{`{"type":"number","minimum":1,"exclusiveMaximum":1}`, `nothing can match`},
		{`{"type":"integer","minimum":1e16}`, `past the largest`},
		{`{"type":"number","multipleOf":2}`, `"multipleOf" is not supported`},
		{`{"type":"integer","minimum":"1"}`, `minimum: must be a number`},
		{`{"oneOf":[{"type":"object"},{"type":"object","properties":{"a":{}}}]}`, `oneOf alternatives 0 and 1 can match the same document`},
		{`{"oneOf":[{"type":"string","format":"date"},{"type":"string"}]}`, `oneOf alternatives 0 and 1`},
		{`{"oneOf":[{"type":"integer"},{"type":["string","number"]}]}`, `oneOf alternatives 0 and 1`},
		{`{"oneOf":[{"enum":["a","b"]},{"enum":["b","c"]}]}`, `oneOf alternatives 0 and 1`},
		{`{"oneOf":[{"properties":{"k":{"const":"a"}},"required":["k"]},{"properties":{"k":{"const":"a"}},"required":["k"]}]}`, `oneOf alternatives 0 and 1`},
		{`{"oneOf":[{"properties":{"k":{"const":"a"}}},{"properties":{"k":{"const":"b"}}}]}`, `oneOf alternatives 0 and 1`},
		{`{"properties":{"a":{"type":"string","format":"datetime"}}}`, `#/properties/a/format: "datetime"`},
		{`{"allOf":[]}`, `"allOf"`},
		{`{"$ref":"https://example.com/s.json"}`, `not a reference inside this schema`},
		{`{"$ref":"#/$defs/missing"}`, `points at nothing`},
		{`{"$ref":"#"}`, `no finite document`},
		{`{"$defs":{"a":{"$ref":"#/$defs/b"},"b":{"$ref":"#/$defs/a"}},"$ref":"#/$defs/a"}`, `$ref`},
		{`{"type":"object","properties":{"next":{"$ref":"#"}},"required":["next"]}`, `no finite document`},
		{`{"type":"array","items":{"$ref":"#"},"minItems":1}`, `no finite document`},
		{`{"type":"strin"}`, `unknown type "strin"`},
		{`{"type":"string","minLength":3,"maxLength":2}`, `nothing can match`},
		{`{"type":"array","items":[{"type":"string"}]}`, `tuple items`},
		{`{"type":"object","required":["a"],"additionalProperties":false}`, `"a" is required but not in properties`},
		{`{"enum":[]}`, `non-empty list`},
		{`{"type":"string","enum":[1,2]}`, `no value of enum/const fits`},
		{`false`, `accepts nothing`},
		{`{"type":"string"} x`, `invalid JSON`},
		{`{"minLength":-1}`, `must be a non-negative integer`},
		{`{"type":"object","propertyNames":{"enum":["a"]}}`, `propertyNames: only a string schema`},
		{`{"type":"object","properties":{"long":{}},"required":["long"],"propertyNames":{"maxLength":2}}`, `"long" is required but does not follow propertyNames`},
	}
	for _, tc := range tests {
		_, err := FromSchema([]byte(tc.schema))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want one containing %q", tc.schema, err, tc.want)
		}
	}
}

// Hostile schemas are refused at once with an error that names the
// keyword, instead of compiling for long or into a grammar that costs
// seconds per token.
func TestHostileSchemas(t *testing.T) {
	var big strings.Builder
	big.WriteString(`{"enum":[`)
	for i := range 100000 {
		if i > 0 {
			big.WriteByte(',')
		}
		fmt.Fprintf(&big, `"value number %d"`, i)
	}
	big.WriteString(`]}`)
	deep := strings.Repeat(`{"type":"array","items":`, 200) + `{}` + strings.Repeat(`}`, 200)
	long := `{"enum":["` + strings.Repeat("x", 600000) + `","` + strings.Repeat("y", 600000) + `"]}`
	for _, tc := range []struct{ name, schema, want string }{
		{"100,000-value enum", big.String(), "enum: 100000 values"},
		{"deep nesting", deep, "nests more than"},
		{"huge values", long, "enum: the values are more than"},
	} {
		_, err := FromSchema([]byte(tc.schema))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want one containing %q", tc.name, err, tc.want)
		}
	}
}

// A recursive schema whose recursion is optional compiles, and the
// generation can always end: the recursive branch is not required.
func TestRecursionThatCanEnd(t *testing.T) {
	g := mustSchema(t, `{"$defs":{"node":{"type":"object","properties":{"v":{"type":"integer"},"kids":{"type":"array","items":{"$ref":"#/$defs/node"}}},"required":["v"]}},"$ref":"#/$defs/node"}`)
	for _, doc := range []string{`{"v":1}`, `{"v":1,"kids":[]}`, `{"v":1,"kids":[{"v":2,"kids":[{"v":3}]}]}`} {
		if !accepts(g, doc) {
			t.Errorf("refused %s", doc)
		}
	}
	// A property that can never end is left out rather than entered.
	g = mustSchema(t, `{"type":"object","properties":{"a":{"type":"integer"},"loop":{"$ref":"#/$defs/l"}},"$defs":{"l":{"type":"object","properties":{"x":{"$ref":"#/$defs/l"}},"required":["x"]}}}`)
	if accepts(g, `{"a":1,"loop":{"x":{"x":{}}}}`) || !accepts(g, `{"a":1}`) {
		t.Error("the endless property was not left out")
	}
}

func TestJSONObject(t *testing.T) {
	g := JSONObject()
	for _, doc := range []string{`{}`, `{"a":[1,2,{"b":null}],"c":"d"}`, ` {"x": true}`} {
		if !accepts(g, doc) {
			t.Errorf("refused %q", doc)
		}
	}
	for _, doc := range []string{`[]`, `1`, `"s"`, `{"a":1}{}`, `{"a":1} `} {
		if accepts(g, doc) {
			t.Errorf("accepted %q", doc)
		}
	}
}

func TestToolCallGrammar(t *testing.T) {
	g, err := ToolCall([]Tool{
		{Name: "get_weather", Parameters: []byte(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`)},
		{Name: "now"},
	}, ToolCallFormat{Prefix: "<tool_call>\n", Suffix: "\n</tool_call>"})
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range []string{
		"<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>",
		"<tool_call>\n{\"name\": \"now\", \"arguments\": {}}\n</tool_call>",
		"<tool_call>\n{\"name\": \"now\", \"arguments\": {\"tz\": \"UTC\"}}\n</tool_call>",
	} {
		if !accepts(g, doc) {
			t.Errorf("refused %q", doc)
		}
	}
	for _, doc := range []string{
		"<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {}}\n</tool_call>",
		"<tool_call>\n{\"name\": \"other\", \"arguments\": {}}\n</tool_call>",
		" <tool_call>\n{\"name\": \"now\", \"arguments\": {}}\n</tool_call>",
		"<tool_call>\n{\"name\": \"now\", \"arguments\": {}}",
	} {
		if accepts(g, doc) {
			t.Errorf("accepted %q", doc)
		}
	}
	if _, err := ToolCall([]Tool{{Name: "f", Parameters: []byte(`{"type":"object","properties":{"a":{"multipleOf":2}}}`)}}, ToolCallFormat{}); err == nil || !strings.Contains(err.Error(), `tool "f" parameters`) {
		t.Errorf("bad parameters: err = %v", err)
	}
}

// Whitespace runs are bounded as llama.cpp bounds them (one space, or a
// newline and at most MaxIndent spaces or tabs), so a model cannot pad
// forever (a forced tool call spent 170-260 tokens on blank space).
func TestWhitespaceBounded(t *testing.T) {
	g := mustSchema(t, `{"type":"object","properties":{"a":{"type":"array"}}}`)
	indent := strings.Repeat(" ", MaxIndent)
	for _, doc := range []string{`{"a":[]}`, `{ "a": [ ] }`, "{\n" + indent + "\"a\": [\n\t\t]\n}", "{\n\t\"a\":[]}"} {
		if !accepts(g, doc) {
			t.Errorf("refused %q", doc)
		}
	}
	for _, doc := range []string{`{  "a":[]}`, "{\n" + indent + " \"a\":[]}", "{\n\n\"a\":[]}", "{ \n\"a\":[]}", "{\t\"a\":[]}", `{"a":[]}  `} {
		if accepts(g, doc) {
			t.Errorf("accepted %q", doc)
		}
	}
}

// Nesting past MaxDepth is refused instead of growing the stack.
func TestDepthBounded(t *testing.T) {
	g := mustSchema(t, `{}`)
	deep := strings.Repeat("[", MaxDepth+2) + strings.Repeat("]", MaxDepth+2)
	if accepts(g, deep) {
		t.Error("accepted nesting past MaxDepth")
	}
	ok := strings.Repeat("[", MaxDepth-1) + strings.Repeat("]", MaxDepth-1)
	if !accepts(g, ok) {
		t.Error("refused nesting within MaxDepth")
	}
}
