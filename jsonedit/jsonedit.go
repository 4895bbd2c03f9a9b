// Package jsonedit edits JSON objects in files that people and other
// programs also write (NPU Chat's settings.json, FastFlowLM's
// model_list.json, a model's config.json and tokenizer_config.json): it
// is the one JSON editor of the project. An edited object is written
// back with only what changed changed: every untouched member keeps its
// text exactly (spacing, number spelling, escapes, key order), a
// changed value is indented like its neighbours, and a new key goes at
// the end. Strings are written without HTML escaping (tokenizer files
// are full of "<|im_end|>").
//
// Its users own the files: config (the settings file, through
// UpdateSettings) and models/flm (FastFlowLM's files, with a .bak of
// the original). jsonedit reads and writes bytes only.
package jsonedit

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// Object is a JSON object that keeps its keys in their original order
// and its values as raw JSON, so that editing one key leaves every other
// key, value, number and string escape exactly as it was.
//
// An object parsed from text also remembers that text, so that Format
// writes untouched members exactly as they were (whitespace included)
// and only the members that changed, were added or removed differ.
type Object struct {
	keys []string
	vals map[string]json.RawMessage

	// The original text, when parsed: src is the object from '{' to
	// '}', lead and trail what surrounded it; spans the members' places
	// in src; indent the indentation of the line it starts on, unit one
	// level of indentation.
	src          []byte
	lead, trail  []byte
	spans        map[string]span
	orig         map[string]json.RawMessage
	indent, unit string
	// rendered marks values set by SetObject, already formatted for
	// their place in this object.
	rendered map[string]bool
}

// span is where one member is in an object's text: its key is
// src[key:keyEnd], its value src[val:end].
type span struct{ key, keyEnd, val, end int }

// NewObject returns an empty object.
func NewObject() *Object { return &Object{vals: map[string]json.RawMessage{}} }

// ParseObject reads a JSON object. A syntax error names the line and
// column.
func ParseObject(b []byte) (*Object, error) {
	return parseObject(b, "", DetectIndent(b))
}

// parseObject parses b, an object whose first line is indented by
// indent in its file, with unit as one level of indentation.
func parseObject(b []byte, indent, unit string) (*Object, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	o := NewObject()
	tok, err := dec.Token()
	if err != nil {
		return nil, syntaxError(b, dec, err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, fmt.Errorf("it holds %s, not an object", describe(tok))
	}
	open := int(dec.InputOffset())
	spans := map[string]span{}
	dup := false
	prev := open
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, syntaxError(b, dec, err)
		}
		k, ok := tok.(string)
		if !ok {
			return nil, fmt.Errorf("object key is not a string")
		}
		keyEnd := int(dec.InputOffset())
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, syntaxError(b, dec, err)
		}
		end := int(dec.InputOffset())
		key := prev
		for key < len(b) && b[key] != '"' {
			key++
		}
		if _, seen := spans[k]; seen {
			dup = true
		}
		spans[k] = span{key: key, keyEnd: keyEnd, val: end - len(v), end: end}
		prev = end
		o.Set(k, v)
	}
	if _, err := dec.Token(); err != nil {
		return nil, syntaxError(b, dec, err)
	}
	closeEnd := int(dec.InputOffset())
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("there is more after the object (line %d)", lineOf(b, dec.InputOffset()))
	}
	start := bytes.IndexByte(b, '{')
	if !dup && start >= 0 && start < open && closeEnd <= len(b) {
		o.src, o.lead, o.trail = b[start:closeEnd], b[:start], b[closeEnd:]
		o.spans = map[string]span{}
		o.orig = map[string]json.RawMessage{}
		for k, sp := range spans {
			o.spans[k] = span{key: sp.key - start, keyEnd: sp.keyEnd - start, val: sp.val - start, end: sp.end - start}
			o.orig[k] = o.vals[k]
		}
		o.indent, o.unit = indent, unit
	}
	return o, nil
}

func syntaxError(b []byte, dec *json.Decoder, err error) error {
	off := dec.InputOffset()
	var se *json.SyntaxError
	if errors.As(err, &se) {
		off = se.Offset
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		off = int64(len(b))
		err = errors.New("unexpected end of file")
	}
	line, col := 1, 1
	for _, c := range b[:min(int(off), len(b))] {
		if c == '\n' {
			line, col = line+1, 1
		} else {
			col++
		}
	}
	return fmt.Errorf("invalid JSON at line %d, column %d: %v", line, col, err)
}

func lineOf(b []byte, off int64) int {
	return 1 + bytes.Count(b[:min(int(off), len(b))], []byte("\n"))
}

// Keys returns the keys in order.
func (o *Object) Keys() []string { return append([]string(nil), o.keys...) }

// Get returns the raw value of k.
func (o *Object) Get(k string) (json.RawMessage, bool) {
	v, ok := o.vals[k]
	return v, ok
}

// Set sets k, keeping its position when it exists and appending it
// otherwise.
func (o *Object) Set(k string, v json.RawMessage) {
	if _, ok := o.vals[k]; !ok {
		o.keys = append(o.keys, k)
	}
	o.vals[k] = v
	delete(o.rendered, k)
}

// SetValue sets k to v encoded as JSON (without HTML escaping).
func (o *Object) SetValue(k string, v any) error {
	raw, err := Marshal(v)
	if err != nil {
		return err
	}
	o.Set(k, raw)
	return nil
}

// Delete removes k.
func (o *Object) Delete(k string) {
	if _, ok := o.vals[k]; !ok {
		return
	}
	delete(o.vals, k)
	for i, key := range o.keys {
		if key == k {
			o.keys = append(o.keys[:i], o.keys[i+1:]...)
			break
		}
	}
}

// Len is the number of keys.
func (o *Object) Len() int { return len(o.keys) }

// Object parses the value of k as an object; a missing key gives an
// empty object and false.
func (o *Object) Object(k string) (*Object, bool, error) {
	v, ok := o.vals[k]
	if !ok {
		sub := NewObject()
		sub.indent, sub.unit = o.memberIndent(), o.unit
		return sub, false, nil
	}
	sub, err := parseObject(v, o.memberIndent(), o.unitOr())
	if err != nil {
		return nil, true, fmt.Errorf("%q: %w", k, err)
	}
	return sub, true, nil
}

// SetObject stores sub as the value of k, formatted like the text it
// was parsed from.
func (o *Object) SetObject(k string, sub *Object) {
	if sub.src == nil && sub.unit == "" {
		sub.indent, sub.unit = o.memberIndent(), o.unitOr()
	}
	o.Set(k, sub.render())
	if o.rendered == nil {
		o.rendered = map[string]bool{}
	}
	o.rendered[k] = true
}

func (o *Object) unitOr() string {
	if o.unit == "" {
		return "  "
	}
	return o.unit
}

// memberIndent is the indentation of the object's members: that of its
// first member's line when it has one, else one unit more than its own.
func (o *Object) memberIndent() string {
	if o.src != nil && len(o.spans) > 0 {
		first := len(o.src)
		for _, sp := range o.spans {
			first = min(first, sp.key)
		}
		if i := bytes.LastIndexByte(o.src[:first], '\n'); i >= 0 {
			return string(o.src[i+1 : first])
		}
	}
	return o.indent + o.unitOr()
}

// render writes the object: the original text with only the changed,
// added and removed members changed when it was parsed, else indented.
func (o *Object) render() []byte {
	if o.src == nil {
		return o.fresh()
	}
	unchanged := len(o.keys) == len(o.orig)
	for _, k := range o.keys {
		if v, ok := o.orig[k]; !ok || !bytes.Equal(v, o.vals[k]) {
			unchanged = false
		}
	}
	if unchanged {
		return append([]byte(nil), o.src...)
	}
	mi := o.memberIndent()
	sep := []byte(": ")
	firstKey, lastEnd := len(o.src)-1, 1
	for _, sp := range o.spans {
		if sp.key < firstKey {
			sep = o.src[sp.keyEnd:sp.val]
		}
		firstKey = min(firstKey, sp.key)
		lastEnd = max(lastEnd, sp.end)
	}
	var b bytes.Buffer
	b.WriteByte('{')
	if len(o.keys) == 0 {
		b.Write(o.src[lastEnd:])
		return b.Bytes()
	}
	if len(o.spans) > 0 {
		b.Write(o.src[1:firstKey]) // whitespace before the first member
	} else {
		b.WriteString("\n" + mi)
	}
	var prevEnd = -1 // end of the previous original member written
	for i, k := range o.keys {
		sp, isOrig := o.spans[k]
		if i > 0 {
			if isOrig && prevEnd >= 0 && prevEnd <= sp.key && bytes.Count(o.src[prevEnd:sp.key], []byte(",")) == 1 && o.src[prevEnd] != '}' {
				b.Write(o.src[prevEnd:sp.key]) // the separator as it was
			} else {
				b.WriteString(",\n" + mi)
			}
		}
		if isOrig {
			b.Write(o.src[sp.key:sp.val])
			if v := o.vals[k]; bytes.Equal(v, o.orig[k]) || o.rendered[k] {
				b.Write(v)
			} else {
				b.Write(o.reindent(v, mi))
			}
			prevEnd = sp.end
			continue
		}
		b.Write(mustKey(k))
		b.Write(sep)
		if o.rendered[k] {
			b.Write(o.vals[k])
		} else {
			b.Write(o.reindent(o.vals[k], mi))
		}
		prevEnd = -1
	}
	if len(o.spans) > 0 {
		b.Write(o.src[lastEnd:]) // whitespace and the closing brace
	} else {
		b.WriteString("\n" + o.indent + "}")
	}
	return b.Bytes()
}

func mustKey(k string) []byte {
	kb, _ := Marshal(k)
	return kb
}

// reindent formats a new value (from elsewhere: the catalog, a
// program) to sit at the indentation mi, like the rest of the file.
func (o *Object) reindent(v json.RawMessage, mi string) []byte {
	var compact, out bytes.Buffer
	if err := json.Compact(&compact, v); err != nil {
		return v
	}
	if err := json.Indent(&out, compact.Bytes(), mi, o.unitOr()); err != nil {
		return v
	}
	return out.Bytes()
}

// fresh writes an object that has no original text, indented.
func (o *Object) fresh() []byte {
	var out bytes.Buffer
	if err := json.Indent(&out, o.Raw(), o.indent, o.unitOr()); err != nil {
		// Raw is built from validated parts; this cannot happen.
		panic(fmt.Sprintf("jsonedit: re-encoding JSON: %v", err))
	}
	return out.Bytes()
}

// Raw encodes the object compactly, values as they were.
func (o *Object) Raw() json.RawMessage {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, k := range o.keys {
		if i > 0 {
			b.WriteByte(',')
		}
		kb, _ := Marshal(k)
		b.Write(kb)
		b.WriteByte(':')
		b.Write(o.vals[k])
	}
	b.WriteByte('}')
	return b.Bytes()
}

// Format encodes the object as a file. An object parsed from a file
// gives that file back with only what changed changed (every untouched
// member keeps its text, whitespace included); a new one is indented
// with indent, ending in a newline.
func (o *Object) Format(indent string) []byte {
	if o.src != nil {
		var out bytes.Buffer
		out.Write(o.lead)
		out.Write(o.render())
		out.Write(o.trail)
		return out.Bytes()
	}
	var out bytes.Buffer
	if err := json.Indent(&out, o.Raw(), "", indent); err != nil {
		// Raw is built from validated parts; this cannot happen.
		panic(fmt.Sprintf("jsonedit: re-encoding JSON: %v", err))
	}
	out.WriteByte('\n')
	return out.Bytes()
}

// Marshal encodes v as JSON without escaping <, > and & (tokenizer files
// are full of "<|im_end|>").
func Marshal(v any) (json.RawMessage, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(b.Bytes(), "\n"), nil
}

// DetectIndent guesses a file's indentation from its first indented
// line; two spaces when there is none.
func DetectIndent(b []byte) string {
	for _, line := range strings.Split(string(b), "\n")[1:] {
		trimmed := strings.TrimLeft(line, " \t")
		if trimmed != "" && len(trimmed) < len(line) {
			return line[:len(line)-len(trimmed)]
		}
	}
	return "  "
}

// describe names a JSON value's kind from its first token.
func describe(tok json.Token) string {
	switch tok {
	case json.Delim('['):
		return "an array"
	case nil:
		return "null"
	}
	switch tok.(type) {
	case string:
		return "a string"
	case json.Number, float64:
		return "a number"
	case bool:
		return "a boolean"
	}
	return fmt.Sprint(tok)
}

// Change sets the member at path (keys from the outside in: "chat",
// "temperature") to v encoded as JSON, or removes it when v is nil; the
// objects on the way are made when missing, and an object a removal
// leaves empty goes too. A member on the way that is not an object is
// an error naming it.
func (o *Object) Change(path []string, v any) error {
	if len(path) == 0 {
		return errors.New("jsonedit: change: no key")
	}
	k := path[0]
	if len(path) == 1 {
		if v == nil {
			o.Delete(k)
			return nil
		}
		return o.SetValue(k, v)
	}
	if raw, ok := o.vals[k]; ok && string(bytes.TrimSpace(raw)) == "null" {
		o.Delete(k) // null on the way is no object yet
	}
	sub, ok, err := o.Object(k)
	if err != nil {
		return fmt.Errorf("%q is not an object: %v", k, err)
	}
	if !ok && v == nil {
		return nil // nothing to remove
	}
	if err := sub.Change(path[1:], v); err != nil {
		return err
	}
	if sub.Len() == 0 {
		o.Delete(k)
		return nil
	}
	o.SetObject(k, sub)
	return nil
}
