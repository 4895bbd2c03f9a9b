// Package grammar constrains generation to a language: JSON that follows a
// JSON Schema, any JSON object, or a tool call wrapped in a template's
// markup. It compiles the schema into a small byte-level pushdown
// automaton ([Grammar]), walks that automaton over a trie of the model's
// token bytes ([Vocab]) to find which tokens keep the output a valid
// prefix ([Masker]), and tracks one generation's state ([Matcher]).
//
// # The automaton
//
// A compiled grammar is a graph of nodes (object, array, string, number,
// integer, a set of literal values, a union of alternatives, a sequence,
// and a switch on a literal). A way through it is a stack of frames, one
// per open value; each byte moves the top frame, pushes a child or pops
// a finished one. Most of the machine is deterministic; a union is not:
// when several of its alternatives can start with the byte written (an
// anyOf of a date and a short string, or of two objects), each goes on
// as a stack of its own, and the state of a generation is the set of
// stacks still alive (at most maxStacks; two that come to the same
// place are one). A token is allowed when some stack takes all its
// bytes; the set is copied cheaply while the token trie is walked, and
// is one stack whenever the bytes have told the alternatives apart.
//
// The language is a subset of the schema's: every output the matcher
// accepts validates, but not every valid document can be produced. The
// choices that make it so are deliberate and keep a model from wandering:
//   - object properties come in the order the schema declares them; a
//     required one cannot be skipped, an optional one can. Beside
//     "properties", an "additionalProperties" schema (or true: any
//     value) lets further keys come after the declared ones, once the
//     required ones are written, as llama.cpp orders them; such a key is
//     never a declared name and has no escapes (so that it cannot spell
//     one another way). Without additionalProperties only declared keys
//     are produced there (as llama.cpp does). A schema with no
//     "properties" gets free-form keys, valued by "additionalProperties"
//     when that is a schema;
//   - whitespace between tokens is one space, or a newline and at most
//     [MaxIndent] spaces or tabs, as llama.cpp bounds it (so a model
//     cannot loop on blank space), and none before ':';
//   - numbers have at most 15 integer digits, 15 fraction digits and a
//     2-digit exponent; \u escapes never name a surrogate;
//   - nesting is at most [MaxDepth] values deep.
//
// Supported keywords: type (one or a list), properties, required,
// additionalProperties, enum, const, items, minItems, maxItems,
// minLength, maxLength, minimum, maximum, exclusiveMinimum and
// exclusiveMaximum (integers exactly; other numbers then come without an
// exponent), pattern (bounds.go, pattern.go: a DFA over code points built
// with regexp/syntax, unanchored unless ^...$), format (date, time,
// date-time, uuid, ipv4, email as patterns; int32, int64, float, double
// on numbers), propertyNames as a string schema (lengths, pattern,
// format) that free and additional keys follow (written without escapes;
// declared names that do not follow it are left out), $defs /
// definitions with local $ref (recursion allowed),
// anyOf (any alternatives), and oneOf whose alternatives cannot match
// the same document: they differ in type (the bytes they start with), in
// their literal values, or in a required property whose values are
// different literals (a discriminator, as zod and pydantic write tagged
// unions); a oneOf that could match twice is refused, since exactly one
// alternative must match. Annotations (title, description, default,
// examples, $schema, $id, $comment, deprecated, readOnly, writeOnly,
// OpenAPI's discriminator) are ignored. Any other keyword, and any
// combination the automaton cannot honour (a pattern beside a length, a
// oneOf as above), is refused with an error that names it and where it
// is, so a server can answer 400 instead of silently producing JSON the
// client did not ask for.
//
// Compiling is bounded: at most maxEnum enum values and maxLiteralBytes
// of them, maxNodes nodes, maxSchemaDepth nested subschemas, and
// maxDFAStates per pattern. A schema with no finite document (a required
// property that recurses through $ref) is refused, and the parts of a
// schema that cannot end are left out of every choice (prune), so that
// generation never enters a value it cannot finish. Enum and const
// values are matched through a byte trie (literals.go), one search per
// byte whatever their number.
//
// # The mask
//
// For each decoding step the [Masker] answers "which of the vocabulary's
// tokens may come next" as a bit set: a depth-first walk of the token
// trie that steps a copy of the state by each byte and prunes the subtree
// at the first byte the automaton refuses. Bytes inside a free string
// leave the state unchanged and cost no copy. Masks are cached by state,
// so the many steps spent inside one string reuse one walk. The special
// tokens (<|im_end|> and the like) are never allowed, except the end
// tokens once the value is complete, and then only those.
//
// Test dependency: github.com/santhosh-tekuri/jsonschema/v6 v6.0.3, an
// independent validator (drafts 4 to 2020-12, pure Go, no dependencies
// beyond golang.org/x/text) that the tests check every sampled answer
// with, so that the automaton is not judged by its own reading of the
// schema. v6.0.3 is the newest release.
package grammar
