package flm

import (
	"encoding/json"
	"errors"
	"fmt"
	"github.com/npuchat/npuchat/jsonedit"
	"reflect"
	"strings"
)

// Entry is one model to register in a model_list.json: it goes to
// models[Family][Tag]. Value is the entry's JSON object.
type Entry struct {
	Family, Tag string
	Value       json.RawMessage
}

// EmptyList is the skeleton of a model_list.json when there is none to
// start from.
const EmptyList = `{"model_path": "models", "models": {}}`

// SetEntries registers entries in a model list: each entry's keys are
// written over the existing entry at models[family][tag] (keeping its
// position and any key NPU Chat does not set); every other family, tag
// and top-level key is kept as it was.
func SetEntries(list *jsonedit.Object, entries []Entry) error {
	models, _, err := list.Object("models")
	if err != nil {
		return err
	}
	for _, e := range entries {
		fam, _, err := models.Object(e.Family)
		if err != nil {
			return fmt.Errorf("models: %w", err)
		}
		cur, _, err := fam.Object(e.Tag)
		if err != nil {
			return fmt.Errorf("models: %s: %w", e.Family, err)
		}
		want, err := jsonedit.ParseObject(e.Value)
		if err != nil {
			return fmt.Errorf("entry %s:%s: %w", e.Family, e.Tag, err)
		}
		for _, k := range want.Keys() {
			v, _ := want.Get(k)
			cur.Set(k, v)
		}
		fam.SetObject(e.Tag, cur)
		models.SetObject(e.Family, fam)
	}
	if _, ok := list.Get("model_path"); !ok {
		list.Set("model_path", json.RawMessage(`"models"`))
	}
	list.SetObject("models", models)
	return nil
}

// RemoveEntry deletes models[family][tag] when its "name" is name (so an
// entry someone else put there is left alone), and the family when it
// becomes empty. It reports whether it removed anything.
func RemoveEntry(list *jsonedit.Object, family, tag, name string) (bool, error) {
	models, ok, err := list.Object("models")
	if err != nil || !ok {
		return false, err
	}
	fam, ok, err := models.Object(family)
	if err != nil || !ok {
		return false, err
	}
	raw, ok := fam.Get(tag)
	if !ok {
		return false, nil
	}
	var e struct {
		Name string `json:"name"`
	}
	if err := json.Unmarshal(raw, &e); err != nil || e.Name != name {
		return false, nil
	}
	fam.Delete(tag)
	if fam.Len() == 0 {
		models.Delete(family)
	} else {
		models.SetObject(family, fam)
	}
	list.SetObject("models", models)
	return true, nil
}

// GetEntry returns the raw value of models[family][tag], if any.
func GetEntry(list *jsonedit.Object, family, tag string) (json.RawMessage, bool) {
	models, _, err := list.Object("models")
	if err != nil {
		return nil, false
	}
	fam, _, err := models.Object(family)
	if err != nil {
		return nil, false
	}
	return fam.Get(tag)
}

// RestoreEntry undoes a registration: when models[family][tag] is the
// entry named name, it is put back to before (the value the list held
// there before the model was registered), or removed (with its family
// when that becomes empty) when before is nil. An entry someone else put
// there is left alone. It reports whether it changed anything.
func RestoreEntry(list *jsonedit.Object, family, tag, name string, before json.RawMessage) (bool, error) {
	if before == nil {
		return RemoveEntry(list, family, tag, name)
	}
	if !HasEntry(list, family, tag, name) {
		return false, nil
	}
	models, _, err := list.Object("models")
	if err != nil {
		return false, err
	}
	fam, _, err := models.Object(family)
	if err != nil {
		return false, err
	}
	if _, err := jsonedit.ParseObject(before); err != nil {
		return false, fmt.Errorf("earlier entry %s:%s: %w", family, tag, err)
	}
	if cur, _ := fam.Get(tag); sameJSON(cur, before) {
		// Registered as it was (FastFlowLM's own entry of its own
		// model): the list keeps its bytes.
		return false, nil
	}
	fam.Set(tag, before)
	models.SetObject(family, fam)
	list.SetObject("models", models)
	return true, nil
}

// sameJSON reports whether a and b are the same JSON value.
func sameJSON(a, b json.RawMessage) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}

// HasEntry reports whether models[family][tag] exists with this name.
func HasEntry(list *jsonedit.Object, family, tag, name string) bool {
	models, _, err := list.Object("models")
	if err != nil {
		return false
	}
	fam, _, err := models.Object(family)
	if err != nil {
		return false
	}
	raw, ok := fam.Get(tag)
	if !ok {
		return false
	}
	var e struct {
		Name string `json:"name"`
	}
	return json.Unmarshal(raw, &e) == nil && e.Name == name
}

// ModelPath is the list's "model_path" ("models" when absent or
// empty), the models folder relative to FastFlowLM's models home. A
// value that is not a string, or that could lead out of that home
// (CheckModelPath), is an error: nothing is read, written or deleted
// through it.
func ModelPath(list *jsonedit.Object) (string, error) {
	raw, ok := list.Get("model_path")
	if !ok {
		return "models", nil
	}
	var p string
	if err := json.Unmarshal(raw, &p); err != nil {
		return "", fmt.Errorf("\"model_path\" is %s, not a string", raw)
	}
	if p == "" {
		return "models", nil
	}
	if err := CheckModelPath(p); err != nil {
		return "", fmt.Errorf("\"model_path\" is %q: %w", p, err)
	}
	return p, nil
}

// CheckModelPath refuses a model_path that could lead out of the
// FastFlowLM models folder it is joined to: an absolute path (on any
// system: /x, \x, C:x, C:\x, \\server\share), a ".." element (with /
// or \ as the separator, as Windows reads it), or a NUL byte.
func CheckModelPath(p string) error {
	switch {
	case strings.ContainsRune(p, 0):
		return errors.New("it holds a NUL byte")
	case strings.HasPrefix(p, "/") || strings.HasPrefix(p, `\`) || (len(p) >= 2 && p[1] == ':'):
		return errors.New("it is an absolute path, not a folder inside the FastFlowLM models folder")
	}
	for _, el := range strings.FieldsFunc(p, func(r rune) bool { return r == '/' || r == '\\' }) {
		if el == ".." {
			return errors.New("it climbs out of the FastFlowLM models folder with \"..\"")
		}
	}
	return nil
}

// MergeList builds the model_list.json NPU Chat owns: base (FastFlowLM's
// own list, or NPU Chat's previous list when FastFlowLM's cannot be read)
// with entries registered. base may be nil for an empty list.
func MergeList(base []byte, entries []Entry) ([]byte, error) {
	if base == nil {
		base = []byte(EmptyList)
	}
	list, err := jsonedit.ParseObject(base)
	if err != nil {
		return nil, err
	}
	if err := SetEntries(list, entries); err != nil {
		return nil, err
	}
	out := list.Format(jsonedit.DetectIndent(base))
	// Never hand back a broken list, whatever went wrong above.
	if _, err := jsonedit.ParseObject(out); err != nil {
		return nil, fmt.Errorf("the merged model list is not valid JSON (%v); nothing was written (please report this with FastFlowLM's model_list.json)", err)
	}
	return out, nil
}
