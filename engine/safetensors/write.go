package safetensors

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
)

// Write encodes tensors (in the given order) as a safetensors file, the way
// safetensors.torch.save_file lays them out: header padded with spaces to
// a multiple of 8, data back to back. It exists for tests and tools.
func Write(w io.Writer, tensors []Tensor, metadata map[string]string) error {
	hdr := map[string]any{}
	if metadata != nil {
		hdr["__metadata__"] = metadata
	}
	var off uint64
	for _, t := range tensors {
		if DTypeSize(t.DType) == 0 {
			return fmt.Errorf("safetensors: tensor %s: unknown dtype %q", t.Name, t.DType)
		}
		hdr[t.Name] = map[string]any{
			"dtype":        t.DType,
			"shape":        t.Shape,
			"data_offsets": []uint64{off, off + uint64(len(t.Data))},
		}
		off += uint64(len(t.Data))
	}
	js, err := json.Marshal(hdr)
	if err != nil {
		return err
	}
	for len(js)%8 != 0 {
		js = append(js, ' ')
	}
	if _, err := w.Write(binary.LittleEndian.AppendUint64(nil, uint64(len(js)))); err != nil {
		return err
	}
	if _, err := w.Write(js); err != nil {
		return err
	}
	for _, t := range tensors {
		if _, err := w.Write(t.Data); err != nil {
			return err
		}
	}
	return nil
}
