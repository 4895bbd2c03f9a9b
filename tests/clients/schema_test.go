package clients

import (
	"context"
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/shared"
)

// zodSchema is what zod 4's toJSONSchema writes for a typical object
// (z.number().int() as the safe-integer range, .min/.max, z.iso.date(),
// z.uuid(), z.enum, z.literal, a regex, an optional nullable, $defs),
// the shape the OpenAI SDK's zodResponseFormat and the AI SDK's
// generateObject send.
const zodSchema = `{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object",
	"properties":{
		"count":{"type":"integer","minimum":-9007199254740991,"maximum":9007199254740991},
		"age":{"type":"integer","minimum":0,"maximum":150},
		"score":{"type":"number","exclusiveMinimum":0,"maximum":1},
		"day":{"type":"string","format":"date"},
		"id":{"type":"string","format":"uuid"},
		"code":{"type":"string","pattern":"^[A-Z]{3}-[0-9]{2}$"},
		"kind":{"type":"string","enum":["a","b","c"]},
		"version":{"type":"string","const":"v1"},
		"note":{"anyOf":[{"type":"string","maxLength":4},{"type":"null"}]},
		"tags":{"type":"array","items":{"$ref":"#/$defs/tag"},"minItems":1,"maxItems":2}},
	"required":["count","age","score","day","id","code","kind","version","note","tags"],
	"additionalProperties":false,
	"$defs":{"tag":{"type":"string","pattern":"^#[a-z]{1,3}$"}}}`

// wsRun is a run of whitespace between JSON tokens; the grammar allows
// one space, or a newline and at most 20 spaces or tabs (as llama.cpp).
var (
	wsRun   = regexp.MustCompile(`[ \t\n\r]+`)
	wsBound = regexp.MustCompile(`^( |\n[ \t]{0,20})$`)
)

// On the engine, through the official OpenAI client: a zod-made schema
// with integer bounds, formats, a pattern, enum, const, anyOf, $ref and
// array bounds gets answers that follow it (the server refused
// "minimum", so zodResponseFormat failed for any schema with an
// integer), with whitespace bounded.
func TestZodSchemaOnTheEngine(t *testing.T) {
	srv := startToolEngine(t)
	c := openaiClient(srv.URL)
	var schema map[string]any
	if err := json.Unmarshal([]byte(zodSchema), &schema); err != nil {
		t.Fatal(err)
	}
	date := regexp.MustCompile(`^\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])$`)
	uuid := regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)
	code := regexp.MustCompile(`^[A-Z]{3}-[0-9]{2}$`)
	tag := regexp.MustCompile(`^#[a-z]{1,3}$`)
	for seed := int64(1); seed <= 3; seed++ {
		resp, err := c.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
			Model:       "minicpm5:2b",
			Messages:    []openai.ChatCompletionMessageParamUnion{openai.UserMessage("a record as JSON")},
			Temperature: openai.Float(1), Seed: openai.Int(seed), MaxTokens: openai.Int(1500),
			ResponseFormat: openai.ChatCompletionNewParamsResponseFormatUnion{OfJSONSchema: &shared.ResponseFormatJSONSchemaParam{
				JSONSchema: shared.ResponseFormatJSONSchemaJSONSchemaParam{Name: "record", Schema: schema, Strict: openai.Bool(true)},
			}},
		})
		if err != nil {
			t.Fatal(err)
		}
		content := resp.Choices[0].Message.Content
		var v struct {
			Count   *int64   `json:"count"`
			Age     *int64   `json:"age"`
			Score   *float64 `json:"score"`
			Day     string   `json:"day"`
			ID      string   `json:"id"`
			Code    string   `json:"code"`
			Kind    string   `json:"kind"`
			Version string   `json:"version"`
			Note    *string  `json:"note"`
			Tags    []string `json:"tags"`
		}
		dec := json.NewDecoder(strings.NewReader(content))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&v); err != nil {
			t.Fatalf("seed %d: %q: %v", seed, content, err)
		}
		bad := v.Count == nil || v.Age == nil || *v.Age < 0 || *v.Age > 150 || v.Score == nil || *v.Score <= 0 || *v.Score > 1 ||
			!date.MatchString(v.Day) || !uuid.MatchString(v.ID) || !code.MatchString(v.Code) ||
			!strings.Contains("abc", v.Kind) || len(v.Kind) != 1 || v.Version != "v1" || v.Note != nil && len([]rune(*v.Note)) > 4 ||
			len(v.Tags) < 1 || len(v.Tags) > 2
		for _, tg := range v.Tags {
			bad = bad || !tag.MatchString(tg)
		}
		if bad {
			t.Errorf("seed %d: %s does not follow the schema", seed, content)
		}
		for _, run := range wsRun.FindAllString(content, -1) {
			if !wsBound.MatchString(run) {
				t.Errorf("seed %d: whitespace run %q is past llama.cpp's bound in %s", seed, run, content)
			}
		}
		t.Logf("seed %d: %s", seed, content)
	}
}

// Hostile schemas and ones the grammar cannot honour are a 400 naming
// the keyword, at once, in each API's own shape.
func TestHostileSchemasAreRefused(t *testing.T) {
	srv := startToolEngine(t)
	var big strings.Builder
	big.WriteString(`{"enum":[`)
	for i := range 100000 {
		if i > 0 {
			big.WriteByte(',')
		}
		big.WriteString(`"v` + strings.Repeat("x", i%7) + `"`)
	}
	big.WriteString(`]}`)
	for _, c := range []struct{ name, schema, want string }{
		{"100,000-value enum", big.String(), "enum"},
		{"$ref loop", `{"$defs":{"a":{"$ref":"#/$defs/b"},"b":{"$ref":"#/$defs/a"}},"$ref":"#/$defs/a"}`, "$ref"},
		{"no finite document", `{"type":"object","properties":{"next":{"$ref":"#"}},"required":["next"]}`, "no finite document"},
		{"catastrophic pattern", `{"type":"string","pattern":"^(a|b)*a(a|b){20}$"}`, "pattern"},
		{"backtracking pattern", `{"type":"object","properties":{"s":{"type":"string","pattern":"^(a+)+$"}},"required":["s"]}`, ""},
		{"multipleOf", `{"type":"integer","multipleOf":5}`, "multipleOf"},
		{"unknown format", `{"type":"string","format":"hostname"}`, "format"},
	} {
		for _, route := range []struct{ path, body, shape string }{
			{"/v1/chat/completions", `{"model":"minicpm5:2b","max_tokens":3,"messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_schema","json_schema":{"name":"s","schema":SCHEMA}}}`, `"error":{"message":`},
			{"/api/chat", `{"model":"minicpm5:2b","stream":false,"options":{"num_predict":3},"messages":[{"role":"user","content":"x"}],"format":SCHEMA}`, `{"error":"`},
		} {
			body := strings.Replace(route.body, "SCHEMA", c.schema, 1)
			start := time.Now()
			resp, err := http.Post(srv.URL+route.path, "application/json", strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			var out strings.Builder
			buf := make([]byte, 4096)
			for {
				n, err := resp.Body.Read(buf)
				out.Write(buf[:n])
				if err != nil {
					break
				}
			}
			resp.Body.Close()
			took := time.Since(start)
			if c.want == "" { // compiles (a DFA does not backtrack)
				if resp.StatusCode != 200 {
					t.Errorf("%s %s: %d %s, want 200", c.name, route.path, resp.StatusCode, out.String())
				}
				continue
			}
			if resp.StatusCode != 400 || !strings.Contains(out.String(), c.want) || !strings.Contains(out.String(), route.shape) {
				t.Errorf("%s %s: %d %s, want a 400 naming %s", c.name, route.path, resp.StatusCode, out.String(), c.want)
			}
			t.Logf("%s %s: %d in %v", c.name, route.path, resp.StatusCode, took.Round(time.Millisecond))
		}
	}
}

// unionSchema has what the grammar once refused with a 400 (issue 26):
// anyOf alternatives that start with the same byte (a date or a short
// string; two objects, the shape of zod's z.union of objects), a oneOf
// told apart by a discriminator property, and additionalProperties as a
// schema beside declared properties (their keys bounded by
// propertyNames, as zod writes a z.record's key schema, so that a random
// model's keys end).
const unionSchema = `{"type":"object",
	"properties":{
		"when":{"anyOf":[{"type":"string","format":"date"},{"type":"string","maxLength":3}]},
		"shape":{"anyOf":[
			{"type":"object","properties":{"kind":{"const":"dot"},"r":{"type":"integer","minimum":0,"maximum":9}},"required":["kind","r"],"additionalProperties":false},
			{"type":"object","properties":{"kind":{"const":"box"},"w":{"type":"boolean"}},"required":["kind"],"additionalProperties":false}]},
		"pet":{"oneOf":[
			{"type":"object","properties":{"type":{"const":"cat"},"lives":{"type":"integer","minimum":1,"maximum":9}},"required":["type","lives"],"additionalProperties":false},
			{"type":"object","properties":{"type":{"const":"dog"}},"required":["type"],"additionalProperties":false}],
			"discriminator":{"propertyName":"type"}},
		"flags":{"type":"object","properties":{"id":{"type":"integer","minimum":0,"maximum":99}},"required":["id"],
			"additionalProperties":{"type":"boolean"},"propertyNames":{"pattern":"^[a-z]{1,3}$"}}},
	"required":["when","shape","pet","flags"],"additionalProperties":false}`

// On the engine, through the official OpenAI client, a schema with
// unions whose alternatives start alike and additional properties gets
// answers that follow it (a 400 "anyOf alternatives that can both start
// with '{'" before), and a oneOf that could match twice is a 400 naming
// oneOf.
func TestUnionsAndAdditionalPropertiesOnTheEngine(t *testing.T) {
	srv := startToolEngine(t)
	c := openaiClient(srv.URL)
	var schema map[string]any
	if err := json.Unmarshal([]byte(unionSchema), &schema); err != nil {
		t.Fatal(err)
	}
	date := regexp.MustCompile(`^\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])$`)
	flagKey := regexp.MustCompile(`^[a-z]{1,3}$`)
	extras := 0
	for seed := int64(1); seed <= 4; seed++ {
		resp, err := c.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
			Model:       "minicpm5:2b",
			Messages:    []openai.ChatCompletionMessageParamUnion{openai.UserMessage("a record as JSON")},
			Temperature: openai.Float(1), Seed: openai.Int(seed), MaxTokens: openai.Int(1500),
			ResponseFormat: openai.ChatCompletionNewParamsResponseFormatUnion{OfJSONSchema: &shared.ResponseFormatJSONSchemaParam{
				JSONSchema: shared.ResponseFormatJSONSchemaJSONSchemaParam{Name: "record", Schema: schema},
			}},
		})
		if err != nil {
			t.Fatal(err)
		}
		content := resp.Choices[0].Message.Content
		var v struct {
			When  string                     `json:"when"`
			Shape map[string]json.RawMessage `json:"shape"`
			Pet   map[string]json.RawMessage `json:"pet"`
			Flags map[string]json.RawMessage `json:"flags"`
		}
		dec := json.NewDecoder(strings.NewReader(content))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&v); err != nil {
			t.Fatalf("seed %d: %q: %v", seed, content, err)
		}
		var problems []string
		if !date.MatchString(v.When) && len([]rune(v.When)) > 3 {
			problems = append(problems, "when is neither a date nor 3 characters")
		}
		switch kind := string(v.Shape["kind"]); kind {
		case `"dot"`:
			var r int
			if len(v.Shape) != 2 || json.Unmarshal(v.Shape["r"], &r) != nil || r < 0 || r > 9 {
				problems = append(problems, "a dot without r in 0..9")
			}
		case `"box"`:
			if w, ok := v.Shape["w"]; len(v.Shape) > 2 || ok && string(w) != "true" && string(w) != "false" || !ok && len(v.Shape) != 1 {
				problems = append(problems, "a box with more than a boolean w")
			}
		default:
			problems = append(problems, "shape kind "+kind)
		}
		switch typ := string(v.Pet["type"]); typ {
		case `"cat"`:
			var n int
			if len(v.Pet) != 2 || json.Unmarshal(v.Pet["lives"], &n) != nil || n < 1 || n > 9 {
				problems = append(problems, "a cat without lives in 1..9")
			}
		case `"dog"`:
			if len(v.Pet) != 1 {
				problems = append(problems, "a dog with more than its type")
			}
		default:
			problems = append(problems, "pet type "+typ)
		}
		var id int
		if json.Unmarshal(v.Flags["id"], &id) != nil || id < 0 || id > 99 {
			problems = append(problems, "flags without id in 0..99")
		}
		for k, x := range v.Flags {
			if k != "id" && (string(x) != "true" && string(x) != "false" || !flagKey.MatchString(k)) {
				problems = append(problems, "flag "+k+" is not a boolean under a key of 1-3 letters")
			}
			if k != "id" {
				extras++
			}
		}
		if problems != nil {
			t.Errorf("seed %d: %s does not follow the schema: %s", seed, content, strings.Join(problems, "; "))
		}
		t.Logf("seed %d: %s", seed, content)
	}
	t.Logf("%d additional properties in 4 answers", extras)

	body := `{"model":"minicpm5:2b","max_tokens":3,"messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_schema","json_schema":{"name":"s","schema":{"oneOf":[{"type":"string","format":"date"},{"type":"string"}]}}}}`
	resp, err := http.Post(srv.URL+"/v1/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Error struct{ Message, Param string }
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != 400 || !strings.Contains(out.Error.Message, "oneOf alternatives 0 and 1 can match the same document") {
		t.Errorf("an ambiguous oneOf: %d %+v %v, want a 400 naming oneOf", resp.StatusCode, out, err)
	}
}
