package oflm

import (
	"encoding/json"
	"fmt"
	"math"
)

// checkManifest refuses a kernel manifest that oflm's Manifest::parse
// (src/open_qwen36/manifest.cpp @105d644) refuses for its shape:
// manifest_version 1; a family; a layout with its sizes and as many
// rope_inv_freq values as half the rotary dim; layers, each naming a
// layer type; contexts; kernels, each with a context it declares and an
// insts file; layer types with buffers, program and pack; tail; globals;
// pack's embed, norm and lm_head ops; hf_config_check; and a nested gguf
// manifest by the same rules. What a layer type's program computes is
// oflm's to judge at load: it is not checked here (docs/oflm-route.md).
func checkManifest(b []byte) error {
	var j map[string]any
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	return checkManifestObject(j, "")
}

func checkManifestObject(j map[string]any, where string) error {
	fail := func(format string, a ...any) error {
		return fmt.Errorf("%s%s (oflm refuses such a set)", where, fmt.Sprintf(format, a...))
	}
	v, ok := j["manifest_version"].(float64)
	if !ok {
		return fail("lacks manifest_version")
	}
	if v != 1 {
		return fail("manifest_version %v (oflm reads 1)", v)
	}
	if _, ok := j["family"].(string); !ok {
		return fail("lacks family")
	}
	layout, ok := j["layout"].(map[string]any)
	if !ok {
		return fail("lacks layout")
	}
	// the layout fields Manifest::parse requires
	for _, k := range []string{"hidden", "vocab", "chunk_bytes", "pool_bytes", "lmhead_pool_bytes", "kv_row", "ptab_row", "rotary_dim", "rope_theta"} {
		if _, ok := layout[k].(float64); !ok {
			return fail("layout lacks %s", k)
		}
	}
	freqs, ok := layout["rope_inv_freq"].([]any)
	if !ok {
		return fail("layout lacks rope_inv_freq")
	}
	if rot := layout["rotary_dim"].(float64); float64(len(freqs)) != math.Floor(rot/2) {
		return fail("layout has %d rope_inv_freq values, its rotary_dim %v wants %v", len(freqs), rot, math.Floor(rot/2))
	}
	types, ok := j["layer_types"].(map[string]any)
	if !ok {
		return fail("lacks layer_types")
	}
	for name, t := range types {
		tm, _ := t.(map[string]any)
		for _, k := range []string{"buffers", "program", "pack"} {
			if _, ok := tm[k]; !ok {
				return fail("layer type %s lacks %s", name, k)
			}
		}
	}
	layers, ok := j["layers"].([]any)
	if !ok || len(layers) == 0 {
		return fail("names no layers")
	}
	for _, l := range layers {
		name, _ := l.(string)
		if _, ok := types[name]; !ok {
			return fail("layers names unknown layer type %v", l)
		}
	}
	contexts, ok := j["contexts"].(map[string]any)
	if !ok {
		return fail("lacks contexts")
	}
	for k, c := range contexts {
		if _, ok := c.(string); !ok {
			return fail("context %s is not a file name", k)
		}
	}
	kernels, ok := j["kernels"].(map[string]any)
	if !ok {
		return fail("lacks kernels")
	}
	for k, kv := range kernels {
		km, _ := kv.(map[string]any)
		ctx, ok := km["context"].(string)
		if !ok {
			return fail("kernel %s lacks context", k)
		}
		if _, ok := contexts[ctx]; !ok {
			return fail("kernel %s names unknown context %s", k, ctx)
		}
		if _, ok := km["insts"].(string); !ok {
			return fail("kernel %s lacks insts", k)
		}
	}
	if _, ok := j["tail"].([]any); !ok {
		return fail("lacks tail")
	}
	if _, ok := j["globals"].(map[string]any); !ok {
		return fail("lacks globals")
	}
	pack, _ := j["pack"].(map[string]any)
	embed, _ := pack["embed"].(map[string]any)
	norm, _ := pack["norm"].(map[string]any)
	lmHead, _ := pack["lm_head"].(map[string]any)
	ops, _ := lmHead["ops"].([]any)
	switch {
	case pack == nil:
		return fail("lacks pack")
	case !isString(embed["tensor"]):
		return fail("pack.embed lacks tensor")
	case !isString(norm["tensor"]):
		return fail("pack.norm lacks tensor")
	case !isNumber(norm["bytes"]):
		return fail("pack.norm lacks bytes")
	case len(ops) == 0:
		return fail("pack.lm_head has no ops")
	}
	if _, ok := j["hf_config_check"]; !ok {
		return fail("lacks hf_config_check")
	}
	if g, ok := j["gguf"]; ok {
		gm, ok := g.(map[string]any)
		if !ok {
			return fail("gguf is not a manifest")
		}
		return checkManifestObject(gm, where+"gguf: ")
	}
	return nil
}

func isString(v any) bool { _, ok := v.(string); return ok }

func isNumber(v any) bool { _, ok := v.(float64); return ok }
