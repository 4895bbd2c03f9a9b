package testmodel

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"
)

func TestHalfConversions(t *testing.T) {
	cases := []struct {
		f   float32
		f16 uint16
		bf  uint16
	}{
		{0, 0, 0},
		{1, 0x3c00, 0x3f80},
		{-2, 0xc000, 0xc000},
		{65504, 0x7bff, 0x4780},
		{1e-7, 0x0002, 0x33d7},          // half subnormal
		{1.0009765625, 0x3c01, 0x3f80},  // exact in half; bf16 rounds down
		{1.00048828125, 0x3c00, 0x3f80}, // half tie to even (down)
		{1.00146484375, 0x3c02, 0x3f80}, // half tie to even (up)
		{float32(math.Inf(1)), 0x7c00, 0x7f80},
	}
	for _, c := range cases {
		if got := f32ToF16(c.f); got != c.f16 {
			t.Errorf("f32ToF16(%g) = %#04x, want %#04x", c.f, got, c.f16)
		}
		if got := f32ToBF16(c.f); got != c.bf {
			t.Errorf("f32ToBF16(%g) = %#04x, want %#04x", c.f, got, c.bf)
		}
	}
	for h := 0; h < 0x7c00; h++ { // every finite non-negative half round-trips
		if got := f32ToF16(f16ToF32(uint16(h))); got != uint16(h) {
			t.Fatalf("half %#04x -> %g -> %#04x", h, f16ToF32(uint16(h)), got)
		}
	}
}

// TestQuantizeReference checks block layouts against values worked out by
// hand from ggml's quantize_row_*_ref.
func TestQuantizeReference(t *testing.T) {
	x := make([]float32, QK)
	for i := range x {
		x[i] = float32(i - 8) // -8 .. 23
	}
	// Q8_0: d = 23/127, q = round(x/d).
	b, err := Encode(Q8_0, x, QK)
	if err != nil {
		t.Fatal(err)
	}
	if d := f16ToF32(binary.LittleEndian.Uint16(b)); d != f16ToF32(f32ToF16(float32(23)/127)) {
		t.Errorf("q8_0 d = %g", d)
	}
	if q := int8(b[2+31]); q != 127 {
		t.Errorf("q8_0 q[31] = %d, want 127", q)
	}
	if q := int8(b[2+0]); q != int8(math.Round(float64(float32(-8)*(1/(float32(23)/127))))) {
		t.Errorf("q8_0 q[0] = %d", q)
	}
	// Q4_0: max-magnitude value 23, d = 23/-8; x=23 -> 0, x=-8 -> (int)(-8/d+8.5)=(int)(11.28..)=11.
	b, _ = Encode(Q4_0, x, QK)
	if b[2+15]>>4 != 0 { // element 31 (=23) is the high nibble of byte 15
		t.Errorf("q4_0 element 31 = %d, want 0", b[2+15]>>4)
	}
	if b[2+0]&0x0f != 11 {
		t.Errorf("q4_0 element 0 = %d, want 11", b[2+0]&0x0f)
	}
	// Q4_1: min -8, d = 31/15; element 0 -> 0, element 31 -> 15, element 16 (=8) -> (int)(16/d+.5)=8.
	b, _ = Encode(Q4_1, x, QK)
	if m := f16ToF32(binary.LittleEndian.Uint16(b[2:])); m != -8 {
		t.Errorf("q4_1 m = %g", m)
	}
	if b[4]&0x0f != 0 || b[4+15]>>4 != 15 || b[4]>>4 != 8 {
		t.Errorf("q4_1 nibbles: byte0 %#x byte15 %#x", b[4], b[4+15])
	}
	for _, typ := range []TensorType{F32, F16, BF16, Q8_0, Q4_0, Q4_1} {
		b, err := Encode(typ, x, QK)
		if err != nil {
			t.Fatal(err)
		}
		y, err := Decode(typ, b, len(x))
		if err != nil {
			t.Fatal(err)
		}
		tol := map[TensorType]float64{F32: 0, F16: 0, BF16: 0, Q8_0: 0.1, Q4_0: 1.5, Q4_1: 1.1}[typ]
		for i := range x {
			if math.Abs(float64(x[i]-y[i])) > tol {
				t.Errorf("%s: x[%d] = %g decodes to %g", typ, i, x[i], y[i])
			}
		}
	}
}

func TestPermuteQK(t *testing.T) {
	// One head of dim 4, rows of length 1: HF rows [a0 a1 b0 b1] (rotate_half
	// pairs (a0,b0), (a1,b1)) become [a0 b0 a1 b1].
	x := []float32{10, 11, 20, 21, 30, 31, 40, 41}
	got := PermuteQK(x, 2, 4, 1)
	want := []float32{10, 20, 11, 21, 30, 40, 31, 41}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("PermuteQK = %v, want %v", got, want)
		}
	}
	if back := UnpermuteQK(got, 2, 4, 1); !equal(back, x) {
		t.Fatalf("UnpermuteQK = %v, want %v", back, x)
	}
}

// TestPackQ4NXLayout checks bytes of one chunk against the converter's
// einops patterns worked by hand.
func TestPackQ4NXLayout(t *testing.T) {
	rows, cols := 32, 64 // padded to 256 columns
	x := make([]float32, rows*cols)
	for r := 0; r < rows; r++ {
		for c := 0; c < cols; c++ {
			// Every 32-group spans 0..15 exactly: min 0, d 1, nibble = value.
			v := (r + c) % 16
			if c%32 == 0 {
				v = 0
			} else if c%32 == 1 {
				v = 15
			}
			x[r*cols+c] = float32(v)
		}
	}
	b, err := PackQ4NX(x, cols)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) != Q4NXChunkSize {
		t.Fatalf("len = %d, want one chunk", len(b))
	}
	le := binary.LittleEndian
	// Scales: index c*32+r; group 0 and 1 are real (d=1), 2..7 padding (0).
	if d := bf16ToF32(le.Uint16(b[2*(1*32+5):])); d != 1 {
		t.Errorf("scale group 1 row 5 = %g, want 1", d)
	}
	if d := le.Uint16(b[2*(2*32+5):]); d != 0 {
		t.Errorf("padding scale = %#x, want 0", d)
	}
	nib := b[1024:]
	// Byte g*2048 + col*8 + k: rows g*16+2k (low) and g*16+2k+1 (high).
	g, col, k := 1, 7, 3
	r0 := g*16 + 2*k
	want := byte((r0+col)%16) | byte((r0+1+col)%16)<<4
	if got := nib[g*2048+col*8+k]; got != want {
		t.Errorf("nibble byte = %#x, want %#x", got, want)
	}
	if got := nib[0*2048+100*8+0]; got != 0 { // padded column
		t.Errorf("padded nibble byte = %#x, want 0", got)
	}
	y, err := UnpackQ4NX(b, rows, cols)
	if err != nil {
		t.Fatal(err)
	}
	if !equal(x, y) {
		t.Errorf("unpack differs from the exactly representable input")
	}
}

func TestWritersDeterministic(t *testing.T) {
	for _, s := range []Shape{MiniCPM5Small(), Qwen3Small(), MiniCPMSmall()} {
		t.Run(string(s.Arch), func(t *testing.T) {
			dir := t.TempDir()
			w1, err := Random(7, s)
			if err != nil {
				t.Fatal(err)
			}
			w2, _ := Random(7, s)
			p1, p2 := filepath.Join(dir, "a.gguf"), filepath.Join(dir, "b.gguf")
			if err := WriteGGUF(p1, w1, Q4_1); err != nil {
				t.Fatal(err)
			}
			if err := WriteGGUF(p2, w2, Q4_1); err != nil {
				t.Fatal(err)
			}
			a, _ := os.ReadFile(p1)
			b, _ := os.ReadFile(p2)
			if !bytes.Equal(a, b) || string(a[:4]) != "GGUF" {
				t.Fatal("same seed gave different GGUF files")
			}
			if err := WriteHF(filepath.Join(dir, "hf"), w1, HFOptions{Shards: 3}); err != nil {
				t.Fatal(err)
			}
			var idx struct {
				WeightMap map[string]string `json:"weight_map"`
			}
			raw, err := os.ReadFile(filepath.Join(dir, "hf", "model.safetensors.index.json"))
			if err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(raw, &idx); err != nil || len(idx.WeightMap) == 0 {
				t.Fatalf("index: %v %s", err, raw)
			}
			if s.Arch != ArchMiniCPM {
				if err := WriteFLM(filepath.Join(dir, "flm"), w1, FLMOptions{ReplicateKV: 2, InjectUnitQKNorm: true}); err != nil {
					t.Fatal(err)
				}
				hdr := readSafetensorsHeader(t, filepath.Join(dir, "flm", "model.q4nx"))
				q := hdr["model.layers.0.self_attn.k_proj.weight"].(map[string]any)
				if q["dtype"] != "I8" {
					t.Errorf("k_proj dtype %v", q["dtype"])
				}
				if _, ok := hdr["model.layers.1.self_attn.q_norm.weight"]; !ok {
					t.Errorf("no injected q_norm")
				}
			}
		})
	}
}

func TestReplicateKV(t *testing.T) {
	w, _ := Random(1, MiniCPM5Small())
	r, err := w.ReplicateKV(4)
	if err != nil {
		t.Fatal(err)
	}
	n := w.Shape.HeadDim * w.Shape.Hidden
	for h := 0; h < 8; h++ {
		if !equal(r.Layers[0].K[h*n:(h+1)*n], w.Layers[0].K[(h/4)*n:(h/4+1)*n]) {
			t.Fatalf("replicated head %d is not original head %d", h, h/4)
		}
	}
	if _, err := w.ReplicateKV(3); err == nil {
		t.Error("2x3 KV heads into 16 heads accepted")
	}
}

func TestVocab(t *testing.T) {
	v := NewVocab(400)
	if v.Size() != 400 || len(v.Merges) != 141 {
		t.Fatalf("size %d merges %d", v.Size(), len(v.Merges))
	}
	if v.Tokens[v.EOS] != TokenIMEnd || v.Types[v.EOS] != 3 {
		t.Errorf("eos %q", v.Tokens[v.EOS])
	}
	seen := map[string]bool{}
	for _, tok := range v.Tokens {
		if seen[tok] {
			t.Fatalf("duplicate token %q", tok)
		}
		seen[tok] = true
	}
}

func readSafetensorsHeader(t *testing.T, path string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	n := binary.LittleEndian.Uint64(b)
	var hdr map[string]any
	if err := json.Unmarshal(b[8:8+n], &hdr); err != nil {
		t.Fatal(err)
	}
	return hdr
}

func equal(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
