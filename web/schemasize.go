package web

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/npuchat/npuchat/service/backend"
)

// A JSON schema whose smallest document is longer than the answer may
// be is refused before it runs: {"minLength": 1e9} compiled, and the
// answer ran to max_tokens and came back cut and invalid. The smallest
// document's length is counted in characters of compact JSON (minSize);
// a token holds at most maxCharsPerToken of them, so a schema needing
// more than the budget's tokens times that cannot fit. Schemas nested
// deeper than maxSchemaDepth subschemas (twice that in JSON levels) are
// refused too.

const (
	// maxCharsPerToken is more characters than any token of the models
	// NPU Chat runs spells (their longest are runs of spaces or
	// punctuation of a few dozen): a bound that never refuses a
	// document that fits.
	maxCharsPerToken = 64
	// maxSchemaDepth bounds the nesting of a schema's subschemas.
	maxSchemaDepth = 64
	// unbounded saturates the sizes (no overflow on minItems × items).
	unbounded = int64(1) << 50
)

// schemaSizer computes the smallest document of a schema and remembers
// the keyword that makes it largest, to name it in the error.
type schemaSizer struct {
	root     map[string]any
	visiting map[string]bool // $refs being sized: a cycle adds nothing
	keyword  string          // the path/keyword of the largest single contribution
	largest  int64
}

// checkSchemaFits refuses a request whose answer a JSON schema holds to
// a document that cannot fit in its answer budget: max_tokens, else the
// context (the request's, else the model's, else contextFallback). The
// schemas that bind an answer: a schema response format (param is the
// request's name for it), and a forced tool call's parameters
// (tool_choice "required": the smallest of the tools'; a named
// function: its own).
func (s *Server) checkSchemaFits(req *backend.Request, param string) error {
	budget, what := int64(req.MaxTokens), "max_tokens"
	if budget <= 0 {
		budget, what = int64(s.contextOf(req)), "the context"
	}
	fits := func(raw json.RawMessage, param string) error {
		size, kw, err := schemaMin(raw)
		if err != nil {
			return badRequest(param, "%s: %v", param, err)
		}
		if size <= budget*maxCharsPerToken {
			return nil
		}
		return badRequest(param, "%s: the smallest document the schema allows is %s characters long (%s), more than %s (%d tokens) can hold; lower %s or raise %s",
			param, sizeText(size), kw, what, budget, kw, what)
	}
	if req.Format != nil && req.Format.Type == backend.FormatSchema {
		if err := fits(req.Format.Schema, param); err != nil {
			return err
		}
	}
	var first error
	for i, t := range req.Tools {
		forced := req.ToolChoice.Mode == backend.ToolRequired || req.ToolChoice.Mode == backend.ToolFunction && req.ToolChoice.Name == t.Name
		if !forced {
			continue
		}
		if len(t.Parameters) == 0 && req.ToolChoice.Mode == backend.ToolRequired {
			return nil // any object: {} fits
		}
		err := fits(t.Parameters, fmt.Sprintf("tools[%d].function.parameters", i))
		if err == nil && req.ToolChoice.Mode == backend.ToolRequired {
			return nil // one tool the forced call fits in is enough
		}
		if first == nil {
			first = err
		}
	}
	return first
}

// schemaMin is the length of the smallest document a schema allows and
// the keyword that makes it largest.
func schemaMin(raw json.RawMessage) (int64, string, error) {
	root, err := decodeSchema(raw)
	if err != nil {
		return 0, "", fmt.Errorf("not a JSON schema: %v", err)
	}
	if d := jsonDepth(root, 0); d > 2*maxSchemaDepth {
		return 0, "", fmt.Errorf("the schema nests %d levels deep, more than %d; flatten it", d, 2*maxSchemaDepth)
	}
	z := &schemaSizer{visiting: map[string]bool{}}
	if m, ok := root.(map[string]any); ok {
		z.root = m
	}
	size, err := z.size(root, "#", 0)
	if err != nil {
		return 0, "", err
	}
	kw := z.keyword
	if kw == "" {
		kw = "the schema"
	}
	return size, kw, nil
}

// decodeSchema decodes a schema with its numbers as json.Number (count
// reads them).
func decodeSchema(raw []byte) (any, error) {
	var root any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	err := dec.Decode(&root)
	return root, err
}

// contextFallback is the context assumed for a model whose context is
// not known.
const contextFallback = 1 << 17

// contextOf is the context a request runs in: its own, else the model's.
func (s *Server) contextOf(req *backend.Request) int {
	if req.ContextLength > 0 {
		return req.ContextLength
	}
	name, err := s.mgr.Resolve(req.Model)
	if err == nil {
		for _, d := range s.mgr.Models() {
			if d.Name == name && d.ContextLength > 0 {
				return d.ContextLength
			}
		}
	}
	return contextFallback
}

func sizeText(n int64) string {
	if n >= unbounded {
		return "more than 10^15"
	}
	return strconv.FormatInt(n, 10)
}

// note records a contribution of n characters by keyword at path.
func (z *schemaSizer) note(path, keyword string, n int64) {
	if n > z.largest {
		z.largest, z.keyword = n, path+"/"+keyword
	}
}

// size is a lower bound on the compact JSON length of any document v
// (a schema) accepts.
func (z *schemaSizer) size(v any, path string, depth int) (int64, error) {
	if depth > maxSchemaDepth {
		return 0, fmt.Errorf("the schema nests deeper than %d levels at %s; flatten it", maxSchemaDepth, clip(path, 200))
	}
	s, ok := v.(map[string]any)
	if !ok {
		return 1, nil // true (anything: "0"), false or not a schema: the compiler says
	}
	if c, ok := s["const"]; ok {
		return jsonLen(c), nil
	}
	if e, ok := s["enum"].([]any); ok && len(e) > 0 {
		least := unbounded
		for _, x := range e {
			least = min(least, jsonLen(x))
		}
		return least, nil
	}
	if ref, ok := s["$ref"].(string); ok {
		return z.ref(ref, depth)
	}
	for _, k := range []string{"anyOf", "oneOf"} {
		if alts, ok := s[k].([]any); ok && len(alts) > 0 {
			// The smallest alternative is the document's: its keyword
			// is the one to name.
			least, before := unbounded, *z
			var chosen schemaSizer
			for i, a := range alts {
				z.largest, z.keyword = before.largest, before.keyword
				n, err := z.size(a, fmt.Sprintf("%s/%s/%d", path, k, i), depth+1)
				if err != nil {
					return 0, err
				}
				if n < least || i == 0 {
					least, chosen = n, *z
				}
			}
			z.largest, z.keyword = chosen.largest, chosen.keyword
			return least, nil
		}
	}
	least := unbounded
	for _, t := range schemaTypes(s) {
		n, err := z.sizeOf(t, s, path, depth)
		if err != nil {
			return 0, err
		}
		least = min(least, n)
	}
	return least, nil
}

// sizeOf is size for one of the schema's types.
func (z *schemaSizer) sizeOf(t string, s map[string]any, path string, depth int) (int64, error) {
	switch t {
	case "string":
		n := count(s["minLength"])
		z.note(path, "minLength", n)
		return add(n, 2), nil
	case "boolean", "null":
		return 4, nil
	case "object":
		props, _ := s["properties"].(map[string]any)
		req, _ := s["required"].([]any)
		total := int64(2)
		seen := map[string]bool{}
		for _, r := range req {
			name, _ := r.(string)
			if seen[name] {
				continue // named twice, written once
			}
			seen[name] = true
			var n int64 = 1
			if p, ok := props[name]; ok {
				var err error
				if n, err = z.size(p, path+"/properties/"+jsonPointer(name), depth+1); err != nil {
					return 0, err
				}
			}
			total = add(total, add(jsonLen(name)+1, n))
			if len(seen) > 1 {
				total = add(total, 1) // the comma before it
			}
		}
		return total, nil
	case "array":
		items := int64(1)
		if it, ok := s["items"]; ok {
			var err error
			if items, err = z.size(it, path+"/items", depth+1); err != nil {
				return 0, err
			}
		}
		n := count(s["minItems"])
		total := add(mul(n, items), max(n-1, 0))
		z.note(path, "minItems", total)
		return add(total, 2), nil
	}
	return 1, nil // a number or an integer: one digit
}

// ref sizes a local $ref (#/$defs/x, #/definitions/x); one being sized
// already (recursion) adds nothing.
func (z *schemaSizer) ref(ref string, depth int) (int64, error) {
	if z.visiting[ref] || !strings.HasPrefix(ref, "#/") {
		return 0, nil
	}
	var cur any = z.root
	for _, part := range strings.Split(ref[2:], "/") {
		m, ok := cur.(map[string]any)
		if !ok {
			return 0, nil // the compiler says what is wrong with it
		}
		cur = m[strings.ReplaceAll(strings.ReplaceAll(part, "~1", "/"), "~0", "~")]
	}
	z.visiting[ref] = true
	defer delete(z.visiting, ref)
	return z.size(cur, ref, depth+1)
}

// schemaTypes are a schema's types: "type" as a string or a list, else
// what its keywords imply, as the grammar's compiler reads them.
func schemaTypes(s map[string]any) []string {
	switch t := s["type"].(type) {
	case string:
		return []string{t}
	case []any:
		var out []string
		for _, x := range t {
			if name, ok := x.(string); ok {
				out = append(out, name)
			}
		}
		if len(out) > 0 {
			return out
		}
	}
	has := func(keys ...string) bool {
		for _, k := range keys {
			if _, ok := s[k]; ok {
				return true
			}
		}
		return false
	}
	switch {
	case has("properties", "required", "additionalProperties"):
		return []string{"object"}
	case has("items", "minItems", "maxItems"):
		return []string{"array"}
	case has("minLength", "maxLength", "pattern", "format"):
		return []string{"string"}
	}
	return []string{"number"}
}

// count reads a count keyword (minLength, minItems): 0 when absent or
// not a number, saturated at unbounded.
func count(v any) int64 {
	n, ok := v.(json.Number)
	if !ok {
		return 0
	}
	f, err := n.Float64()
	if err != nil || f <= 0 || math.IsNaN(f) {
		return 0
	}
	if f >= float64(unbounded) {
		return unbounded
	}
	return int64(f)
}

// jsonDepth is how deep v's objects and arrays nest (a schema level is
// two: "properties" and the property's schema).
func jsonDepth(v any, at int) int {
	deepest := at
	switch x := v.(type) {
	case map[string]any:
		for _, e := range x {
			deepest = max(deepest, jsonDepth(e, at+1))
		}
	case []any:
		for _, e := range x {
			deepest = max(deepest, jsonDepth(e, at+1))
		}
	}
	return deepest
}

func jsonLen(v any) int64 {
	b, _ := json.Marshal(v)
	return int64(len(b))
}

func jsonPointer(name string) string {
	return strings.ReplaceAll(strings.ReplaceAll(name, "~", "~0"), "/", "~1")
}

func add(a, b int64) int64 { return min(a+b, unbounded) }

func mul(a, b int64) int64 {
	if a == 0 || b == 0 {
		return 0
	}
	if a >= unbounded/b {
		return unbounded
	}
	return a * b
}
