package safetensors

import (
	"bytes"
	"encoding/binary"
	"reflect"
	"strings"
	"testing"
)

func sample(t testing.TB) []byte {
	var buf bytes.Buffer
	err := Write(&buf, []Tensor{
		{Name: "a", DType: "BF16", Shape: []int{2, 3}, Data: []byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}},
		{Name: "b", DType: "F32", Shape: []int{1}, Data: []byte{0, 0, 128, 63}},
	}, map[string]string{"format": "pt"})
	if err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestRoundTrip(t *testing.T) {
	f, err := Parse(sample(t))
	if err != nil {
		t.Fatal(err)
	}
	a := f.Tensors["a"]
	if a.DType != "BF16" || !reflect.DeepEqual(a.Shape, []int{2, 3}) || a.Data[11] != 12 {
		t.Errorf("a = %+v", a)
	}
	if b := f.Tensors["b"]; !bytes.Equal(b.Data, []byte{0, 0, 128, 63}) {
		t.Errorf("b = %+v", b)
	}
	if f.Metadata["format"] != "pt" || !reflect.DeepEqual(f.Names(), []string{"a", "b"}) {
		t.Errorf("metadata %v names %v", f.Metadata, f.Names())
	}
}

func raw(hdr string, data []byte) []byte {
	b := binary.LittleEndian.AppendUint64(nil, uint64(len(hdr)))
	return append(append(b, hdr...), data...)
}

func TestBadFiles(t *testing.T) {
	good := sample(t)
	cases := []struct {
		name string
		data []byte
		want string
	}{
		{"empty", nil, "shorter"},
		{"huge header", binary.LittleEndian.AppendUint64(nil, 1<<60), "limit"},
		{"header past end", raw("{}", nil)[:9], "truncated"},
		{"not json", raw("GGUF", nil), "JSON"},
		{"truncated data", good[:len(good)-2], "tensor b"},
		{"unknown dtype", raw(`{"w":{"dtype":"Q9","shape":[1],"data_offsets":[0,1]}}`, []byte{0}), "dtype"},
		{"size mismatch", raw(`{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}}`, make([]byte, 4)), "needs 8 bytes"},
		{"absurd shape", raw(`{"w":{"dtype":"F32","shape":[1099511627776,1099511627776],"data_offsets":[0,4]}}`, make([]byte, 4)), "absurd"},
		{"negative", raw(`{"w":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}}`, make([]byte, 4)), "negative"},
		{"reversed offsets", raw(`{"w":{"dtype":"U8","shape":[0],"data_offsets":[4,0]}}`, make([]byte, 4)), "outside"},
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

func FuzzParse(f *testing.F) {
	f.Add(sample(f))
	f.Add(raw(`{"w":{"dtype":"I8","shape":[2,4],"data_offsets":[0,8]}}`, make([]byte, 8)))
	f.Fuzz(func(t *testing.T, data []byte) {
		g, err := Parse(data)
		if err != nil {
			return
		}
		for _, tn := range g.Tensors {
			if len(tn.Data) != tn.Elements()*DTypeSize(tn.DType) {
				t.Fatalf("tensor %s: %d bytes for shape %v", tn.Name, len(tn.Data), tn.Shape)
			}
		}
	})
}
