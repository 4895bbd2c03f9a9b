package q4nx

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/npuchat/npuchat/engine/quant"
	"github.com/npuchat/npuchat/engine/safetensors"
)

// pack is a step-by-step transcription of the converter's _pack_q4nx
// (keep_block_in_2D false): each einops rearrange becomes an explicit
// array copy in the output's index order. d and m are [rows][cols/32],
// qw is [rows][cols] (0..15 for Q4_1, −8..7 for Q4_0).
func pack(d, m [][]float32, qw [][]int) []byte {
	rows, cols := len(qw), len(qw[0])
	pc := PaddedCols(cols)
	// F.pad with zeros.
	pad := func(x [][]float32, n int) [][]float32 {
		out := make([][]float32, len(x))
		for i := range x {
			out[i] = append(append([]float32(nil), x[i]...), make([]float32, n-len(x[i]))...)
		}
		return out
	}
	d, m = pad(d, pc/32), pad(m, pc/32)
	q := make([][]int, rows)
	for i := range qw {
		q[i] = append(append([]int(nil), qw[i]...), make([]int, pc-cols)...)
	}
	P, Q := rows/32, pc/256
	// d = rearrange(d, '(p r) (q c) -> (p q) (c r)', r=32, c=8)
	dm := func(x [][]float32) [][]float32 {
		out := make([][]float32, P*Q)
		for p := 0; p < P; p++ {
			for qq := 0; qq < Q; qq++ {
				row := make([]float32, 0, 256)
				for c := 0; c < 8; c++ {
					for r := 0; r < 32; r++ {
						row = append(row, x[p*32+r][qq*8+c])
					}
				}
				out[p*Q+qq] = row
			}
		}
		return out
	}
	d2, m2 := dm(d), dm(m)
	// qw = rearrange(qw, '(p r) (q c) -> (p q) r c', r=32, c=256)
	// qw = rearrange(qw, 'n (g r) c -> n g r c', r=16)
	// qw = rearrange(qw, 'n g (r b) c -> n g c r b', b=2)
	// low nibble = b 0, high nibble = b 1; then 'n g c r -> n (g c r)'
	nib := make([][]byte, P*Q)
	for p := 0; p < P; p++ {
		for qq := 0; qq < Q; qq++ {
			var flat []byte
			for g := 0; g < 2; g++ {
				for c := 0; c < 256; c++ {
					for r := 0; r < 8; r++ {
						b0 := int8(q[p*32+g*16+r*2][qq*256+c])
						b1 := int8(q[p*32+g*16+r*2+1][qq*256+c])
						hi := (b1 << 4) & -16 // torch: bitwise_and(left_shift(x, 4), 0xF0) on int8
						flat = append(flat, byte((b0&0x0f)|hi))
					}
				}
			}
			nib[p*Q+qq] = flat
		}
	}
	var out []byte
	for n := 0; n < P*Q; n++ {
		for _, v := range d2[n] {
			out = binary.LittleEndian.AppendUint16(out, quant.F32ToBF16(v))
		}
		for _, v := range m2[n] {
			out = binary.LittleEndian.AppendUint16(out, quant.F32ToBF16(v))
		}
		out = append(out, nib[n]...)
	}
	return out
}

func randomQ(r *rand.Rand, rows, cols int, q40 bool) (d, m [][]float32, qw [][]int) {
	d, m, qw = make([][]float32, rows), make([][]float32, rows), make([][]int, rows)
	for i := 0; i < rows; i++ {
		d[i], m[i], qw[i] = make([]float32, cols/32), make([]float32, cols/32), make([]int, cols)
		for j := range d[i] {
			d[i][j] = quant.F16ToF32(quant.F32ToF16(float32(r.Float64()*0.02 + 0.001)))
			if !q40 {
				m[i][j] = quant.F16ToF32(quant.F32ToF16(float32(-r.Float64() * 0.1)))
			}
		}
		for j := range qw[i] {
			qw[i][j] = r.IntN(16)
			if q40 {
				qw[i][j] -= 8
			}
		}
	}
	return d, m, qw
}

func TestUnpackMatchesConverter(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	for _, tc := range []struct {
		name       string
		rows, cols int
		q40        bool
	}{
		{"Q4_1 64x512", 64, 512, false},
		{"Q4_1 32x320 padded", 32, 320, false},
		{"Q4_0 64x256", 64, 256, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, m, qw := randomQ(r, tc.rows, tc.cols, tc.q40)
			packed := pack(d, m, qw)
			if len(packed) != PackedBytes(tc.rows, tc.cols) {
				t.Fatalf("packed %d bytes, PackedBytes says %d", len(packed), PackedBytes(tc.rows, tc.cols))
			}
			out, signed, err := Unpack(packed, tc.rows, tc.cols)
			if err != nil {
				t.Fatal(err)
			}
			if signed != tc.q40 {
				t.Errorf("signed = %v", signed)
			}
			rb, _ := quant.Q4_1BF16.RowBytes(tc.cols)
			row := make([]float32, tc.cols)
			for i := 0; i < tc.rows; i++ {
				quant.Dequantize(quant.Q4_1BF16, out[i*rb:(i+1)*rb], row)
				for j := 0; j < tc.cols; j++ {
					db := quant.BF16ToF32(quant.F32ToBF16(d[i][j/32]))
					mb := quant.BF16ToF32(quant.F32ToBF16(m[i][j/32]))
					want := db*float32(qw[i][j]) + mb
					if row[j] != want {
						t.Fatalf("w[%d][%d] = %v, want %v (q %d)", i, j, row[j], want, qw[i][j])
					}
				}
			}
		})
	}
}

func TestUnpackErrors(t *testing.T) {
	if _, _, err := Unpack(make([]byte, ChunkBytes), 16, 256); err == nil {
		t.Error("16 rows accepted")
	}
	if _, _, err := Unpack(make([]byte, ChunkBytes-1), 32, 256); err == nil || !strings.Contains(err.Error(), "needs 5120") {
		t.Errorf("short data: %v", err)
	}
}

func q4nxFile(t testing.TB, extra ...safetensors.Tensor) []byte {
	var buf bytes.Buffer
	ts := append([]safetensors.Tensor{
		{Name: "model.layers.0.mlp.up_proj.weight", DType: "I8", Shape: []int{1, ChunkBytes}, Data: make([]byte, ChunkBytes)},
		{Name: "model.norm.weight", DType: "BF16", Shape: []int{2}, Data: []byte{0x80, 0x3f, 0x80, 0x3f}},
	}, extra...)
	if err := safetensors.Write(&buf, ts, nil); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestParse(t *testing.T) {
	f, err := Parse(q4nxFile(t))
	if err != nil {
		t.Fatal(err)
	}
	if !IsPacked(f.Tensors["model.layers.0.mlp.up_proj.weight"]) || IsPacked(f.Tensors["model.norm.weight"]) {
		t.Error("IsPacked wrong")
	}
	bad := q4nxFile(t, safetensors.Tensor{Name: "x", DType: "I8", Shape: []int{2, 3}, Data: make([]byte, 6)})
	if _, err := Parse(bad); err == nil || !strings.Contains(err.Error(), "tensor x") {
		t.Errorf("bad chunk shape: %v", err)
	}
}

func FuzzParse(f *testing.F) {
	f.Add(q4nxFile(f), 32, 256)
	f.Add([]byte("\x10\x00\x00\x00\x00\x00\x00\x00{}              "), 32, 32)
	f.Fuzz(func(t *testing.T, data []byte, rows, cols int) {
		g, err := Parse(data)
		if err != nil {
			return
		}
		for _, tn := range g.Tensors {
			if IsPacked(tn) && rows > 0 && cols > 0 && rows < 1<<12 && cols < 1<<12 {
				Unpack(tn.Data, rows, cols) // must not panic
			}
		}
	})
}
