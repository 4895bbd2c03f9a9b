package grammar

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
)

// MaxIndent is the most spaces or tabs after a newline in a run of
// whitespace between two tokens of JSON. A run is empty, one space, or a
// newline and at most MaxIndent spaces or tabs, as llama.cpp's JSON
// grammars write it (ws ::= | " " | "\n" [ \t]{0,20}): enough for
// pretty-printed JSON, too little for a model to loop on blank space.
const MaxIndent = 20

// MaxDepth is the deepest nesting of values (and sequence parts) the
// automaton allows.
const MaxDepth = 48

// Digit limits of numbers.
const (
	maxIntDigits  = 15
	maxFracDigits = 15
	maxExpDigits  = 2
)

// kind is what a node matches.
type kind uint8

const (
	kObject   kind = iota + 1 // {...}: declared properties in order, or free keys
	kArray                    // [...] with items and a count range
	kString                   // "..." with a length range (in code points)
	kNumber                   // any JSON number
	kInteger                  // a JSON number with no fraction or exponent
	kLiterals                 // one of a set of byte strings (enum, const, true/false/null)
	kUnion                    // alternatives (anyOf, oneOf, a list of types); several may fit at once
	kSeq                      // parts one after another
	kSwitch                   // one of a set of literals, each followed by its own node
)

// node is one compiled schema (or part of a sequence).
type node struct {
	kind kind

	// kObject
	props    []prop
	extra    int  // free keys' value node, or -1: none
	freeKeys bool // the object takes free-form keys (no declared properties)
	// extraKey: the string node of free keys, or with props and extra
	// of the keys of additional properties, written after the declared
	// ones (escape free, and never a declared name).
	extraKey int

	// kArray
	items              int
	minItems, maxItems int // maxItems < 0: no limit

	// kString
	minLen, maxLen int  // maxLen < 0: no limit
	re             *dfa // the pattern (or format) the string follows, nil: none
	// raw: no escapes (the keys of additional properties, so that none
	// spells a declared name another way).
	raw bool

	// kLiterals and kSwitch; lits end a value (no whitespace inside)
	lits [][]byte
	// kSwitch: the node that follows each literal
	then []int
	// noWS: the literal starts at once (no whitespace before it): parts
	// of a sequence, written exactly as a template writes them.
	noWS bool

	// kUnion and kSeq
	alts []int
	// oneOf (kUnion): exactly one alternative may match, so finish checks
	// that no two can match the same document.
	oneOf bool

	// kLiterals and kSwitch: the root of the literals' trie (set by
	// finish).
	trie int32

	// kInteger and kNumber: bounds (minimum, maximum, exclusive…), when
	// bounded is set. Integers use lo and hi (inclusive); numbers flo
	// and fhi with exLo and exHi saying whether they are exclusive, and
	// are written without an exponent.
	bounded      bool
	lo, hi       int64
	flo, fhi     float64
	hasLo, hasHi bool
	exLo, exHi   bool
}

// prop is a declared object property.
type prop struct {
	key      []byte // the JSON-encoded name after its opening quote, with the closing quote
	node     int
	required bool
}

// Grammar is a compiled language. It is immutable and safe for concurrent
// use.
type Grammar struct {
	nodes []node
	root  int
	// first[n] is the set of bytes a value of node n can start with (after
	// whitespace).
	first [][256]bool
	// leaves[n] of a union are its alternatives with nested unions
	// flattened, in order, each once.
	leaves [][]int
	// anyString is a string node without limits, for free-form keys.
	anyString int
	desc      string
	// lit and litEdges hold the literal tries of all kLiterals and
	// kSwitch nodes.
	lit      []litNode
	litEdges []litEdge
}

// String says what the grammar was made from, for logs.
func (g *Grammar) String() string { return g.desc }

// builder assembles nodes.
type builder struct {
	nodes     []node
	anyValue  int // -1 until made
	anyString int
}

func newBuilder() *builder {
	b := &builder{anyValue: -1}
	b.anyString = b.add(node{kind: kString, maxLen: -1})
	return b
}

func (b *builder) add(n node) int {
	b.nodes = append(b.nodes, n)
	return len(b.nodes) - 1
}

// any returns the node of every JSON value.
func (b *builder) any() int {
	if b.anyValue >= 0 {
		return b.anyValue
	}
	id := b.add(node{kind: kUnion})
	b.anyValue = id
	obj := b.add(node{kind: kObject, freeKeys: true, extra: id, extraKey: b.anyString})
	arr := b.add(node{kind: kArray, items: id, maxItems: -1})
	lits := b.add(node{kind: kLiterals, lits: [][]byte{[]byte("true"), []byte("false"), []byte("null")}})
	num := b.add(node{kind: kNumber})
	b.nodes[id].alts = []int{obj, arr, b.anyString, num, lits}
	return id
}

// finish drops what cannot end (prune), computes first-byte sets and
// checks unions.
func (b *builder) finish(root int, desc string) (*Grammar, error) {
	if err := b.prune(root); err != nil {
		return nil, err
	}
	g := &Grammar{nodes: b.nodes, root: root, anyString: b.anyString, desc: desc}
	g.first = make([][256]bool, len(g.nodes))
	done := make([]uint8, len(g.nodes)) // 0 new, 1 in progress, 2 done
	var visit func(n int) error
	visit = func(n int) error {
		switch done[n] {
		case 2:
			return nil
		case 1:
			return fmt.Errorf("a schema that refers to itself before any value is written (an anyOf or $ref loop) cannot be compiled")
		}
		done[n] = 1
		f := &g.first[n]
		nd := &g.nodes[n]
		switch nd.kind {
		case kObject:
			f['{'] = true
		case kArray:
			f['['] = true
		case kString:
			f['"'] = true
		case kNumber, kInteger:
			f['-'] = true
			for c := '0'; c <= '9'; c++ {
				f[c] = true
			}
		case kLiterals, kSwitch:
			nd.trie = g.buildTrie(nd.lits)
			g.litFirst(nd.trie, f)
		case kSeq:
			if err := visit(nd.alts[0]); err != nil {
				return err
			}
			*f = g.first[nd.alts[0]]
		case kUnion:
			for _, a := range nd.alts {
				if err := visit(a); err != nil {
					return err
				}
				for c := 0; c < 256; c++ {
					f[c] = f[c] || g.first[a][c]
				}
			}
		}
		done[n] = 2
		return nil
	}
	for n := range g.nodes {
		if err := visit(n); err != nil {
			return nil, err
		}
	}
	g.leaves = make([][]int, len(g.nodes))
	for n := range g.nodes {
		if g.nodes[n].kind == kUnion {
			g.leaves[n] = g.flatten(n, nil)
		}
	}
	for n := range g.nodes {
		if nd := &g.nodes[n]; nd.kind == kUnion && nd.oneOf {
			if err := g.checkOneOf(nd); err != nil {
				return nil, err
			}
		}
	}
	return g, nil
}

// flatten appends the non-union alternatives of union n to out, in
// order, each once (finish has refused union loops).
func (g *Grammar) flatten(n int, out []int) []int {
	for _, a := range g.nodes[n].alts {
		if g.nodes[a].kind == kUnion {
			out = g.flatten(a, out)
		} else if !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	return out
}

// checkOneOf makes sure that no document matches two alternatives of a
// oneOf, as oneOf requires: every pair must start with different bytes,
// be sets of different literal values, or be objects told apart by a
// required property whose values are different literals (a
// discriminator, as zod and pydantic write tagged unions). anyOf has no
// such need: there any alternative that fits will do.
func (g *Grammar) checkOneOf(nd *node) error {
	alts := make([][]int, len(nd.alts))
	for i, a := range nd.alts {
		alts[i] = []int{a}
		if g.nodes[a].kind == kUnion {
			alts[i] = g.leaves[a]
		}
	}
	for i := range alts {
		for j := i + 1; j < len(alts); j++ {
			for _, a := range alts[i] {
				for _, b := range alts[j] {
					if !g.disjoint(a, b) {
						return fmt.Errorf("oneOf alternatives %d and %d can match the same document, which oneOf forbids; NPU Chat honours such a oneOf only when its alternatives differ in type, in their literal values, or in a required property with different const values (a discriminator): use anyOf if either may match", i, j)
					}
				}
			}
		}
	}
	return nil
}

// disjoint reports whether no document matches both non-union nodes a
// and b (false when that cannot be shown).
func (g *Grammar) disjoint(a, b int) bool {
	if a == b {
		return false
	}
	overlap := false
	for c := 0; c < 256; c++ {
		overlap = overlap || g.first[a][c] && g.first[b][c]
	}
	if !overlap {
		return true
	}
	na, nb := &g.nodes[a], &g.nodes[b]
	switch {
	case na.kind == kLiterals && nb.kind == kLiterals:
		return !slices.ContainsFunc(na.lits, func(l []byte) bool {
			return slices.ContainsFunc(nb.lits, func(m []byte) bool { return bytes.Equal(l, m) })
		})
	case na.kind == kObject && nb.kind == kObject:
		for _, p := range na.props {
			if !p.required {
				continue
			}
			for _, q := range nb.props {
				if q.required && bytes.Equal(p.key, q.key) {
					pa, qa := g.single(p.node), g.single(q.node)
					if g.nodes[pa].kind == kLiterals && g.nodes[qa].kind == kLiterals && g.disjoint(pa, qa) {
						return true
					}
				}
			}
		}
	}
	return false
}

// single looks through unions of one alternative ($ref placeholders).
func (g *Grammar) single(n int) int {
	for g.nodes[n].kind == kUnion && len(g.nodes[n].alts) == 1 {
		n = g.nodes[n].alts[0]
	}
	return n
}

// prune finds the nodes that have a finite value (productive) and takes
// the others out of every choice, so that a generation can never enter a
// value it cannot finish (an optional property, an alternative or an
// array item that recurses without end through $ref). A root with no
// finite value is an error: such a schema would run to the token limit.
func (b *builder) prune(root int) error {
	ok := make([]bool, len(b.nodes))
	for changed := true; changed; {
		changed = false
		for i := range b.nodes {
			if ok[i] {
				continue
			}
			nd := &b.nodes[i]
			v := false
			switch nd.kind {
			case kObject:
				v = true
				for _, p := range nd.props {
					if p.required && !ok[p.node] {
						v = false
					}
				}
			case kArray:
				v = nd.minItems == 0 || ok[nd.items]
			case kUnion:
				v = slices.ContainsFunc(nd.alts, func(a int) bool { return ok[a] })
			case kSeq:
				v = !slices.ContainsFunc(nd.alts, func(a int) bool { return !ok[a] })
			case kSwitch:
				v = slices.ContainsFunc(nd.then, func(a int) bool { return ok[a] })
			default: // strings, numbers, literals
				v = true
			}
			if v {
				ok[i], changed = true, true
			}
		}
	}
	if !ok[root] {
		return fmt.Errorf("the schema has no finite document: a required property, minItems or $ref recurses without end (make the recursive part optional)")
	}
	for i := range b.nodes {
		nd := &b.nodes[i]
		switch nd.kind {
		case kObject:
			nd.props = slices.DeleteFunc(nd.props, func(p prop) bool { return !ok[p.node] })
			if nd.freeKeys && !ok[nd.extra] {
				nd.freeKeys = false // only {} is finite
			}
			if !nd.freeKeys && nd.extra >= 0 && !ok[nd.extra] {
				nd.extra = -1 // no additional property can end
			}
		case kArray:
			if !ok[nd.items] {
				nd.maxItems = 0
			}
		case kUnion:
			nd.alts = slices.DeleteFunc(nd.alts, func(a int) bool { return !ok[a] })
		case kSwitch:
			var lits [][]byte
			var then []int
			for j, t := range nd.then {
				if ok[t] {
					lits, then = append(lits, nd.lits[j]), append(then, t)
				}
			}
			nd.lits, nd.then = lits, then
		}
	}
	return nil
}

// JSONObject returns the grammar of any JSON object (OpenAI's
// response_format json_object, Ollama's format "json").
func JSONObject() *Grammar {
	b := newBuilder()
	root := b.add(node{kind: kObject, freeKeys: true, extra: b.any(), extraKey: b.anyString})
	g, err := b.finish(root, "any JSON object")
	if err != nil {
		panic(err) // fixed nodes: checked by the tests
	}
	return g
}

// Tool is a function a tool call may name, with the JSON Schema of its
// arguments (nil: any object).
type Tool struct {
	Name       string
	Parameters json.RawMessage
}

// ToolCallFormat is how a template writes one call: Prefix, then
// {"name": NAME, "arguments": ARGS} (with NameKey and ArgsKey as given),
// then Suffix.
type ToolCallFormat struct {
	Prefix, Suffix   string
	NameKey, ArgsKey string // default "name" and "arguments"
}

// ToolCall returns the grammar of exactly one call of one of tools in
// format: the JSON object is written as Qwen3's template writes it,
// {"name": "f", "arguments": {...}}, and the arguments follow the named
// tool's parameter schema.
func ToolCall(tools []Tool, format ToolCallFormat) (*Grammar, error) {
	if len(tools) == 0 {
		return nil, fmt.Errorf("tool call grammar: no tools")
	}
	nameKey, argsKey := format.NameKey, format.ArgsKey
	if nameKey == "" {
		nameKey = "name"
	}
	if argsKey == "" {
		argsKey = "arguments"
	}
	b := newBuilder()
	c := &compiler{b: b, refs: map[string]int{}}
	lit := func(s string) int {
		return b.add(node{kind: kLiterals, lits: [][]byte{[]byte(s)}, noWS: true})
	}
	sw := node{kind: kSwitch, noWS: true}
	seen := map[string]bool{}
	for _, t := range tools {
		if seen[t.Name] {
			return nil, fmt.Errorf("tool call grammar: two tools are named %q", t.Name)
		}
		seen[t.Name] = true
		var args int
		if len(bytes.TrimSpace(t.Parameters)) == 0 || string(bytes.TrimSpace(t.Parameters)) == "null" {
			args = b.add(node{kind: kObject, freeKeys: true, extra: b.any(), extraKey: b.anyString})
		} else {
			doc, err := parseOrdered(t.Parameters)
			if err != nil {
				return nil, fmt.Errorf("tool %q parameters: %w", t.Name, err)
			}
			c.root = doc
			c.refs = map[string]int{}
			if args, err = c.compile(doc, "#"); err != nil {
				return nil, fmt.Errorf("tool %q parameters: %w", t.Name, err)
			}
		}
		name := append(jsonString(t.Name), ", "...)
		name = append(name, jsonString(argsKey)...)
		name = append(name, ": "...)
		sw.lits = append(sw.lits, name)
		sw.then = append(sw.then, b.add(node{kind: kSeq, alts: []int{args, lit("}" + format.Suffix)}}))
	}
	head := "{" + string(jsonString(nameKey)) + ": "
	root := b.add(node{kind: kSeq, noWS: true, alts: []int{lit(format.Prefix + head), b.add(sw)}})
	return b.finish(root, "a tool call")
}

// jsonString encodes s as JSON without HTML escaping (a model writes "<",
// not "\u003c").
func jsonString(s string) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	return bytes.TrimRight(buf.Bytes(), "\n")
}
