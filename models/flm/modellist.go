package flm

import (
	"encoding/json"
	"fmt"
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
func SetEntries(list *Object, entries []Entry) error {
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
		want, err := ParseObject(e.Value)
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
func RemoveEntry(list *Object, family, tag, name string) (bool, error) {
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
func GetEntry(list *Object, family, tag string) (json.RawMessage, bool) {
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
func RestoreEntry(list *Object, family, tag, name string, before json.RawMessage) (bool, error) {
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
	if _, err := ParseObject(before); err != nil {
		return false, fmt.Errorf("earlier entry %s:%s: %w", family, tag, err)
	}
	fam.Set(tag, before)
	models.SetObject(family, fam)
	list.SetObject("models", models)
	return true, nil
}

// HasEntry reports whether models[family][tag] exists with this name.
func HasEntry(list *Object, family, tag, name string) bool {
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

// ModelPath is the list's "model_path" ("models" when absent).
func ModelPath(list *Object) string {
	var p string
	if raw, ok := list.Get("model_path"); ok && json.Unmarshal(raw, &p) == nil && p != "" {
		return p
	}
	return "models"
}

// MergeList builds the model_list.json NPU Chat owns: base (FastFlowLM's
// own list, or NPU Chat's previous list when FastFlowLM's cannot be read)
// with entries registered. base may be nil for an empty list.
func MergeList(base []byte, entries []Entry) ([]byte, error) {
	if base == nil {
		base = []byte(EmptyList)
	}
	list, err := ParseObject(base)
	if err != nil {
		return nil, err
	}
	if err := SetEntries(list, entries); err != nil {
		return nil, err
	}
	out := list.Format(DetectIndent(base))
	// Never hand back a broken list, whatever went wrong above.
	if _, err := ParseObject(out); err != nil {
		return nil, fmt.Errorf("the merged model list is not valid JSON (%v); nothing was written (please report this with FastFlowLM's model_list.json)", err)
	}
	return out, nil
}
