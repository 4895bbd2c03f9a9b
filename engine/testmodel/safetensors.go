package testmodel

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"fmt"
)

// stTensor is one tensor of a safetensors file.
type stTensor struct {
	name  string
	dtype string // "F32", "BF16", "I8"
	shape []int
	data  []byte
}

// writeSafetensors writes tensors in the safetensors format: an 8-byte
// little-endian header length, a JSON header padded with spaces to a
// multiple of 8, then the data in header order.
func writeSafetensors(path string, tensors []stTensor, metadata map[string]string) error {
	header := map[string]any{}
	if metadata != nil {
		header["__metadata__"] = metadata
	}
	var off int
	for _, t := range tensors {
		header[t.name] = map[string]any{"dtype": t.dtype, "shape": t.shape, "data_offsets": []int{off, off + len(t.data)}}
		off += len(t.data)
	}
	js, err := json.Marshal(header)
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	for len(js)%8 != 0 {
		js = append(js, ' ')
	}
	return writeAtomic(path, func(f *bufio.Writer) error {
		var n [8]byte
		binary.LittleEndian.PutUint64(n[:], uint64(len(js)))
		f.Write(n[:])
		f.Write(js)
		for _, t := range tensors {
			if _, err := f.Write(t.data); err != nil {
				return err
			}
		}
		return nil
	})
}

// floatTensor encodes x as an F32 or BF16 safetensors tensor.
func floatTensor(name string, x []float32, shape []int, dtype TensorType) (stTensor, error) {
	b, err := Encode(dtype, x, shape[len(shape)-1])
	if err != nil {
		return stTensor{}, fmt.Errorf("tensor %s: %w", name, err)
	}
	return stTensor{name: name, dtype: dtype.String(), shape: shape, data: b}, nil
}
