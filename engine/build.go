package engine

import (
	"fmt"
	"strings"
)

// tensorSource hands out a file's tensors by name, checking shapes.
type tensorSource interface {
	has(name string) bool
	// matrix returns a rows×cols weight matrix.
	matrix(name string, rows, cols int) (matrix, error)
	// vector returns n values as float32.
	vector(name string, n int) ([]float32, error)
}

// tensorNames are one format's tensor names; %d is the layer.
type tensorNames struct {
	embed, outNorm, output                         string
	attnNorm, q, k, v, o, bq, bk, bv, qNorm, kNorm string
	ffnNorm, gate, up, down                        string
}

var ggufNames = tensorNames{
	embed: "token_embd.weight", outNorm: "output_norm.weight", output: "output.weight",
	attnNorm: "blk.%d.attn_norm.weight",
	q:        "blk.%d.attn_q.weight", k: "blk.%d.attn_k.weight", v: "blk.%d.attn_v.weight", o: "blk.%d.attn_output.weight",
	bq: "blk.%d.attn_q.bias", bk: "blk.%d.attn_k.bias", bv: "blk.%d.attn_v.bias",
	qNorm: "blk.%d.attn_q_norm.weight", kNorm: "blk.%d.attn_k_norm.weight",
	ffnNorm: "blk.%d.ffn_norm.weight",
	gate:    "blk.%d.ffn_gate.weight", up: "blk.%d.ffn_up.weight", down: "blk.%d.ffn_down.weight",
}

var hfNames = tensorNames{
	embed: "model.embed_tokens.weight", outNorm: "model.norm.weight", output: "lm_head.weight",
	attnNorm: "model.layers.%d.input_layernorm.weight",
	q:        "model.layers.%d.self_attn.q_proj.weight", k: "model.layers.%d.self_attn.k_proj.weight",
	v: "model.layers.%d.self_attn.v_proj.weight", o: "model.layers.%d.self_attn.o_proj.weight",
	bq: "model.layers.%d.self_attn.q_proj.bias", bk: "model.layers.%d.self_attn.k_proj.bias", bv: "model.layers.%d.self_attn.v_proj.bias",
	qNorm: "model.layers.%d.self_attn.q_norm.weight", kNorm: "model.layers.%d.self_attn.k_norm.weight",
	ffnNorm: "model.layers.%d.post_attention_layernorm.weight",
	gate:    "model.layers.%d.mlp.gate_proj.weight", up: "model.layers.%d.mlp.up_proj.weight", down: "model.layers.%d.mlp.down_proj.weight",
}

// build reads every weight the config calls for. It sets cfg.Tied when
// the output projection is absent, and cfg.QKNorm / cfg.AttnBias when the
// tensors are present.
func (m *Model) build(src tensorSource, n tensorNames) error {
	c := &m.cfg
	var err error
	if m.embed, err = src.matrix(n.embed, c.VocabSize, c.Hidden); err != nil {
		return err
	}
	if m.outNorm, err = src.vector(n.outNorm, c.Hidden); err != nil {
		return err
	}
	if src.has(n.output) {
		if m.output, err = src.matrix(n.output, c.VocabSize, c.Hidden); err != nil {
			return err
		}
		c.Tied = false
	} else {
		m.output = m.embed
		c.Tied = true
	}
	qDim, kvDim := c.Heads*c.HeadDim, c.KVHeads*c.HeadDim
	c.QKNorm = src.has(fmt.Sprintf(n.qNorm, 0))
	c.AttnBias = src.has(fmt.Sprintf(n.bq, 0))
	m.layers = make([]layer, c.Layers)
	for i := range m.layers {
		w := &m.layers[i]
		name := func(pattern string) string { return fmt.Sprintf(pattern, i) }
		mats := []struct {
			dst        *matrix
			pattern    string
			rows, cols int
		}{
			{&w.wq, n.q, qDim, c.Hidden}, {&w.wk, n.k, kvDim, c.Hidden}, {&w.wv, n.v, kvDim, c.Hidden},
			{&w.wo, n.o, c.Hidden, qDim},
			{&w.gate, n.gate, c.FFN, c.Hidden}, {&w.up, n.up, c.FFN, c.Hidden}, {&w.down, n.down, c.Hidden, c.FFN},
		}
		for _, mt := range mats {
			if *mt.dst, err = src.matrix(name(mt.pattern), mt.rows, mt.cols); err != nil {
				return err
			}
		}
		vecs := []struct {
			dst     *[]float32
			pattern string
			n       int
			want    bool
		}{
			{&w.attnNorm, n.attnNorm, c.Hidden, true}, {&w.ffnNorm, n.ffnNorm, c.Hidden, true},
			{&w.qNorm, n.qNorm, c.HeadDim, c.QKNorm}, {&w.kNorm, n.kNorm, c.HeadDim, c.QKNorm},
			{&w.bq, n.bq, qDim, c.AttnBias}, {&w.bk, n.bk, kvDim, c.AttnBias}, {&w.bv, n.bv, kvDim, c.AttnBias},
		}
		for _, v := range vecs {
			if !v.want {
				continue
			}
			if *v.dst, err = src.vector(name(v.pattern), v.n); err != nil {
				return err
			}
		}
	}
	return nil
}

// missing is the error for an absent tensor.
func missing(name string) error {
	return fmt.Errorf("tensor %s is missing", name)
}

// shapeString prints a shape like [2048 6144].
func shapeString[T int | uint64](dims []T) string {
	s := make([]string, len(dims))
	for i, d := range dims {
		s[i] = fmt.Sprint(d)
	}
	return "[" + strings.Join(s, " ") + "]"
}
