package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

// Change is one setting to change in the settings file: Key is its JSON
// key, with a dot between nested keys ("engine", "chat.temperature"),
// and Value its new value, written as JSON; a nil Value removes the key
// (an object left empty by that goes too).
type Change struct {
	Key   string
	Value any
}

// UpdateSettings changes the keys that changes name in the settings
// file at path and nothing else: every other key, whether Settings
// knows it or not (written by a newer version, or by hand), keeps its
// value and its place in the file; new keys go at the end. The file is
// replaced atomically (WriteFileAtomic). A missing or blank file is an
// empty object; a file that is a symbolic link is changed where it
// points (WriteSettingsFile). A file that is not a JSON object, or whose object at a
// nested key's parent is not one, is refused with an error that says
// so, and is left as it was: overwriting it would lose what a person
// wrote in it.
func UpdateSettings(path string, changes ...Change) error {
	b, err := ReadSettingsFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("config: change settings: read %s: %w", path, err)
	}
	root, err := parseObject(b)
	if err != nil {
		return fmt.Errorf("config: settings file %s is not a valid JSON object (%v); fix or delete it: nothing was changed", path, err)
	}
	for _, c := range changes {
		if err := root.change(strings.Split(c.Key, "."), c.Value); err != nil {
			return fmt.Errorf("config: settings file %s: %q: %v; fix or delete it: nothing was changed", path, c.Key, err)
		}
	}
	out, err := root.marshal("")
	if err != nil {
		return fmt.Errorf("config: change settings in %s: %w", path, err)
	}
	return WriteSettingsFile(path, append(out, '\n'))
}

// object is a JSON object that keeps its keys' order and their values'
// JSON as written.
type object struct {
	keys []string
	vals map[string]json.RawMessage
}

// parseObject reads a JSON object; blank input is an empty one. A key
// written twice keeps its first place and its last value, the one
// encoding/json (and so Load) reads.
func parseObject(b []byte) (*object, error) {
	o := &object{vals: map[string]json.RawMessage{}}
	if len(bytes.TrimSpace(b)) == 0 {
		return o, nil
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	if tok, err := dec.Token(); err != nil {
		return nil, err
	} else if tok != json.Delim('{') {
		return nil, fmt.Errorf("it holds %s, not an object", describe(tok))
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		key := tok.(string) // the decoder allows only strings as keys
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, err
		}
		if _, seen := o.vals[key]; !seen {
			o.keys = append(o.keys, key)
		}
		o.vals[key] = raw
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("there is more after the object")
	}
	return o, nil
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
	case float64:
		return "a number"
	case bool:
		return "a boolean"
	}
	return fmt.Sprint(tok)
}

// change sets (or, for a nil value, removes) the key at path, making
// the objects on the way when they are missing.
func (o *object) change(path []string, value any) error {
	key := path[0]
	if len(path) == 1 {
		if value == nil {
			o.remove(key)
			return nil
		}
		raw, err := json.Marshal(value)
		if err != nil {
			return err
		}
		o.set(key, raw)
		return nil
	}
	child := &object{vals: map[string]json.RawMessage{}}
	if raw, ok := o.vals[key]; ok && string(bytes.TrimSpace(raw)) != "null" {
		var err error
		if child, err = parseObject(raw); err != nil {
			return fmt.Errorf("%q is not an object: %v", key, err)
		}
	} else if value == nil {
		return nil // nothing to remove
	}
	if err := child.change(path[1:], value); err != nil {
		return err
	}
	if len(child.keys) == 0 {
		o.remove(key)
		return nil
	}
	raw, err := child.marshal("")
	if err != nil {
		return err
	}
	o.set(key, raw)
	return nil
}

func (o *object) set(key string, raw json.RawMessage) {
	if _, ok := o.vals[key]; !ok {
		o.keys = append(o.keys, key)
	}
	o.vals[key] = raw
}

func (o *object) remove(key string) {
	if _, ok := o.vals[key]; !ok {
		return
	}
	delete(o.vals, key)
	for i, k := range o.keys {
		if k == key {
			o.keys = append(o.keys[:i], o.keys[i+1:]...)
			break
		}
	}
}

// marshal writes the object indented by two spaces a level, as Save
// does, its keys in order; prefix begins every line but the first.
func (o *object) marshal(prefix string) ([]byte, error) {
	if len(o.keys) == 0 {
		return []byte("{}"), nil
	}
	var buf bytes.Buffer
	buf.WriteString("{\n")
	for i, k := range o.keys {
		name, err := json.Marshal(k)
		if err != nil {
			return nil, err
		}
		buf.WriteString(prefix + "  ")
		buf.Write(name)
		buf.WriteString(": ")
		if err := json.Indent(&buf, o.vals[k], prefix+"  ", "  "); err != nil {
			return nil, err
		}
		if i < len(o.keys)-1 {
			buf.WriteByte(',')
		}
		buf.WriteByte('\n')
	}
	buf.WriteString(prefix + "}")
	return buf.Bytes(), nil
}
