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
	// Reason, for a mismatch of model.q4nx (Key "model.q4nx <tensor>"),
	// says what is wrong with the tensor.
	Reason string
}

// String says the mismatch in a sentence.
func (m Mismatch) String() string {
	switch {
	case m.Reason != "":
		return m.Key + ": " + m.Reason
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
// When dir has a model.q4nx and the manifest a packing plan, the tensors
// are held against the plan too (see checkWeights). It returns every
// mismatch, none when the pack fits.
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
	ws, err := checkWeights(filepath.Join(dir, weightsFile), man)
	if err != nil {
		return nil, fmt.Errorf("check pack %s against %s: %w", dir, manifestPath, err)
	}
	return append(ms, ws...), nil
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
		want := compact(m.Check[key])
		got, present := c[key]
		got = compact(got)
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
				got = compact(got)
			}
			if got == nil || !jsonEqual(got, want) {
				out = append(out, Mismatch{Key: key, Got: got, Want: want, Default: def})
			}
		}
	}
	return out, nil
}

// compact removes a JSON value's insignificant spaces (nil stays nil), so
// that messages quote values on one line.
func compact(raw json.RawMessage) json.RawMessage {
	if raw == nil {
		return nil
	}
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return raw
	}
	return b.Bytes()
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

// packOp is one step of a kernel manifest's packing plan that reads a
// tensor of model.q4nx.
type packOp struct {
	Op     string `json:"op"`
	Tensor string `json:"tensor"`
	NCh    int64  `json:"nch"`
	Cap    int64  `json:"cap"`
}

// checkWeights holds the container at path against the packing plan of a
// kernel manifest (layers, layer_types.*.pack, pack): every tensor the
// plan reads is there; a Q4_1 tensor (I8, 5120-byte chunks) has the chunk
// count the plan packs (nch: the KV head count shows here), a Q8 one
// (8704-byte chunks) is accepted as oflm requantizes it; the norms and
// constants are BF16 within their byte budget; and, when the spec says
// qk_norm false, no q_norm/k_norm tensor is present. A missing
// model.q4nx, or a manifest without a plan, checks nothing.
func checkWeights(path string, kernelManifest []byte) ([]Mismatch, error) {
	var m struct {
		Spec struct {
			QKNorm *bool `json:"qk_norm"`
		} `json:"spec"`
		Layers     []string `json:"layers"`
		LayerTypes map[string]struct {
			Pack struct {
				Pool   []packOp `json:"pool"`
				Consts []packOp `json:"consts"`
			} `json:"pack"`
		} `json:"layer_types"`
		Pack struct {
			LMHead struct {
				Ops []packOp `json:"ops"`
			} `json:"lm_head"`
			Embed *struct {
				Tensor string `json:"tensor"`
				Dim    int64  `json:"dim"`
			} `json:"embed"`
			Norm *struct {
				Tensor string `json:"tensor"`
				Bytes  int64  `json:"bytes"`
			} `json:"norm"`
		} `json:"pack"`
	}
	if err := json.Unmarshal(kernelManifest, &m); err != nil {
		return nil, fmt.Errorf("manifest: %w", err)
	}
	if len(m.Layers) == 0 {
		return nil, nil
	}
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	h, err := readHeader(f, st.Size())
	if err != nil {
		return nil, fmt.Errorf("%s: %w", weightsFile, err)
	}
	var out []Mismatch
	bad := func(tensor, format string, a ...any) {
		out = append(out, Mismatch{Key: weightsFile + " " + tensor, Reason: fmt.Sprintf(format, a...)})
	}
	chunks := func(op packOp, name string) {
		t, ok := h.find(name)
		switch {
		case !ok:
			bad(name, "missing (the kernel set packs it)")
		case t.DType != "I8" || len(t.Shape) < 2:
			bad(name, "%s %v, not quantized chunks (I8)", t.DType, t.Shape)
		case t.Shape[len(t.Shape)-1] == 5120 && op.NCh > 0 && t.Size()/5120 != op.NCh:
			bad(name, "%d Q4_1 chunks, the kernel set packs %d", t.Size()/5120, op.NCh)
		case t.Shape[len(t.Shape)-1] != 5120 && t.Shape[len(t.Shape)-1] != 8704:
			bad(name, "chunks of %d bytes, neither Q4_1 (5120) nor Q8 (8704)", t.Shape[len(t.Shape)-1])
		}
	}
	floats := func(name string, maxBytes, exactBytes int64) {
		t, ok := h.find(name)
		switch {
		case !ok:
			bad(name, "missing (the kernel set reads it)")
		case t.DType != "BF16":
			bad(name, "%s, oflm reads it as BF16", t.DType)
		case maxBytes > 0 && t.Size() > maxBytes:
			bad(name, "%d bytes, the kernel set has room for %d", t.Size(), maxBytes)
		case exactBytes > 0 && t.Size() != exactBytes:
			bad(name, "%d bytes, the kernel set reads %d", t.Size(), exactBytes)
		}
	}
	for l, typ := range m.Layers {
		lt, ok := m.LayerTypes[typ]
		if !ok {
			return nil, fmt.Errorf("manifest: layer %d has unknown type %q", l, typ)
		}
		name := func(op packOp) string { return strings.ReplaceAll(op.Tensor, "{l}", fmt.Sprint(l)) }
		for _, op := range lt.Pack.Pool {
			chunks(op, name(op))
		}
		for _, op := range lt.Pack.Consts {
			floats(name(op), op.Cap, 0)
		}
	}
	for _, op := range m.Pack.LMHead.Ops {
		chunks(op, op.Tensor)
	}
	if e := m.Pack.Embed; e != nil {
		if t, ok := h.find(e.Tensor); ok && e.Dim > 0 && len(t.Shape) == 2 && t.Shape[1] != e.Dim {
			bad(e.Tensor, "rows of %d, the kernel set reads %d", t.Shape[1], e.Dim)
		}
		floats(e.Tensor, 0, 0)
	}
	if n := m.Pack.Norm; n != nil {
		floats(n.Tensor, 0, n.Bytes)
	}
	if m.Spec.QKNorm != nil && !*m.Spec.QKNorm {
		var norms []string
		for _, t := range h.Tensors {
			if strings.HasSuffix(t.Name, "self_attn.q_norm.weight") || strings.HasSuffix(t.Name, "self_attn.k_norm.weight") {
				norms = append(norms, t.Name)
			}
		}
		if len(norms) > 0 {
			bad(norms[0], "one of %d q/k norm tensors, which this kernel set (qk_norm false) does not compute", len(norms))
		}
	}
	return out, nil
}
