package engine

import (
	"math"

	"github.com/npuchat/npuchat/engine/testmodel"
)

// refForward is an independent float64 transcription of the Hugging Face
// forward pass (LlamaForCausalLM / Qwen3ForCausalLM / MiniCPMForCausalLM)
// over weights in Hugging Face layout: rotate_half RoPE on unpermuted rows,
// each KV head explicitly repeated for its query heads. It returns the
// logits of every position.
func refForward(w *testmodel.Weights, tokens []int) [][]float64 {
	s := w.Shape
	logitDiv := 1.0
	if s.Arch == testmodel.ArchMiniCPM {
		logitDiv = float64(s.Hidden) / float64(s.DimModelBase)
	}
	out := w.Output
	if out == nil {
		out = w.Embed
	}
	var all [][]float64
	for _, xn := range refHidden(w, tokens) {
		logits := make([]float64, s.Vocab)
		for i := range logits {
			for j, x := range xn {
				logits[i] += float64(out[i*s.Hidden+j]) * x / logitDiv
			}
		}
		all = append(all, logits)
	}
	return all
}

// refHidden is the last hidden state of every position, after the final
// norm (what the output projection reads).
func refHidden(w *testmodel.Weights, tokens []int) [][]float64 {
	s := w.Shape
	h, hd := s.Hidden, s.HeadDim
	eps := float64(s.NormEps)
	embScale, resScale := 1.0, 1.0
	if s.Arch == testmodel.ArchMiniCPM {
		embScale = float64(s.ScaleEmb)
		resScale = float64(s.ScaleDepth) / math.Sqrt(float64(s.Layers))
	}
	matmul := func(m []float32, rows, cols int, x []float64) []float64 {
		out := make([]float64, rows)
		for i := range out {
			for j := 0; j < cols; j++ {
				out[i] += float64(m[i*cols+j]) * x[j]
			}
		}
		return out
	}
	norm := func(x []float64, g []float32) []float64 {
		var ss float64
		for _, v := range x {
			ss += v * v
		}
		r := 1 / math.Sqrt(ss/float64(len(x))+eps)
		out := make([]float64, len(x))
		for i, v := range x {
			out[i] = v * r * float64(g[i])
		}
		return out
	}
	rope := func(x []float64, pos int) {
		half := hd / 2
		for i := 0; i < half; i++ {
			theta := float64(pos) * math.Pow(float64(s.RopeTheta), -2*float64(i)/float64(hd))
			c, sn := math.Cos(theta), math.Sin(theta)
			a, b := x[i], x[i+half]
			x[i], x[i+half] = a*c-b*sn, a*sn+b*c
		}
	}
	type kv struct{ k, v [][]float64 } // [pos][head*hd]
	cache := make([]kv, s.Layers)
	var all [][]float64
	for pos, tok := range tokens {
		x := make([]float64, h)
		for j := range x {
			x[j] = float64(w.Embed[tok*h+j]) * embScale
		}
		for l, L := range w.Layers {
			xn := norm(x, L.AttnNorm)
			q := matmul(L.Q, s.Heads*hd, h, xn)
			k := matmul(L.K, s.KVHeads*hd, h, xn)
			v := matmul(L.V, s.KVHeads*hd, h, xn)
			for hh := 0; hh < s.Heads; hh++ {
				if L.QNorm != nil {
					copy(q[hh*hd:], norm(q[hh*hd:(hh+1)*hd], L.QNorm))
				}
				rope(q[hh*hd:(hh+1)*hd], pos)
			}
			for hh := 0; hh < s.KVHeads; hh++ {
				if L.KNorm != nil {
					copy(k[hh*hd:], norm(k[hh*hd:(hh+1)*hd], L.KNorm))
				}
				rope(k[hh*hd:(hh+1)*hd], pos)
			}
			cache[l].k = append(cache[l].k, k)
			cache[l].v = append(cache[l].v, v)
			// repeat_kv: query head hh reads KV head hh / (Heads/KVHeads)
			att := make([]float64, s.Heads*hd)
			for hh := 0; hh < s.Heads; hh++ {
				g := hh / (s.Heads / s.KVHeads)
				scores := make([]float64, pos+1)
				mx := math.Inf(-1)
				for t := 0; t <= pos; t++ {
					var d float64
					for j := 0; j < hd; j++ {
						d += q[hh*hd+j] * cache[l].k[t][g*hd+j]
					}
					scores[t] = d / math.Sqrt(float64(hd))
					mx = math.Max(mx, scores[t])
				}
				var sum float64
				for t := range scores {
					scores[t] = math.Exp(scores[t] - mx)
					sum += scores[t]
				}
				for t := range scores {
					for j := 0; j < hd; j++ {
						att[hh*hd+j] += scores[t] / sum * cache[l].v[t][g*hd+j]
					}
				}
			}
			o := matmul(L.O, h, s.Heads*hd, att)
			for j := range x {
				x[j] += o[j] * resScale
			}
			xn = norm(x, L.FFNNorm)
			gate := matmul(L.Gate, s.FFN, h, xn)
			up := matmul(L.Up, s.FFN, h, xn)
			for j := range gate {
				gate[j] = gate[j] / (1 + math.Exp(-gate[j])) * up[j]
			}
			d := matmul(L.Down, h, s.FFN, gate)
			for j := range x {
				x[j] += d[j] * resScale
			}
		}
		all = append(all, norm(x, w.OutputNorm))
	}
	return all
}
