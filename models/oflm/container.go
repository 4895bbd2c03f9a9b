package oflm

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
)

// The container is a safetensors file (what safetensors.torch.save_file
// writes and oflm's Q4nxFile reads): an 8-byte little-endian header
// length, a JSON object of name -> {dtype, shape, data_offsets} (plus an
// optional "__metadata__" of strings), then the data, offsets relative to
// the end of the header. oflm refuses a header longer than 1<<28 bytes.

// maxHeader is oflm's bound on the JSON header (q4nx_file.cpp).
const maxHeader = 1 << 28

// stTensor is one tensor of a container's header.
type stTensor struct {
	Name  string
	DType string
	Shape []int64
	Start int64 // data offset, relative to the data section
	End   int64
}

// Size is the tensor's byte count.
func (t stTensor) Size() int64 { return t.End - t.Start }

// stHeader is a parsed container header.
type stHeader struct {
	Tensors   []stTensor // in data order
	Metadata  json.RawMessage
	DataStart int64 // file offset of the data section
}

// find returns the tensor called name.
func (h *stHeader) find(name string) (stTensor, bool) {
	for _, t := range h.Tensors {
		if t.Name == name {
			return t, true
		}
	}
	return stTensor{}, false
}

// readHeader reads a container's header from f (of size bytes) and checks
// that every tensor lies inside the file, that sizes match shapes and
// dtypes, and that no two tensors overlap.
func readHeader(f io.ReaderAt, size int64) (*stHeader, error) {
	var lb [8]byte
	if _, err := f.ReadAt(lb[:], 0); err != nil {
		return nil, fmt.Errorf("read header length: %w", err)
	}
	n := binary.LittleEndian.Uint64(lb[:])
	if n == 0 || n > maxHeader || int64(n)+8 > size {
		return nil, fmt.Errorf("header length %d does not fit a %d-byte file: not a safetensors container", n, size)
	}
	raw := make([]byte, n)
	if _, err := f.ReadAt(raw, 8); err != nil {
		return nil, fmt.Errorf("read header: %w", err)
	}
	var entries map[string]json.RawMessage
	if err := json.Unmarshal(raw, &entries); err != nil {
		return nil, fmt.Errorf("header is not a JSON object: %w", err)
	}
	h := &stHeader{DataStart: 8 + int64(n)}
	dataLen := size - h.DataStart
	for name, v := range entries {
		if name == "__metadata__" {
			h.Metadata = v
			continue
		}
		var e struct {
			DType   string   `json:"dtype"`
			Shape   []int64  `json:"shape"`
			Offsets [2]int64 `json:"data_offsets"`
		}
		if err := json.Unmarshal(v, &e); err != nil {
			return nil, fmt.Errorf("tensor %s: %w", name, err)
		}
		t := stTensor{Name: name, DType: e.DType, Shape: e.Shape, Start: e.Offsets[0], End: e.Offsets[1]}
		if t.Start < 0 || t.End < t.Start || t.End > dataLen {
			return nil, fmt.Errorf("tensor %s: data offsets [%d, %d] outside the %d bytes of data", name, t.Start, t.End, dataLen)
		}
		es := dtypeSize(t.DType)
		if es == 0 {
			return nil, fmt.Errorf("tensor %s: unknown dtype %q", name, t.DType)
		}
		elems := int64(1)
		for _, d := range t.Shape {
			if d < 0 {
				return nil, fmt.Errorf("tensor %s: negative dimension in shape %v", name, t.Shape)
			}
			if d > 0 && elems > dataLen/d {
				return nil, fmt.Errorf("tensor %s: shape %v is larger than the file", name, t.Shape)
			}
			elems *= d
		}
		if elems*es != t.Size() {
			return nil, fmt.Errorf("tensor %s: shape %v of %s is %d bytes, data offsets give %d", name, t.Shape, t.DType, elems*es, t.Size())
		}
		h.Tensors = append(h.Tensors, t)
	}
	if len(h.Tensors) == 0 {
		return nil, errors.New("the container holds no tensors")
	}
	sort.Slice(h.Tensors, func(i, j int) bool {
		a, b := h.Tensors[i], h.Tensors[j]
		if a.Start != b.Start {
			return a.Start < b.Start
		}
		return a.Name < b.Name
	})
	for i := 1; i < len(h.Tensors); i++ {
		if p, t := h.Tensors[i-1], h.Tensors[i]; t.Start < p.End {
			return nil, fmt.Errorf("tensors %s and %s overlap", p.Name, t.Name)
		}
	}
	return h, nil
}

// dtypeSize is the bytes per element of the dtypes a Q4NX container uses.
func dtypeSize(dtype string) int64 {
	switch dtype {
	case "I8", "U8":
		return 1
	case "BF16", "F16":
		return 2
	case "F32":
		return 4
	}
	return 0
}

// encodeHeader lays out tensors back to back in the given order and
// returns the container's first bytes (length and JSON header, padded with
// spaces to a multiple of 8 as safetensors does). It sets each tensor's
// Start and End.
func encodeHeader(tensors []stTensor, metadata json.RawMessage) ([]byte, error) {
	// Keys in data order, written by hand: encoding/json would sort them,
	// and a header that reads in file order is easier to inspect.
	buf := []byte{'{'}
	if len(metadata) > 0 {
		buf = append(buf, `"__metadata__":`...)
		buf = append(buf, metadata...)
	}
	var off int64
	for i := range tensors {
		t := &tensors[i]
		size := t.End - t.Start
		t.Start, t.End = off, off+size
		off += size
		entry, err := json.Marshal(struct {
			DType   string   `json:"dtype"`
			Shape   []int64  `json:"shape"`
			Offsets [2]int64 `json:"data_offsets"`
		}{t.DType, t.Shape, [2]int64{t.Start, t.End}})
		if err != nil {
			return nil, err
		}
		name, err := json.Marshal(t.Name)
		if err != nil {
			return nil, err
		}
		if len(buf) > 1 {
			buf = append(buf, ',')
		}
		buf = append(append(append(buf, name...), ':'), entry...)
	}
	buf = append(buf, '}')
	for len(buf)%8 != 0 {
		buf = append(buf, ' ')
	}
	if len(buf) > maxHeader {
		return nil, fmt.Errorf("header of %d bytes is over oflm's limit of %d", len(buf), maxHeader)
	}
	return append(binary.LittleEndian.AppendUint64(nil, uint64(len(buf))), buf...), nil
}

// readTensor reads a whole tensor's bytes.
func readTensor(f *os.File, h *stHeader, t stTensor) ([]byte, error) {
	b := make([]byte, t.Size())
	if _, err := f.ReadAt(b, h.DataStart+t.Start); err != nil {
		return nil, fmt.Errorf("read tensor %s: %w", t.Name, err)
	}
	return b, nil
}
