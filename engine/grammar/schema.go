package grammar

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// FromSchema compiles a JSON Schema (the subset the package doc lists)
// into a grammar of the JSON documents it accepts. An unsupported keyword
// is an error naming it and where it is.
func FromSchema(schema []byte) (*Grammar, error) {
	doc, err := parseOrdered(schema)
	if err != nil {
		return nil, fmt.Errorf("JSON schema: %w", err)
	}
	b := newBuilder()
	c := &compiler{b: b, root: doc, refs: map[string]int{}}
	root, err := c.compile(doc, "#")
	if err != nil {
		return nil, fmt.Errorf("JSON schema: %w", err)
	}
	g, err := b.finish(root, "a JSON schema")
	if err != nil {
		return nil, fmt.Errorf("JSON schema: %w", err)
	}
	return g, nil
}

// value is a decoded JSON value that keeps the order of object keys.
type value struct {
	kind byte // 'o' object, 'a' array, 's' string, 'n' number, 'b' bool, 'z' null
	keys []string
	vals []*value // object values (by keys) or array items
	str  string   // string, or the number's text
	b    bool
}

func (v *value) get(key string) *value {
	if v == nil || v.kind != 'o' {
		return nil
	}
	for i, k := range v.keys {
		if k == key {
			return v.vals[i]
		}
	}
	return nil
}

// parseOrdered decodes one JSON value.
func parseOrdered(data []byte) (*value, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := decodeOrdered(dec)
	if err != nil {
		return nil, fmt.Errorf("invalid JSON: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("invalid JSON: data after the value")
	}
	return v, nil
}

func decodeOrdered(dec *json.Decoder) (*value, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch x := tok.(type) {
	case json.Delim:
		switch x {
		case '{':
			v := &value{kind: 'o'}
			for dec.More() {
				k, err := dec.Token()
				if err != nil {
					return nil, err
				}
				key, _ := k.(string) // the decoder only gives strings as keys
				item, err := decodeOrdered(dec)
				if err != nil {
					return nil, err
				}
				v.keys = append(v.keys, key)
				v.vals = append(v.vals, item)
			}
			_, err := dec.Token()
			return v, err
		case '[':
			v := &value{kind: 'a'}
			for dec.More() {
				item, err := decodeOrdered(dec)
				if err != nil {
					return nil, err
				}
				v.vals = append(v.vals, item)
			}
			_, err := dec.Token()
			return v, err
		}
		return nil, fmt.Errorf("unexpected %v", x)
	case string:
		return &value{kind: 's', str: x}, nil
	case json.Number:
		return &value{kind: 'n', str: x.String()}, nil
	case bool:
		return &value{kind: 'b', b: x}, nil
	case nil:
		return &value{kind: 'z'}, nil
	}
	return nil, fmt.Errorf("unexpected %v", tok)
}

// encode writes v as compact JSON, keys in order.
func (v *value) encode(buf *bytes.Buffer) {
	switch v.kind {
	case 'o':
		buf.WriteByte('{')
		for i, k := range v.keys {
			if i > 0 {
				buf.WriteByte(',')
			}
			buf.Write(jsonString(k))
			buf.WriteByte(':')
			v.vals[i].encode(buf)
		}
		buf.WriteByte('}')
	case 'a':
		buf.WriteByte('[')
		for i, x := range v.vals {
			if i > 0 {
				buf.WriteByte(',')
			}
			x.encode(buf)
		}
		buf.WriteByte(']')
	case 's':
		buf.Write(jsonString(v.str))
	case 'n':
		buf.WriteString(v.str)
	case 'b':
		buf.WriteString(strconv.FormatBool(v.b))
	case 'z':
		buf.WriteString("null")
	}
}

// compiler turns schema values into nodes.
type compiler struct {
	b    *builder
	root *value
	refs map[string]int // resolved $ref targets (by JSON pointer) to nodes
	// depth is the nesting of compile calls; litBytes the literal text
	// so far (see the limits above).
	depth, litBytes int
}

// ignored are the annotation keywords: they do not change what validates.
var ignored = map[string]bool{
	"$schema": true, "$id": true, "$comment": true, "title": true, "description": true,
	"default": true, "examples": true, "deprecated": true, "readOnly": true, "writeOnly": true,
	"$defs": true, "definitions": true,
	// OpenAPI's discriminator names the property that tells oneOf's
	// alternatives apart; it changes nothing that validates.
	"discriminator": true,
}

// supported are the keywords compile reads.
var supported = map[string]bool{
	"type": true, "properties": true, "required": true, "additionalProperties": true,
	"enum": true, "const": true, "items": true, "minItems": true, "maxItems": true,
	"minLength": true, "maxLength": true, "$ref": true, "anyOf": true, "oneOf": true,
	"minimum": true, "maximum": true, "exclusiveMinimum": true, "exclusiveMaximum": true,
	"pattern": true, "format": true, "propertyNames": true,
}

// Limits that keep compiling a hostile schema bounded in time and memory.
const (
	// maxEnum is the most values an enum may list.
	maxEnum = 10000
	// maxLiteralBytes bounds the JSON text of all enum and const values.
	maxLiteralBytes = 1 << 20
	// maxNodes bounds the compiled grammar's nodes.
	maxNodes = 100000
	// maxSchemaDepth bounds the nesting of subschemas (and $ref chains)
	// compiled.
	maxSchemaDepth = 64
)

var typeNames = []string{"object", "array", "string", "number", "integer", "boolean", "null"}

// compile returns the node of the schema s found at path.
func (c *compiler) compile(s *value, path string) (int, error) {
	c.depth++
	defer func() { c.depth-- }()
	if c.depth > maxSchemaDepth {
		return 0, fmt.Errorf("%s: the schema nests more than %d subschemas deep (or a $ref chain is that long): too deep to compile", path, maxSchemaDepth)
	}
	if len(c.b.nodes) > maxNodes {
		return 0, fmt.Errorf("%s: the schema is too large to compile (more than %d parts)", path, maxNodes)
	}
	switch s.kind {
	case 'b':
		if s.b {
			return c.b.any(), nil
		}
		return 0, fmt.Errorf("%s: the schema false accepts nothing", path)
	case 'o':
	default:
		return 0, fmt.Errorf("%s: a schema must be an object or a boolean", path)
	}
	for _, k := range s.keys {
		if !supported[k] && !ignored[k] {
			return 0, fmt.Errorf("%s: the keyword %q is not supported (supported: type, properties, required, additionalProperties, enum, const, items, minItems, maxItems, minLength, maxLength, minimum, maximum, exclusiveMinimum, exclusiveMaximum, pattern, format, propertyNames, $defs, $ref, anyOf, oneOf)", path, k)
		}
	}
	if ref := s.get("$ref"); ref != nil {
		for _, k := range s.keys {
			if supported[k] && k != "$ref" {
				return 0, fmt.Errorf("%s: the keyword %q beside $ref is not supported", path, k)
			}
		}
		return c.ref(ref, path)
	}
	// anyOf is any alternative that fits; oneOf the same once finish has
	// made sure no document fits two of them.
	for _, kw := range []string{"anyOf", "oneOf"} {
		any := s.get(kw)
		if any == nil {
			continue
		}
		for _, k := range s.keys {
			if supported[k] && k != kw {
				return 0, fmt.Errorf("%s: the keyword %q beside %s is not supported", path, k, kw)
			}
		}
		if any.kind != 'a' || len(any.vals) == 0 {
			return 0, fmt.Errorf("%s/%s: must be a non-empty list of schemas", path, kw)
		}
		u := node{kind: kUnion, oneOf: kw == "oneOf"}
		for i, alt := range any.vals {
			n, err := c.compile(alt, fmt.Sprintf("%s/%s/%d", path, kw, i))
			if err != nil {
				return 0, err
			}
			u.alts = append(u.alts, n)
		}
		if len(u.alts) == 1 {
			return u.alts[0], nil
		}
		return c.b.add(u), nil
	}

	types, err := schemaTypes(s, path)
	if err != nil {
		return 0, err
	}
	var enum []*value
	if e := s.get("enum"); e != nil {
		if e.kind != 'a' || len(e.vals) == 0 {
			return 0, fmt.Errorf("%s/enum: must be a non-empty list", path)
		}
		if len(e.vals) > maxEnum {
			return 0, fmt.Errorf("%s/enum: %d values are more than the %d NPU Chat compiles; narrow the choice, or ask for a string and check it yourself", path, len(e.vals), maxEnum)
		}
		enum = e.vals
	}
	if cv := s.get("const"); cv != nil {
		enum = []*value{cv}
	}
	if enum != nil {
		return c.literals(s, enum, types, path)
	}

	var alts []int
	for _, t := range types {
		n, err := c.typed(s, t, path)
		if err != nil {
			return 0, err
		}
		alts = append(alts, n)
	}
	if len(alts) == 1 {
		return alts[0], nil
	}
	return c.b.add(node{kind: kUnion, alts: alts}), nil
}

// schemaTypes is the schema's "type", or the type its keywords imply
// ("properties" an object, "items" an array, "minLength" a string), or
// every type. "integer" is dropped when "number" is there too.
func schemaTypes(s *value, path string) ([]string, error) {
	t := s.get("type")
	var types []string
	switch {
	case t == nil:
		switch {
		case s.get("enum") != nil || s.get("const") != nil:
			return nil, nil // the values say
		case s.get("properties") != nil || s.get("required") != nil || s.get("additionalProperties") != nil || s.get("propertyNames") != nil:
			types = []string{"object"}
		case s.get("items") != nil || s.get("minItems") != nil || s.get("maxItems") != nil:
			types = []string{"array"}
		case s.get("minLength") != nil || s.get("maxLength") != nil || s.get("pattern") != nil || s.get("format") != nil:
			types = []string{"string"}
		case s.get("minimum") != nil || s.get("maximum") != nil || s.get("exclusiveMinimum") != nil || s.get("exclusiveMaximum") != nil:
			types = []string{"number"}
		default:
			types = []string{"object", "array", "string", "number", "boolean", "null"}
		}
	case t.kind == 's':
		types = []string{t.str}
	case t.kind == 'a' && len(t.vals) > 0:
		for _, x := range t.vals {
			if x.kind != 's' {
				return nil, fmt.Errorf("%s/type: must be a type name or a list of them", path)
			}
			if slices.Contains(types, x.str) {
				return nil, fmt.Errorf("%s/type: %q is listed twice", path, x.str)
			}
			types = append(types, x.str)
		}
	default:
		return nil, fmt.Errorf("%s/type: must be a type name or a list of them", path)
	}
	for _, x := range types {
		if !slices.Contains(typeNames, x) {
			return nil, fmt.Errorf("%s/type: unknown type %q (one of %s)", path, x, strings.Join(typeNames, ", "))
		}
	}
	if slices.Contains(types, "number") {
		types = slices.DeleteFunc(types, func(x string) bool { return x == "integer" })
	}
	return types, nil
}

// typed compiles s as a value of type t.
func (c *compiler) typed(s *value, t, path string) (int, error) {
	switch t {
	case "object":
		return c.object(s, path)
	case "array":
		return c.array(s, path)
	case "string":
		lo, hi, err := countRange(s, "minLength", "maxLength", path)
		if err != nil {
			return 0, err
		}
		re, err := stringPattern(s, path)
		if err != nil {
			return 0, err
		}
		if re != nil && (lo > 0 || hi >= 0) {
			return 0, fmt.Errorf("%s: minLength or maxLength beside pattern or format is not supported; put the length in the pattern ({m,n})", path)
		}
		return c.b.add(node{kind: kString, minLen: lo, maxLen: hi, re: re}), nil
	case "number", "integer":
		n := node{kind: kNumber}
		if t == "integer" {
			n.kind = kInteger
		}
		if err := readBounds(s, &n, path); err != nil {
			return 0, err
		}
		if err := numberFormat(s, &n, path); err != nil {
			return 0, err
		}
		return c.b.add(n), nil
	case "boolean":
		return c.b.add(node{kind: kLiterals, lits: [][]byte{[]byte("true"), []byte("false")}}), nil
	default: // "null"
		return c.b.add(node{kind: kLiterals, lits: [][]byte{[]byte("null")}}), nil
	}
}

// numberFormat honours OpenAPI's number formats: int32 bounds an
// integer to 32 bits; int64, float and double hold every number NPU Chat
// writes. Any other format on a number is refused.
func numberFormat(s *value, nd *node, path string) error {
	f := s.get("format")
	if f == nil {
		return nil
	}
	switch {
	case f.kind == 's' && f.str == "int32" && nd.kind == kInteger:
		if !nd.bounded {
			nd.bounded, nd.lo, nd.hi = true, -maxMagnitude, maxMagnitude
		}
		nd.lo, nd.hi = max(nd.lo, math.MinInt32), min(nd.hi, math.MaxInt32)
		if nd.lo > nd.hi {
			return fmt.Errorf("%s: no 32-bit integer is within minimum/maximum: nothing can match", path)
		}
		return nil
	case f.kind == 's' && (f.str == "int64" || f.str == "float" || f.str == "double"):
		return nil
	}
	return fmt.Errorf("%s/format: %s is not a format NPU Chat can honour on a number (int32, int64, float, double)", path, f.encodeString())
}

// encodeString is v as compact JSON, for errors.
func (v *value) encodeString() string {
	var b bytes.Buffer
	v.encode(&b)
	return b.String()
}

// stringPattern compiles a string schema's pattern or format (nil when it
// has neither).
func stringPattern(s *value, path string) (*dfa, error) {
	p, f := s.get("pattern"), s.get("format")
	switch {
	case p != nil && f != nil:
		return nil, fmt.Errorf("%s: pattern and format together are not supported; use one", path)
	case f != nil:
		if f.kind != 's' {
			return nil, fmt.Errorf("%s/format: must be a string", path)
		}
		pat, ok := formats[f.str]
		if !ok {
			return nil, fmt.Errorf("%s/format: %q is not a format NPU Chat can honour (%s); use a pattern", path, f.str, formatNames())
		}
		re, err := compilePattern(pat)
		if err != nil {
			return nil, fmt.Errorf("%s/format: %q %v", path, f.str, err) // a bug: the formats are tested
		}
		return re, nil
	case p != nil:
		if p.kind != 's' {
			return nil, fmt.Errorf("%s/pattern: must be a string", path)
		}
		re, err := compilePattern(p.str)
		if err != nil {
			return nil, fmt.Errorf("%s/pattern: %q %v", path, p.str, err)
		}
		return re, nil
	}
	return nil, nil
}

// countRange reads a min/max pair of non-negative integers (max -1 when
// absent).
func countRange(s *value, minKey, maxKey, path string) (lo, hi int, err error) {
	hi = -1
	read := func(key string) (int, bool, error) {
		v := s.get(key)
		if v == nil {
			return 0, false, nil
		}
		f, err := strconv.ParseFloat(v.str, 64)
		if v.kind != 'n' || err != nil || f < 0 || f != math.Trunc(f) || f > 1<<30 {
			return 0, false, fmt.Errorf("%s/%s: must be a non-negative integer", path, key)
		}
		return int(f), true, nil
	}
	var ok bool
	if lo, _, err = read(minKey); err != nil {
		return 0, 0, err
	}
	var h int
	if h, ok, err = read(maxKey); err != nil {
		return 0, 0, err
	}
	if ok {
		hi = h
		if hi < lo {
			return 0, 0, fmt.Errorf("%s: %s %d is more than %s %d: nothing can match", path, minKey, lo, maxKey, hi)
		}
	}
	return lo, hi, nil
}

func (c *compiler) object(s *value, path string) (int, error) {
	n := node{kind: kObject, extra: -1}
	// additionalProperties: false none, a schema what their values
	// follow, true any value. Beside "properties" they come after the
	// declared ones, as llama.cpp writes them; absent, only the declared
	// ones are written there (as llama.cpp does), and without
	// "properties" the keys are free.
	var extra *value
	allowExtra, given := true, false
	if ap := s.get("additionalProperties"); ap != nil {
		switch {
		case ap.kind == 'b':
			allowExtra, given = ap.b, ap.b
		case ap.kind == 'o':
			extra, given = ap, true
		default:
			return 0, fmt.Errorf("%s/additionalProperties: must be a boolean or a schema", path)
		}
	}
	extraNode := -1
	extraValue := func() (int, error) {
		if extraNode >= 0 {
			return extraNode, nil
		}
		extraNode = c.b.any()
		if extra != nil {
			var err error
			if extraNode, err = c.compile(extra, path+"/additionalProperties"); err != nil {
				return 0, err
			}
		}
		return extraNode, nil
	}
	required := map[string]bool{}
	var reqOrder []string
	if r := s.get("required"); r != nil {
		if r.kind != 'a' {
			return 0, fmt.Errorf("%s/required: must be a list of property names", path)
		}
		for _, x := range r.vals {
			if x.kind != 's' {
				return 0, fmt.Errorf("%s/required: must be a list of property names", path)
			}
			if !required[x.str] {
				reqOrder = append(reqOrder, x.str)
			}
			required[x.str] = true
		}
	}
	props := s.get("properties")
	if props != nil && props.kind != 'o' {
		return 0, fmt.Errorf("%s/properties: must be an object of schemas", path)
	}
	id := c.b.add(n) // reserved now, so that recursion through $ref finds it
	keys, err := c.propertyNames(s, path)
	if err != nil {
		return 0, err
	}
	named := func(name string) bool { return keys < 0 || c.b.nodes[keys].takes(name) }
	for _, name := range reqOrder {
		if !named(name) {
			return 0, fmt.Errorf("%s: %q is required but does not follow propertyNames: nothing can match", path, name)
		}
	}
	declared := map[string]bool{}
	if props != nil {
		for i, name := range props.keys {
			if !named(name) {
				continue // can never be written
			}
			pn, err := c.compile(props.vals[i], path+"/properties/"+escapePointer(name))
			if err != nil {
				return 0, err
			}
			declared[name] = true
			n.props = append(n.props, prop{key: jsonString(name)[1:], node: pn, required: required[name]})
		}
	}
	// Required names that "properties" does not declare take
	// additionalProperties' schema.
	for _, name := range reqOrder {
		if declared[name] {
			continue
		}
		if !allowExtra {
			return 0, fmt.Errorf("%s: %q is required but not in properties, and additionalProperties is false: nothing can match", path, name)
		}
		pn, err := extraValue()
		if err != nil {
			return 0, err
		}
		n.props = append(n.props, prop{key: jsonString(name)[1:], node: pn, required: true})
	}
	switch {
	case len(n.props) == 0 && allowExtra:
		var err error
		if n.extra, err = extraValue(); err != nil {
			return 0, err
		}
		n.freeKeys, n.extraKey = true, c.b.anyString
		if keys >= 0 {
			n.extraKey = keys
		}
	case len(n.props) > 0 && given:
		var err error
		if n.extra, err = extraValue(); err != nil {
			return 0, err
		}
		n.extraKey = keys
		if keys < 0 {
			n.extraKey = c.b.add(node{kind: kString, maxLen: -1, raw: true})
		}
	}
	c.b.nodes[id] = n
	return id, nil
}

// propertyNames compiles an object schema's propertyNames into the
// string node its free or additional keys follow (-1 when it has none).
// Only a string schema (lengths, pattern, format) is honoured; its keys
// are written without escapes.
func (c *compiler) propertyNames(s *value, path string) (int, error) {
	pn := s.get("propertyNames")
	if pn == nil {
		return -1, nil
	}
	if pn.kind == 'b' && pn.b {
		return -1, nil
	}
	kn, err := c.compile(pn, path+"/propertyNames")
	if err != nil {
		return 0, err
	}
	if c.b.nodes[kn].kind != kString {
		return 0, fmt.Errorf("%s/propertyNames: only a string schema (minLength, maxLength, pattern, format) is supported", path)
	}
	key := c.b.nodes[kn]
	key.raw = true
	return c.b.add(key), nil
}

// takes reports whether the string node n accepts the text s (its
// length in code points and its pattern).
func (n *node) takes(s string) bool {
	l := utf8.RuneCountInString(s)
	if l < n.minLen || n.maxLen >= 0 && l > n.maxLen {
		return false
	}
	if n.re == nil {
		return true
	}
	st := int32(0)
	for _, r := range s {
		if st = n.re.next(st, r); st < 0 {
			return false
		}
	}
	return n.re.states[st].accept
}

func (c *compiler) array(s *value, path string) (int, error) {
	lo, hi, err := countRange(s, "minItems", "maxItems", path)
	if err != nil {
		return 0, err
	}
	id := c.b.add(node{kind: kArray})
	items := c.b.any()
	if it := s.get("items"); it != nil {
		if it.kind == 'a' {
			return 0, fmt.Errorf("%s/items: a list of schemas (tuple items) is not supported; use one schema", path)
		}
		if it.kind == 'b' && !it.b {
			if lo > 0 {
				return 0, fmt.Errorf("%s: items is false but minItems is %d: nothing can match", path, lo)
			}
			hi = 0
		} else if items, err = c.compile(it, path+"/items"); err != nil {
			return 0, err
		}
	}
	c.b.nodes[id] = node{kind: kArray, items: items, minItems: lo, maxItems: hi}
	return id, nil
}

// literals compiles enum or const: the values (of the schema's types, and
// for strings within its length range) as literal JSON text.
func (c *compiler) literals(s *value, vals []*value, types []string, path string) (int, error) {
	lo, hi, err := countRange(s, "minLength", "maxLength", path)
	if err != nil {
		return 0, err
	}
	n := node{kind: kLiterals}
	bounds := node{kind: kNumber}
	if err := readBounds(s, &bounds, path); err != nil {
		return 0, err
	}
	if s.get("pattern") != nil || s.get("format") != nil {
		return 0, fmt.Errorf("%s: pattern or format beside enum/const is not supported; list only the values that match", path)
	}
	seen := map[string]bool{}
	for _, v := range vals {
		if types != nil && !valueHasType(v, types) {
			continue
		}
		if v.kind == 'n' && !bounds.inBounds(v.str) {
			continue
		}
		if v.kind == 's' {
			l := utf8.RuneCountInString(v.str)
			if l < lo || hi >= 0 && l > hi {
				continue
			}
		}
		var buf bytes.Buffer
		v.encode(&buf)
		if !seen[buf.String()] {
			seen[buf.String()] = true
			n.lits = append(n.lits, buf.Bytes())
			c.litBytes += buf.Len()
			if c.litBytes > maxLiteralBytes {
				return 0, fmt.Errorf("%s/enum: the values are more than %d bytes of JSON in all: too large to compile", path, maxLiteralBytes)
			}
		}
	}
	if len(n.lits) == 0 {
		return 0, fmt.Errorf("%s: no value of enum/const fits the schema's type: nothing can match", path)
	}
	return c.b.add(n), nil
}

func valueHasType(v *value, types []string) bool {
	for _, t := range types {
		switch t {
		case "object":
			if v.kind == 'o' {
				return true
			}
		case "array":
			if v.kind == 'a' {
				return true
			}
		case "string":
			if v.kind == 's' {
				return true
			}
		case "number":
			if v.kind == 'n' {
				return true
			}
		case "integer":
			if v.kind == 'n' {
				if f, err := strconv.ParseFloat(v.str, 64); err == nil && f == math.Trunc(f) {
					return true
				}
			}
		case "boolean":
			if v.kind == 'b' {
				return true
			}
		case "null":
			if v.kind == 'z' {
				return true
			}
		}
	}
	return false
}

// ref compiles a local $ref ("#", "#/$defs/x", any JSON pointer into the
// document).
func (c *compiler) ref(ref *value, path string) (int, error) {
	if ref.kind != 's' {
		return 0, fmt.Errorf("%s/$ref: must be a string", path)
	}
	if id, ok := c.refs[ref.str]; ok {
		return id, nil
	}
	if !strings.HasPrefix(ref.str, "#") {
		return 0, fmt.Errorf("%s/$ref: %q is not a reference inside this schema (only \"#...\" references are supported)", path, ref.str)
	}
	target := c.root
	ptr := strings.TrimPrefix(ref.str, "#")
	if ptr != "" {
		if !strings.HasPrefix(ptr, "/") {
			return 0, fmt.Errorf("%s/$ref: %q is not a JSON pointer (anchors are not supported)", path, ref.str)
		}
		for _, part := range strings.Split(ptr[1:], "/") {
			part = strings.ReplaceAll(strings.ReplaceAll(part, "~1", "/"), "~0", "~")
			switch target.kind {
			case 'o':
				target = target.get(part)
			case 'a':
				i, err := strconv.Atoi(part)
				if err != nil || i < 0 || i >= len(target.vals) {
					target = nil
				} else {
					target = target.vals[i]
				}
			default:
				target = nil
			}
			if target == nil {
				return 0, fmt.Errorf("%s/$ref: %q points at nothing in the schema", path, ref.str)
			}
		}
	}
	// A placeholder union of one, filled in when the target is compiled,
	// so that a recursive reference finds this id.
	id := c.b.add(node{kind: kUnion})
	c.refs[ref.str] = id
	n, err := c.compile(target, ref.str)
	if err != nil {
		return 0, err
	}
	c.b.nodes[id] = node{kind: kUnion, alts: []int{n}}
	return id, nil
}

func escapePointer(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}
