package gguf

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"math"

	"github.com/npuchat/npuchat/engine/quant"
)

// KV is one metadata entry to write. Value must have one of the Go types
// that Parse returns.
type KV struct {
	Key   string
	Value any
}

// WriteTensor is one tensor to write: Dims in ggml order (columns first)
// and Data already encoded in Type's block layout.
type WriteTensor struct {
	Name string
	Dims []uint64
	Type quant.Type
	Data []byte
}

// Write encodes a GGUF v3 file with the default alignment (or
// general.alignment when meta sets it). It exists for tests and tools that
// need small model files; the engine itself only reads.
func Write(w io.Writer, meta []KV, tensors []WriteTensor) error {
	align := uint64(DefaultAlignment)
	for _, kv := range meta {
		if kv.Key == "general.alignment" {
			a, ok := kv.Value.(uint32)
			if !ok {
				return fmt.Errorf("general.alignment must be uint32")
			}
			align = uint64(a)
		}
	}
	var hdr bytes.Buffer
	le := binary.LittleEndian
	var err error
	put := func(v any) {
		if err == nil {
			err = binary.Write(&hdr, le, v)
		}
	}
	putStr := func(s string) {
		put(uint64(len(s)))
		hdr.WriteString(s)
	}
	hdr.WriteString(Magic)
	put(uint32(3))
	put(uint64(len(tensors)))
	put(uint64(len(meta)))
	for _, kv := range meta {
		putStr(kv.Key)
		if e := writeValue(kv.Value, put, putStr, true); e != nil {
			return fmt.Errorf("gguf: metadata %s: %w", kv.Key, e)
		}
	}
	var off uint64
	for _, t := range tensors {
		putStr(t.Name)
		put(uint32(len(t.Dims)))
		for _, d := range t.Dims {
			put(d)
		}
		put(uint32(t.Type))
		put(off)
		off += (uint64(len(t.Data)) + align - 1) / align * align
	}
	if err != nil {
		return err
	}
	hdr.Write(make([]byte, (align-uint64(hdr.Len())%align)%align))
	if _, err := w.Write(hdr.Bytes()); err != nil {
		return err
	}
	for _, t := range tensors {
		if _, err := w.Write(t.Data); err != nil {
			return err
		}
		if _, err := w.Write(make([]byte, (align-uint64(len(t.Data))%align)%align)); err != nil {
			return err
		}
	}
	return nil
}

func writeValue(v any, put func(any), putStr func(string), withType bool) error {
	typ := func(t uint32) {
		if withType {
			put(t)
		}
	}
	arr := func(et uint32, n int) {
		typ(typeArray)
		put(et)
		put(uint64(n))
	}
	switch x := v.(type) {
	case uint8:
		typ(typeUint8)
		put(x)
	case int8:
		typ(typeInt8)
		put(x)
	case uint16:
		typ(typeUint16)
		put(x)
	case int16:
		typ(typeInt16)
		put(x)
	case uint32:
		typ(typeUint32)
		put(x)
	case int32:
		typ(typeInt32)
		put(x)
	case float32:
		typ(typeFloat32)
		put(math.Float32bits(x))
	case bool:
		typ(typeBool)
		put(x)
	case string:
		typ(typeString)
		putStr(x)
	case uint64:
		typ(typeUint64)
		put(x)
	case int64:
		typ(typeInt64)
		put(x)
	case float64:
		typ(typeFloat64)
		put(math.Float64bits(x))
	case []string:
		arr(typeString, len(x))
		for _, s := range x {
			putStr(s)
		}
	case []int32:
		arr(typeInt32, len(x))
		put(x)
	case []uint32:
		arr(typeUint32, len(x))
		put(x)
	case []float32:
		arr(typeFloat32, len(x))
		put(x)
	case []uint8:
		arr(typeUint8, len(x))
		put(x)
	case []int64:
		arr(typeInt64, len(x))
		put(x)
	default:
		return fmt.Errorf("unsupported value type %T", v)
	}
	return nil
}
