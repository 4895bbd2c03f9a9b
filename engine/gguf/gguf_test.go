package gguf

import (
	"bytes"
	"encoding/binary"
	"reflect"
	"strings"
	"testing"

	"github.com/npuchat/npuchat/engine/quant"
)

func sample(t testing.TB) []byte {
	t.Helper()
	var buf bytes.Buffer
	meta := []KV{
		{"general.architecture", "llama"},
		{"llama.block_count", uint32(2)},
		{"llama.rope.freq_base", float32(10000)},
		{"tokenizer.ggml.tokens", []string{"a", "b", "<s>"}},
		{"tokenizer.ggml.token_type", []int32{1, 1, 3}},
		{"tokenizer.ggml.scores", []float32{0, -1, 0}},
		{"tokenizer.ggml.add_bos_token", true},
		{"u8", uint8(7)}, {"i8", int8(-7)}, {"u16", uint16(700)}, {"i16", int16(-700)},
		{"u64", uint64(1 << 40)}, {"i64", int64(-1 << 40)}, {"f64", 0.25},
	}
	f32 := make([]byte, 4*64)
	for i := 0; i < 64; i++ {
		binary.LittleEndian.PutUint32(f32[4*i:], uint32(i))
	}
	tensors := []WriteTensor{
		{Name: "a", Dims: []uint64{64}, Type: quant.F32, Data: f32},
		{Name: "b", Dims: []uint64{32, 2}, Type: quant.Q8_0, Data: bytes.Repeat([]byte{1}, 68)},
	}
	if err := Write(&buf, meta, tensors); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestRoundTrip(t *testing.T) {
	data := sample(t)
	f, err := Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"general.architecture":         "llama",
		"llama.block_count":            uint32(2),
		"llama.rope.freq_base":         float32(10000),
		"tokenizer.ggml.tokens":        []string{"a", "b", "<s>"},
		"tokenizer.ggml.token_type":    []int32{1, 1, 3},
		"tokenizer.ggml.scores":        []float32{0, -1, 0},
		"tokenizer.ggml.add_bos_token": true,
		"u8":                           uint8(7), "i8": int8(-7), "u16": uint16(700), "i16": int16(-700),
		"u64": uint64(1 << 40), "i64": int64(-1 << 40), "f64": 0.25,
	}
	if !reflect.DeepEqual(f.Metadata, want) {
		t.Errorf("metadata\n got %#v\nwant %#v", f.Metadata, want)
	}
	if f.Keys[0] != "general.architecture" || len(f.Keys) != len(want) {
		t.Errorf("keys %v", f.Keys)
	}
	if f.DataOffset%32 != 0 {
		t.Errorf("data offset %d not aligned", f.DataOffset)
	}
	b, _ := f.Tensor("b")
	if b.Size != 68 || b.Offset != 256 || !reflect.DeepEqual(b.Dims, []uint64{32, 2}) {
		t.Errorf("tensor b %+v", b)
	}
	a, _ := f.Tensor("a")
	d, err := f.Data(data, a)
	if err != nil || binary.LittleEndian.Uint32(d[4*63:]) != 63 {
		t.Errorf("tensor a data: %v", err)
	}
	if n, ok := f.Uint("llama.block_count"); !ok || n != 2 {
		t.Errorf("Uint = %d %v", n, ok)
	}
}

// header builds a raw header for the error cases.
func header(version uint32, nTensors, nKV uint64, rest ...[]byte) []byte {
	b := []byte(Magic)
	b = binary.LittleEndian.AppendUint32(b, version)
	b = binary.LittleEndian.AppendUint64(b, nTensors)
	b = binary.LittleEndian.AppendUint64(b, nKV)
	for _, r := range rest {
		b = append(b, r...)
	}
	return b
}

func str(s string) []byte {
	return append(binary.LittleEndian.AppendUint64(nil, uint64(len(s))), s...)
}

func tensorInfo(name string, dims []uint64, typ uint32, off uint64) []byte {
	b := str(name)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(dims)))
	for _, d := range dims {
		b = binary.LittleEndian.AppendUint64(b, d)
	}
	b = binary.LittleEndian.AppendUint32(b, typ)
	return binary.LittleEndian.AppendUint64(b, off)
}

func TestBadFiles(t *testing.T) {
	good := sample(t)
	cases := []struct {
		name string
		data []byte
		want string
	}{
		{"empty", nil, "wrong magic"},
		{"wrong magic", append([]byte("GGML"), good[4:]...), "wrong magic"},
		{"version 1", header(1, 0, 0), "version 1"},
		{"big-endian", header(3<<24, 0, 0), "big-endian"},
		{"2^60 tensors", header(3, 1<<60, 0), "more than the file can hold"},
		{"2^60 metadata", header(3, 0, 1<<60), "more than the file can hold"},
		{"truncated", good[:len(good)-40], "tensor b"},
		{"truncated header", good[:300], "truncated"},
		{"huge string", header(3, 0, 1, binary.LittleEndian.AppendUint64(nil, 1<<62), make([]byte, 20)), "truncated"},
		{"huge array", header(3, 0, 1, str("k"), binary.LittleEndian.AppendUint32(nil, typeArray),
			binary.LittleEndian.AppendUint32(nil, typeUint32), binary.LittleEndian.AppendUint64(nil, 1<<61)), "longer than the rest"},
		{"bad value type", header(3, 0, 1, str("k"), binary.LittleEndian.AppendUint32(nil, 99)), "unknown value type"},
		{"out of bounds", header(3, 1, 0, tensorInfo("w", []uint64{32}, 0, 1<<20), make([]byte, 64)), "tensor w"},
		{"absurd shape", header(3, 1, 0, tensorInfo("w", []uint64{1 << 40, 1 << 40}, 0, 0), make([]byte, 64)), "absurd shape"},
		{"five dims", header(3, 1, 0, tensorInfo("w", []uint64{1, 1, 1, 1, 1}, 0, 0), make([]byte, 64)), "dimensions"},
		{"partial block", header(3, 1, 0, tensorInfo("w", []uint64{33}, 8, 0), make([]byte, 64)), "block size"},
		{"unaligned", header(3, 1, 0, tensorInfo("w", []uint64{1}, 0, 3), make([]byte, 64)), "not aligned"},
		{"duplicate", header(3, 2, 0, tensorInfo("w", []uint64{1}, 0, 0), tensorInfo("w", []uint64{1}, 0, 32), make([]byte, 64)), "twice"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse(c.data)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("Parse error = %v, want it to mention %q", err, c.want)
			}
		})
	}
}

func TestUnsupportedTypeListed(t *testing.T) {
	// A tensor of a type the engine cannot compute is listed with Size -1,
	// and reading it is an error naming the tensor and the type.
	data := header(3, 1, 0, tensorInfo("w", []uint64{256}, 11, 0), make([]byte, 64))
	f, err := Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.Data(data, f.Tensors[0])
	if err == nil || !strings.Contains(err.Error(), "w") || !strings.Contains(err.Error(), "Q3_K") {
		t.Errorf("Data error = %v", err)
	}
}

func FuzzParse(f *testing.F) {
	f.Add(sample(f))
	f.Add(header(3, 1, 0, tensorInfo("w", []uint64{32}, 0, 0), make([]byte, 160)))
	f.Add(header(3, 0, 1, str("k"), binary.LittleEndian.AppendUint32(nil, typeArray),
		binary.LittleEndian.AppendUint32(nil, typeString), binary.LittleEndian.AppendUint64(nil, 2), str("x"), str("y")))
	f.Fuzz(func(t *testing.T, data []byte) {
		g, err := Parse(data)
		if err != nil {
			return
		}
		for _, ti := range g.Tensors {
			if ti.Size >= 0 {
				if _, err := g.Data(data, ti); err != nil {
					t.Fatalf("parsed tensor %s cannot be read: %v", ti.Name, err)
				}
			}
		}
	})
}
