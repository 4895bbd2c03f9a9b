package oflm

import (
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"regexp"
	"sort"
	"strconv"

	"github.com/npuchat/npuchat/engine/q4nx"
)

// What happens to each source tensor.
type action int

const (
	actCopy   action = iota // bytes as they are (checked on the way)
	actGather               // rows moved (and repeated) inside the Q4NX chunks
	actDrop                 // a unit q/k norm the port injected
)

// step is one source tensor and what becomes of it.
type step struct {
	src    stTensor
	act    action
	packed bool  // Q4NX chunks (checked for Q4_0 origin on the way)
	rows   int   // for a matrix: the source's rows and columns
	cols   int   //
	from   []int // actGather: the source row of each output row
	out    stTensor
}

// plan lists every tensor of the output in source order.
type plan struct {
	steps []step
	total int64 // bytes of the output container
}

var layerTensor = regexp.MustCompile(`^model\.layers\.(\d+)\.(.+)$`)

// makePlan checks the source container against its config.json and decides
// every tensor's fate. kvHeads is the KV head count to write.
func makePlan(f *os.File, h *stHeader, s *shape, kvHeads int, o Options) (*plan, error) {
	if kvHeads%s.KVHeads != 0 || s.Heads%kvHeads != 0 {
		return nil, fmt.Errorf("cannot write %d KV heads from %d: the count must be a multiple of the source's and divide the %d attention heads", kvHeads, s.KVHeads, s.Heads)
	}
	rep := kvHeads / s.KVHeads
	permuted := o.SourceRows != RowsHF
	hd := s.HeadDim
	type matrixShape struct{ rows, cols int }
	layerMatrices := map[string]matrixShape{
		"self_attn.q_proj.weight": {s.Heads * hd, s.Hidden},
		"self_attn.k_proj.weight": {s.KVHeads * hd, s.Hidden},
		"self_attn.v_proj.weight": {s.KVHeads * hd, s.Hidden},
		"self_attn.o_proj.weight": {s.Hidden, s.Heads * hd},
		"mlp.gate_proj.weight":    {s.FFN, s.Hidden},
		"mlp.up_proj.weight":      {s.FFN, s.Hidden},
		"mlp.down_proj.weight":    {s.Hidden, s.FFN},
	}
	layerVectors := map[string]int{
		"input_layernorm.weight":          s.Hidden,
		"post_attention_layernorm.weight": s.Hidden,
	}
	seen := map[string]bool{}
	p := &plan{}
	for _, t := range h.Tensors {
		st := step{src: t, act: actCopy, out: t}
		name := t.Name
		var err error
		if m := layerTensor.FindStringSubmatch(name); m != nil {
			layer, _ := strconv.Atoi(m[1])
			if layer >= s.Layers {
				return nil, fmt.Errorf("tensor %s: config.json has %d layers", name, s.Layers)
			}
			part := m[2]
			switch ms, isMatrix := layerMatrices[part]; {
			case isMatrix:
				st.packed, st.rows, st.cols = true, ms.rows, ms.cols
				err = checkPacked(t, ms.rows, ms.cols)
				switch {
				case part == "self_attn.q_proj.weight" && permuted:
					st.act, st.from = actGather, qkRows(s.Heads, hd, 1, true)
				case part == "self_attn.k_proj.weight" && (permuted || rep > 1):
					st.act, st.from = actGather, qkRows(s.KVHeads, hd, rep, permuted)
					if o.mut.tileKV {
						st.from = tiledRows(s.KVHeads, hd, rep, permuted)
					}
				case part == "self_attn.v_proj.weight" && rep > 1:
					st.act, st.from = actGather, qkRows(s.KVHeads, hd, rep, false)
					if o.mut.tileKV {
						st.from = tiledRows(s.KVHeads, hd, rep, false)
					}
				}
			case layerVectors[part] > 0:
				err = checkVector(t, layerVectors[part])
			case part == "self_attn.q_norm.weight" || part == "self_attn.k_norm.weight":
				if err = checkVector(t, hd); err == nil {
					err = checkUnit(f, h, t)
				}
				st.act = actDrop
				if o.mut.keepQKNorm {
					st.act = actCopy
				}
			default:
				return nil, fmt.Errorf("tensor %s is not part of a llama layer (q, k, v, o, gate, up, down, two norms): oflm's dense kernels have no place for it", name)
			}
		} else {
			switch name {
			case "model.embed_tokens.weight":
				err = checkFloat(t, []int64{int64(s.Vocab), int64(s.Hidden)})
			case "model.norm.weight":
				err = checkVector(t, s.Hidden)
			case "lm_head.weight":
				st.packed, st.rows, st.cols = true, s.Vocab, s.Hidden
				err = checkPacked(t, s.Vocab, s.Hidden)
			default:
				return nil, fmt.Errorf("tensor %s is not one a llama model has", name)
			}
		}
		if err != nil {
			return nil, err
		}
		seen[name] = true
		if st.act == actDrop {
			p.steps = append(p.steps, st)
			continue
		}
		if st.packed {
			st.out.DType = "I8" // oflm takes chunks from I8 tensors only (Q4nxFile::chunk_bytes)
		}
		if st.act == actGather {
			n := int64(q4nx.PackedBytes(len(st.from), st.cols))
			st.out.End = st.out.Start + n
			st.out.Shape = []int64{n / q4nx.ChunkBytes, q4nx.ChunkBytes}
		}
		p.steps = append(p.steps, st)
	}
	var missing []string
	need := []string{"model.embed_tokens.weight", "model.norm.weight", "lm_head.weight"}
	for i := 0; i < s.Layers; i++ {
		for part := range layerMatrices {
			need = append(need, fmt.Sprintf("model.layers.%d.%s", i, part))
		}
		for part := range layerVectors {
			need = append(need, fmt.Sprintf("model.layers.%d.%s", i, part))
		}
	}
	for _, n := range need {
		if !seen[n] {
			missing = append(missing, n)
		}
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		if len(missing) > 3 {
			missing = append(missing[:3], fmt.Sprintf("and %d more", len(missing)-3))
		}
		return nil, fmt.Errorf("the container lacks %v (config.json says %d layers)", missing, s.Layers)
	}
	return p, nil
}

// checkPacked checks that t holds a rows×cols matrix as Q4_1 Q4NX chunks,
// and says what it holds instead.
func checkPacked(t stTensor, rows, cols int) error {
	switch {
	case t.DType == "BF16" || t.DType == "F16" || t.DType == "F32":
		return fmt.Errorf("tensor %s is stored unquantized (%s): oflm's kernel set for this model reads Q4_1 chunks, and this converter moves quantized rows without quantizing; convert from a Q4_1 pack", t.Name, t.DType)
	case t.DType != "I8" && t.DType != "U8":
		return fmt.Errorf("tensor %s: dtype %s is not a Q4NX matrix", t.Name, t.DType)
	case len(t.Shape) < 2 || t.Shape[len(t.Shape)-1] != q4nx.ChunkBytes:
		return fmt.Errorf("tensor %s: chunks of %v bytes, not Q4_1's %d (a Q8 chunk is 8704 bytes): only Q4_1 tensors are converted", t.Name, t.Shape, q4nx.ChunkBytes)
	case rows%q4nx.RowBlock != 0 || cols%q4nx.Group != 0:
		return fmt.Errorf("tensor %s: a %d×%d matrix cannot be Q4NX-packed", t.Name, rows, cols)
	case t.Size() != int64(q4nx.PackedBytes(rows, cols)):
		return fmt.Errorf("tensor %s: %d bytes, a %d×%d matrix (config.json) packs into %d", t.Name, t.Size(), rows, cols, q4nx.PackedBytes(rows, cols))
	}
	return nil
}

// checkFloat checks that t is a BF16 tensor of the given shape (oflm reads
// the embedding and the norms as BF16).
func checkFloat(t stTensor, shape []int64) error {
	if t.DType != "BF16" {
		return fmt.Errorf("tensor %s is %s: oflm reads it as BF16", t.Name, t.DType)
	}
	if fmt.Sprint(t.Shape) != fmt.Sprint(shape) {
		return fmt.Errorf("tensor %s has shape %v, config.json gives %v", t.Name, t.Shape, shape)
	}
	return nil
}

func checkVector(t stTensor, n int) error { return checkFloat(t, []int64{int64(n)}) }

// checkUnit refuses to drop a q/k norm that is not exactly 1 everywhere:
// only the injected shim may go; a trained norm is part of the model.
func checkUnit(f *os.File, h *stHeader, t stTensor) error {
	b, err := readTensor(f, h, t)
	if err != nil {
		return err
	}
	for i := 0; i+2 <= len(b); i += 2 {
		if v := binary.LittleEndian.Uint16(b[i:]); v != 0x3f80 { // bf16 1.0
			return fmt.Errorf("tensor %s holds %g at %d, not the unit weights the port injected: this is a trained q/k norm, which a llama container cannot carry; refusing to drop it", t.Name, math.Float32frombits(uint32(v)<<16), i/2)
		}
	}
	return nil
}
