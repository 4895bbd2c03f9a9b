package engine

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"math"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/npuchat/npuchat/engine/gguf"
	"github.com/npuchat/npuchat/engine/quant"
	"github.com/npuchat/npuchat/engine/testmodel"
)

// TestBlockTypesMatchLlamaCpp checks the decoders of the block types the
// test model writers do not produce (Q4_K, Q5_K, Q6_K, Q5_0, Q5_1; Q4_0
// and Q8_0 as calibration) against llama.cpp: a model's matrices are
// encoded in the type, and llama.cpp runs both that file and an F32 file
// of the weights as the engine decodes them. Where the decodings agree the
// two runs differ only by ggml's rounding of activations to 8 bits (about
// 2% of the logit scale on these models); a wrong scale, bit or nibble
// order moves the logits by their whole scale (≈100%, checked by breaking
// the decoders by hand). The engine itself must match llama.cpp on the F32
// file within float32 rounding.
func TestBlockTypesMatchLlamaCpp(t *testing.T) {
	oracle := testmodel.LlamaRef(t)
	w := randomWeights(t, 21, testmodel.MiniCPM5Small())
	dir := t.TempDir()
	base := filepath.Join(dir, "base.gguf")
	if err := testmodel.WriteGGUF(base, w, testmodel.F32); err != nil {
		t.Fatal(err)
	}
	llama := func(p string) [][]float32 {
		cmd := exec.Command(oracle, "-model", p, "-tokens", "3,290,17,256,42", "-steps", "1", "-threads", "1")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%v %s", err, stderr.String())
		}
		var res struct{ Logits [][]float32 }
		if err := json.Unmarshal(out, &res); err != nil || len(res.Logits) != 5 {
			t.Fatalf("llama.cpp output: %v, %d rows", err, len(res.Logits))
		}
		return res.Logits
	}
	rel := func(a, b [][]float32) float64 {
		var d, s float64
		for i := range a {
			for j := range a[i] {
				d = math.Max(d, math.Abs(float64(a[i][j]-b[i][j])))
				s = math.Max(s, math.Abs(float64(b[i][j])))
			}
		}
		return d / s
	}
	for _, typ := range []quant.Type{quant.Q4_0, quant.Q8_0, quant.Q4_K, quant.Q5_K, quant.Q6_K, quant.Q5_0, quant.Q5_1} {
		p := filepath.Join(dir, typ.String()+".gguf")
		pf := filepath.Join(dir, typ.String()+"-f32.gguf")
		rewriteGGUF(t, base, p, func(meta map[string]any, ts []gguf.WriteTensor) []gguf.WriteTensor {
			for i := range ts {
				if len(ts[i].Dims) != 2 {
					continue
				}
				rows, cols := int(ts[i].Dims[1]), int(ts[i].Dims[0])
				var data []byte
				for row := 0; row < rows; row++ {
					x := make([]float32, cols)
					quant.Dequantize(quant.F32, ts[i].Data[row*cols*4:(row+1)*cols*4], x)
					enc := encodeRow(typ, x)
					// the encoding must be close to x
					y := make([]float32, cols)
					quant.Dequantize(typ, enc, y)
					var e2, n2 float64
					for k := range x {
						e2 += float64((x[k] - y[k]) * (x[k] - y[k]))
						n2 += float64(x[k] * x[k])
					}
					if e2 > 0.02*n2 {
						t.Fatalf("%s %s row %d: relative squared error %g", typ, ts[i].Name, row, e2/n2)
					}
					data = append(data, enc...)
				}
				ts[i].Type, ts[i].Data = typ, data
			}
			return ts
		})
		// the same weights, decoded by the engine, as F32
		rewriteGGUF(t, p, pf, func(meta map[string]any, ts []gguf.WriteTensor) []gguf.WriteTensor {
			for i := range ts {
				if ts[i].Type != typ {
					continue
				}
				n := int(ts[i].Dims[0] * ts[i].Dims[1])
				y := make([]float32, n)
				rb, _ := typ.RowBytes(int(ts[i].Dims[0]))
				cols := int(ts[i].Dims[0])
				for row := 0; row < n/cols; row++ {
					quant.Dequantize(typ, ts[i].Data[row*rb:(row+1)*rb], y[row*cols:(row+1)*cols])
				}
				b := make([]byte, 4*n)
				for k, v := range y {
					binary.LittleEndian.PutUint32(b[4*k:], math.Float32bits(v))
				}
				ts[i].Type, ts[i].Data = quant.F32, b
			}
			return ts
		})
		lq, lf := llama(p), llama(pf)
		mine := logitsOf(t, loadT(t, p, LoadOptions{Threads: 1, FloatActivations: true}), []int{3, 290, 17, 256, 42})
		dq, de := rel(lq, lf), rel(mine, lf)
		t.Logf("%s: llama.cpp on the %s file vs on the engine's decoding %.3g; engine vs llama.cpp on its decoding %.3g", typ, typ, dq, de)
		if dq > 0.06 {
			t.Errorf("%s: llama.cpp reads the file as a different model than the engine (relative logit difference %.3g)", typ, dq)
		}
		if de > 1e-5 {
			t.Errorf("%s: engine differs from llama.cpp on the same float weights by %.3g", typ, de)
		}
	}
}

// The encoders below quantize rows simply (not with ggml's search for the
// best scales) into valid blocks of each type, packed as ggml-quants.c
// packs them, so that the decoders can be checked against llama.cpp.

func rnd(x float32) int { return int(math.Round(float64(x))) }

func clampi(v, lo, hi int) int { return max(lo, min(hi, v)) }

func putScalesK(scales []byte, ls, lm [8]int) {
	for j := 0; j < 8; j++ {
		if j < 4 {
			scales[j] = byte(ls[j])
			scales[j+4] = byte(lm[j])
		} else {
			scales[j+4] = byte(ls[j]&0xF) | byte(lm[j]&0xF)<<4
			scales[j-4] |= byte(ls[j]>>4) << 6
			scales[j] |= byte(lm[j]>>4) << 6
		}
	}
}

// encodeRow quantizes one row with a simple (not ggml's) quantizer into a
// valid block encoding of typ.
func encodeRow(typ quant.Type, x []float32) []byte {
	rb, _ := typ.RowBytes(len(x))
	out := make([]byte, rb)
	le := binary.LittleEndian
	switch typ {
	case quant.Q8_0:
		quant.QuantizeQ8_0(x, out)
	case quant.Q4_0:
		for b := 0; b < len(x)/32; b++ {
			xs, blk := x[b*32:b*32+32], out[b*18:(b+1)*18]
			var amax float32
			for _, v := range xs {
				amax = max(amax, float32(math.Abs(float64(v))))
			}
			d := quant.F16ToF32(quant.F32ToF16(amax / 7))
			le.PutUint16(blk, quant.F32ToF16(d))
			for j := 0; j < 16; j++ {
				q0, q1 := 8, 8
				if d != 0 {
					q0, q1 = clampi(rnd(xs[j]/d)+8, 0, 15), clampi(rnd(xs[j+16]/d)+8, 0, 15)
				}
				blk[2+j] = byte(q0) | byte(q1)<<4
			}
		}
	case quant.Q5_0, quant.Q5_1:
		bb := typ.BlockBytes()
		for b := 0; b < len(x)/32; b++ {
			xs, blk := x[b*32:b*32+32], out[b*bb:(b+1)*bb]
			var q [32]int
			off := 2
			if typ == quant.Q5_0 {
				var amax float32
				for _, v := range xs {
					amax = max(amax, float32(math.Abs(float64(v))))
				}
				d := quant.F16ToF32(quant.F32ToF16(amax / 15))
				le.PutUint16(blk, quant.F32ToF16(d))
				for i, v := range xs {
					if d != 0 {
						q[i] = clampi(rnd(v/d)+16, 0, 31)
					}
				}
			} else {
				mn, mx := xs[0], xs[0]
				for _, v := range xs {
					mn, mx = min(mn, v), max(mx, v)
				}
				d := quant.F16ToF32(quant.F32ToF16((mx - mn) / 31))
				m := quant.F16ToF32(quant.F32ToF16(mn))
				le.PutUint16(blk, quant.F32ToF16(d))
				le.PutUint16(blk[2:], quant.F32ToF16(m))
				off = 4
				for i, v := range xs {
					if d != 0 {
						q[i] = clampi(rnd((v-m)/d), 0, 31)
					}
				}
			}
			var qh uint32
			for j := 0; j < 16; j++ {
				blk[off+4+j] = byte(q[j]&0xF) | byte(q[j+16]&0xF)<<4
				qh |= uint32(q[j]>>4) << j
				qh |= uint32(q[j+16]>>4) << (j + 16)
			}
			le.PutUint32(blk[off:], qh)
		}
	case quant.Q4_K, quant.Q5_K:
		levels := 15
		bb := 144
		if typ == quant.Q5_K {
			levels, bb = 31, 176
		}
		for b := 0; b < len(x)/256; b++ {
			xs, blk := x[b*256:b*256+256], out[b*bb:(b+1)*bb]
			var sc, mins [8]float32
			var maxSc, maxMin float32
			for j := 0; j < 8; j++ {
				mn, mx := float32(0), xs[32*j]
				for _, v := range xs[32*j : 32*j+32] {
					mn, mx = min(mn, v), max(mx, v)
				}
				sc[j], mins[j] = (mx-mn)/float32(levels), -mn
				maxSc, maxMin = max(maxSc, sc[j]), max(maxMin, mins[j])
			}
			d := quant.F16ToF32(quant.F32ToF16(maxSc / 63))
			dmin := quant.F16ToF32(quant.F32ToF16(maxMin / 63))
			le.PutUint16(blk, quant.F32ToF16(d))
			le.PutUint16(blk[2:], quant.F32ToF16(dmin))
			var ls, lm [8]int
			for j := 0; j < 8; j++ {
				if d > 0 {
					ls[j] = clampi(rnd(sc[j]/d), 0, 63)
				}
				if dmin > 0 {
					lm[j] = clampi(rnd(mins[j]/dmin), 0, 63)
				}
			}
			putScalesK(blk[4:16], ls, lm)
			var L [256]int
			for j := 0; j < 8; j++ {
				dd, dm := d*float32(ls[j]), dmin*float32(lm[j])
				for i := 0; i < 32; i++ {
					if dd != 0 {
						L[32*j+i] = clampi(rnd((xs[32*j+i]+dm)/dd), 0, levels)
					}
				}
			}
			if typ == quant.Q4_K {
				q := blk[16:]
				for n := 0; n < 256; n += 64 {
					for l := 0; l < 32; l++ {
						q[n/2+l] = byte(L[n+l]) | byte(L[n+32+l])<<4
					}
				}
			} else {
				qh, ql := blk[16:48], blk[48:176]
				m1, m2 := byte(1), byte(2)
				for n := 0; n < 256; n += 64 {
					for j := 0; j < 32; j++ {
						l1, l2 := L[n+j], L[n+j+32]
						if l1 > 15 {
							l1 -= 16
							qh[j] |= m1
						}
						if l2 > 15 {
							l2 -= 16
							qh[j] |= m2
						}
						ql[n/2+j] = byte(l1) | byte(l2)<<4
					}
					m1 <<= 2
					m2 <<= 2
				}
			}
		}
	case quant.Q6_K:
		for b := 0; b < len(x)/256; b++ {
			xs, blk := x[b*256:b*256+256], out[b*210:(b+1)*210]
			var sc [16]float32
			var maxAbs float32
			for j := 0; j < 16; j++ {
				var amax float32
				for _, v := range xs[16*j : 16*j+16] {
					amax = max(amax, float32(math.Abs(float64(v))))
				}
				sc[j] = amax / 31
				maxAbs = max(maxAbs, sc[j])
			}
			d := quant.F16ToF32(quant.F32ToF16(maxAbs / 127))
			le.PutUint16(blk[208:], quant.F32ToF16(d))
			var L [256]int
			for j := 0; j < 16; j++ {
				s := 0
				if d > 0 {
					s = clampi(rnd(sc[j]/d), -128, 127)
				}
				blk[192+j] = byte(int8(s))
				dd := d * float32(s)
				for i := 0; i < 16; i++ {
					q := 0
					if dd != 0 {
						q = clampi(rnd(xs[16*j+i]/dd), -32, 31)
					}
					L[16*j+i] = q + 32
				}
			}
			ql, qh := blk[0:128], blk[128:192]
			for j := 0; j < 256; j += 128 {
				for l := 0; l < 32; l++ {
					q1, q2, q3, q4 := L[j+l]&0xF, L[j+l+32]&0xF, L[j+l+64]&0xF, L[j+l+96]&0xF
					ql[j/2+l] = byte(q1 | q3<<4)
					ql[j/2+l+32] = byte(q2 | q4<<4)
					qh[j/4+l] = byte(L[j+l]>>4 | (L[j+l+32]>>4)<<2 | (L[j+l+64]>>4)<<4 | (L[j+l+96]>>4)<<6)
				}
			}
		}
	}
	return out
}
