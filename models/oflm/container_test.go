package oflm

import (
	"bytes"
	"encoding/binary"
	"strings"
	"testing"
)

// container builds a file from a JSON header and n bytes of data.
func container(header string, n int) []byte {
	b := binary.LittleEndian.AppendUint64(nil, uint64(len(header)))
	return append(append(b, header...), make([]byte, n)...)
}

// TestReadHeaderRejects: a damaged or foreign container gives an error
// that says what is wrong, never a panic.
func TestReadHeaderRejects(t *testing.T) {
	cases := []struct {
		name string
		file []byte
		want string
	}{
		{"too short", []byte{1, 2, 3}, "read header length"},
		{"length past the end", binary.LittleEndian.AppendUint64(nil, 1000), "does not fit"},
		{"length zero", container("", 0), "does not fit"},
		{"not JSON", container("{nope", 0), "not a JSON object"},
		{"no tensors", container(`{"__metadata__":{"format":"pt"}}`, 0), "no tensors"},
		{"offsets past the data", container(`{"a":{"dtype":"BF16","shape":[4],"data_offsets":[0,8]}}`, 4), "outside"},
		{"shape and size disagree", container(`{"a":{"dtype":"BF16","shape":[3],"data_offsets":[0,8]}}`, 8), "is 6 bytes, data offsets give 8"},
		{"unknown dtype", container(`{"a":{"dtype":"C64","shape":[1],"data_offsets":[0,8]}}`, 8), `unknown dtype "C64"`},
		{"overlap", container(`{"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},"b":{"dtype":"U8","shape":[4],"data_offsets":[2,6]}}`, 8), "overlap"},
		{"huge shape", container(`{"a":{"dtype":"F32","shape":[4611686018427387904,4],"data_offsets":[0,0]}}`, 8), "larger than the file"},
		{"negative dimension", container(`{"a":{"dtype":"U8","shape":[-4,-1],"data_offsets":[0,4]}}`, 4), "negative"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := readHeader(bytes.NewReader(c.file), int64(len(c.file)))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("got %v, want an error saying %q", err, c.want)
			}
		})
	}
}

// TestHeaderRoundTrip: encodeHeader's output reads back with the same
// tensors, in order, back to back, metadata kept, padded to 8 bytes.
func TestHeaderRoundTrip(t *testing.T) {
	in := []stTensor{
		{Name: "model.embed_tokens.weight", DType: "BF16", Shape: []int64{4, 2}, End: 16},
		{Name: "lm_head.weight", DType: "I8", Shape: []int64{1, 5120}, End: 5120},
		{Name: `odd "name"`, DType: "F32", Shape: []int64{3}, Start: 100, End: 112},
	}
	head, err := encodeHeader(in, []byte(`{"format":"pt"}`))
	if err != nil {
		t.Fatal(err)
	}
	if (len(head)-8)%8 != 0 {
		t.Errorf("header of %d bytes is not padded to 8", len(head)-8)
	}
	file := append(head, make([]byte, 16+5120+12)...)
	h, err := readHeader(bytes.NewReader(file), int64(len(file)))
	if err != nil {
		t.Fatal(err)
	}
	if string(h.Metadata) != `{"format":"pt"}` {
		t.Errorf("metadata %s", h.Metadata)
	}
	var off int64
	for i, x := range h.Tensors {
		if x.Name != in[i].Name || x.DType != in[i].DType || x.Start != off {
			t.Errorf("tensor %d: %+v, want %s at %d", i, x, in[i].Name, off)
		}
		off = x.End
	}
}
