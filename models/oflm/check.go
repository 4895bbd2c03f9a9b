package oflm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Mismatch is one way a pack's config.json differs from what a kernel set
// was built for.
type Mismatch struct {
	Key  string          // the config.json key
	Got  json.RawMessage // the pack's value (nil when absent)
	Want json.RawMessage // the kernel set's (for model_type, the list of accepted values)
	// Default is true when the key is absent from config.json and Got is
	// the manifest's hf_config_defaults value for it.
	Default bool
}

// String says the mismatch in a sentence.
func (m Mismatch) String() string {
	switch {
	case m.Got == nil:
		return fmt.Sprintf("config.json lacks %s (the kernel set was built for %s)", m.Key, m.Want)
	case m.Key == "model_type":
		return fmt.Sprintf("config.json model_type %s is not one this kernel set serves (%s)", m.Got, m.Want)
	case m.Default:
		return fmt.Sprintf("config.json %s = %s (absent: its default), the kernel set was built for %s", m.Key, m.Got, m.Want)
	}
	return fmt.Sprintf("config.json %s = %s, the kernel set was built for %s", m.Key, m.Got, m.Want)
}

// CheckPack holds dir/config.json against the kernel manifest at
// manifestPath (an open_kernels/manifest.json) as oflm does when it loads
// a model (Manifest::check_model): every key of the manifest's
// hf_config_check must be in config.json (or in hf_config_defaults) with
// the same JSON value; model_type must be one of the listed values;
// layer_types, when checked, may also come from full_attention_interval.
// It returns every mismatch, none when the pack fits.
func CheckPack(dir, manifestPath string) ([]Mismatch, error) {
	cfg, err := os.ReadFile(filepath.Join(dir, "config.json"))
	if err != nil {
		return nil, fmt.Errorf("check pack %s: %w", dir, err)
	}
	man, err := os.ReadFile(manifestPath)
	if err != nil {
		return nil, fmt.Errorf("check pack %s: %w", dir, err)
	}
	ms, err := CheckConfig(cfg, man)
	if err != nil {
		return nil, fmt.Errorf("check pack %s against %s: %w", dir, manifestPath, err)
	}
	return ms, nil
}

// CheckConfig is CheckPack on the two files' contents.
func CheckConfig(config, kernelManifest []byte) ([]Mismatch, error) {
	var m struct {
		Check    map[string]json.RawMessage `json:"hf_config_check"`
		Defaults map[string]json.RawMessage `json:"hf_config_defaults"`
	}
	if err := json.Unmarshal(kernelManifest, &m); err != nil {
		return nil, fmt.Errorf("manifest: %w", err)
	}
	if m.Check == nil {
		return nil, fmt.Errorf("manifest has no hf_config_check")
	}
	var c map[string]json.RawMessage
	if err := json.Unmarshal(config, &c); err != nil {
		return nil, fmt.Errorf("config.json is not a JSON object: %w", err)
	}
	keys := make([]string, 0, len(m.Check))
	for k := range m.Check {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var out []Mismatch
	for _, key := range keys {
		want := m.Check[key]
		got, present := c[key]
		switch key {
		case "model_type":
			var accepted []json.RawMessage
			if err := json.Unmarshal(want, &accepted); err != nil {
				return nil, fmt.Errorf("manifest: hf_config_check model_type is not a list: %w", err)
			}
			ok := false
			for _, a := range accepted {
				ok = ok || present && jsonEqual(got, a)
			}
			if !ok {
				out = append(out, Mismatch{Key: key, Got: got, Want: want})
			}
		case "layer_types":
			if !present {
				got = derivedLayerTypes(c)
			}
			if got == nil || !jsonEqual(got, want) {
				out = append(out, Mismatch{Key: key, Got: got, Want: want})
			}
		default:
			def := false
			if !present {
				got, def = m.Defaults[key]
			}
			if got == nil || !jsonEqual(got, want) {
				out = append(out, Mismatch{Key: key, Got: got, Want: want, Default: def})
			}
		}
	}
	return out, nil
}

// derivedLayerTypes is layer_types from full_attention_interval (every
// interval-th layer full attention, the rest linear), as oflm derives it;
// nil when config.json has neither.
func derivedLayerTypes(c map[string]json.RawMessage) json.RawMessage {
	var iv, n int
	if json.Unmarshal(c["full_attention_interval"], &iv) != nil || json.Unmarshal(c["num_hidden_layers"], &n) != nil || iv <= 0 {
		return nil
	}
	types := make([]string, n)
	for l := range types {
		types[l] = "linear_attention"
		if (l+1)%iv == 0 {
			types[l] = "full_attention"
		}
	}
	b, _ := json.Marshal(types)
	return b
}

// jsonEqual compares two JSON values as nlohmann::json's == does: numbers
// by value (2048 equals 2048.0), strings, booleans and null exactly,
// arrays element by element, objects key by key.
func jsonEqual(a, b json.RawMessage) bool {
	va, err1 := decodeNumbers(a)
	vb, err2 := decodeNumbers(b)
	return err1 == nil && err2 == nil && valuesEqual(va, vb)
}

func decodeNumbers(raw json.RawMessage) (any, error) {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	err := d.Decode(&v)
	return v, err
}

func valuesEqual(a, b any) bool {
	switch x := a.(type) {
	case json.Number:
		y, ok := b.(json.Number)
		if !ok {
			return false
		}
		if i, err := x.Int64(); err == nil {
			if j, err := y.Int64(); err == nil {
				return i == j
			}
		}
		f, err1 := x.Float64()
		g, err2 := y.Float64()
		return err1 == nil && err2 == nil && f == g
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !valuesEqual(x[i], y[i]) {
				return false
			}
		}
		return true
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, v := range x {
			w, ok := y[k]
			if !ok || !valuesEqual(v, w) {
				return false
			}
		}
		return true
	}
	return a == b
}

// Describe joins mismatches into one message for a person.
func Describe(ms []Mismatch) string {
	parts := make([]string, len(ms))
	for i, m := range ms {
		parts[i] = m.String()
	}
	return strings.Join(parts, "; ")
}

// manifestKVHeads reads the KV head count a kernel manifest's
// hf_config_check asks for (0 when it does not check it).
func manifestKVHeads(kernelManifest []byte) (int, error) {
	var m struct {
		Check struct {
			KV *int `json:"num_key_value_heads"`
		} `json:"hf_config_check"`
	}
	if err := json.Unmarshal(kernelManifest, &m); err != nil {
		return 0, err
	}
	if m.Check.KV == nil {
		return 0, nil
	}
	if *m.Check.KV <= 0 {
		return 0, fmt.Errorf("hf_config_check num_key_value_heads %d", *m.Check.KV)
	}
	return *m.Check.KV, nil
}
