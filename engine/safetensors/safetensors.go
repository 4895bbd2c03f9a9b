// Package safetensors parses the safetensors format (Hugging Face weights
// and FLM's model.q4nx): an 8-byte little-endian header length, a JSON
// header mapping tensor names to dtype, shape and data offsets, then the
// data. Like package gguf it works on the whole file as a byte slice and
// checks every size before trusting it.
package safetensors

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math/bits"
	"sort"
)

// MaxHeader bounds the JSON header (the reference implementation uses
// 100 MB).
const MaxHeader = 100 << 20

// Tensor is one entry of the header.
type Tensor struct {
	Name  string
	DType string // "BF16", "F16", "F32", "I8", "U8", ...
	Shape []int
	// Data is the tensor's bytes inside the file.
	Data []byte
}

// Elements returns the product of the shape.
func (t Tensor) Elements() int {
	n := 1
	for _, d := range t.Shape {
		n *= d
	}
	return n
}

// File is a parsed safetensors file.
type File struct {
	Tensors  map[string]Tensor
	Metadata map[string]string
}

// Names returns the tensor names sorted.
func (f *File) Names() []string {
	out := make([]string, 0, len(f.Tensors))
	for n := range f.Tensors {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// DTypeSize returns the bytes per element of a dtype, or 0 if unknown.
func DTypeSize(dtype string) int {
	switch dtype {
	case "BOOL", "U8", "I8", "F8_E4M3", "F8_E5M2":
		return 1
	case "BF16", "F16", "I16", "U16":
		return 2
	case "F32", "I32", "U32":
		return 4
	case "F64", "I64", "U64":
		return 8
	}
	return 0
}

type entry struct {
	DType       string   `json:"dtype"`
	Shape       []int64  `json:"shape"`
	DataOffsets []uint64 `json:"data_offsets"`
}

// Parse reads a whole safetensors file.
func Parse(data []byte) (*File, error) {
	if len(data) < 8 {
		return nil, errors.New("file is shorter than the 8-byte header length")
	}
	n := binary.LittleEndian.Uint64(data)
	if n > MaxHeader {
		return nil, fmt.Errorf("header length %d exceeds the %d-byte limit (not a safetensors file?)", n, MaxHeader)
	}
	if n > uint64(len(data)-8) {
		return nil, fmt.Errorf("header length %d runs past the end of the file (%d bytes): truncated", n, len(data))
	}
	hdr := data[8 : 8+n]
	body := data[8+n:]
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(hdr, &raw); err != nil {
		return nil, fmt.Errorf("header is not a JSON object: %w", err)
	}
	f := &File{Tensors: make(map[string]Tensor, len(raw))}
	for name, msg := range raw {
		if name == "__metadata__" {
			if err := json.Unmarshal(msg, &f.Metadata); err != nil {
				return nil, fmt.Errorf("__metadata__: %w", err)
			}
			continue
		}
		var e entry
		if err := json.Unmarshal(msg, &e); err != nil {
			return nil, fmt.Errorf("tensor %s: %w", name, err)
		}
		t, err := check(name, e, body)
		if err != nil {
			return nil, fmt.Errorf("tensor %s: %w", name, err)
		}
		f.Tensors[name] = t
	}
	return f, nil
}

func check(name string, e entry, body []byte) (Tensor, error) {
	size := DTypeSize(e.DType)
	if size == 0 {
		return Tensor{}, fmt.Errorf("unknown dtype %q", e.DType)
	}
	if len(e.DataOffsets) != 2 {
		return Tensor{}, fmt.Errorf("data_offsets has %d entries, want 2", len(e.DataOffsets))
	}
	if len(e.Shape) > 8 {
		return Tensor{}, fmt.Errorf("%d dimensions", len(e.Shape))
	}
	elems := uint64(1)
	shape := make([]int, len(e.Shape))
	for i, d := range e.Shape {
		if d < 0 {
			return Tensor{}, fmt.Errorf("negative dimension in shape %v", e.Shape)
		}
		hi, lo := bits.Mul64(elems, uint64(d))
		if hi != 0 || lo > 1<<50 {
			return Tensor{}, fmt.Errorf("absurd shape %v", e.Shape)
		}
		elems = lo
		shape[i] = int(d)
	}
	begin, end := e.DataOffsets[0], e.DataOffsets[1]
	if begin > end || end > uint64(len(body)) {
		return Tensor{}, fmt.Errorf("data [%d, %d) lies outside the data section (%d bytes): file truncated or header corrupt", begin, end, len(body))
	}
	if end-begin != elems*uint64(size) {
		return Tensor{}, fmt.Errorf("shape %v of %s needs %d bytes, data_offsets give %d", e.Shape, e.DType, elems*uint64(size), end-begin)
	}
	return Tensor{Name: name, DType: e.DType, Shape: shape, Data: body[begin:end:end]}, nil
}
