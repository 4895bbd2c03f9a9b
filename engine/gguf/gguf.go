// Package gguf parses GGUF files (versions 2 and 3, little-endian), the
// format of llama.cpp: a header, typed key/value metadata, tensor
// descriptions, then aligned tensor data.
//
// Parse works on the whole file as a byte slice (normally a memory map) and
// never allocates more than the input can justify: every count read from
// the header is checked against the bytes that remain, so a header claiming
// 2^60 tensors fails with an error instead of exhausting memory.
package gguf

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/bits"

	"github.com/npuchat/npuchat/engine/quant"
)

// Magic is the first four bytes of every GGUF file.
const Magic = "GGUF"

// DefaultAlignment is the tensor data alignment when general.alignment is
// absent.
const DefaultAlignment = 32

// maxDims is ggml's GGML_MAX_DIMS.
const maxDims = 4

// Metadata value types (enum gguf_type).
const (
	typeUint8   = 0
	typeInt8    = 1
	typeUint16  = 2
	typeInt16   = 3
	typeUint32  = 4
	typeInt32   = 5
	typeFloat32 = 6
	typeBool    = 7
	typeString  = 8
	typeArray   = 9
	typeUint64  = 10
	typeInt64   = 11
	typeFloat64 = 12
)

// File is a parsed GGUF header.
type File struct {
	Version uint32
	// Metadata holds every key with its exact Go type: uint8 … uint64,
	// int8 … int64, float32, float64, bool, string; arrays as typed slices
	// ([]string, []int32, []uint32, []float32, …; []any for arrays of arrays).
	Metadata map[string]any
	// Keys lists the metadata keys in file order.
	Keys    []string
	Tensors []TensorInfo
	// Alignment of the data section and of each tensor's offset.
	Alignment int
	// DataOffset is where the tensor data section starts in the file.
	DataOffset int64
}

// TensorInfo describes one tensor. Dims are ggml's ne: Dims[0] is the
// number of columns (the contiguous dimension).
type TensorInfo struct {
	Name string
	Dims []uint64
	Type quant.Type
	// Offset is the data's position relative to File.DataOffset.
	Offset uint64
	// Size is the data size in bytes, or -1 when Type is not one the
	// engine knows (the tensor can still be listed, not read).
	Size int64
}

// Elements returns the number of values in the tensor.
func (t TensorInfo) Elements() uint64 {
	n := uint64(1)
	for _, d := range t.Dims {
		n *= d
	}
	return n
}

// Data returns the tensor's bytes from the whole file data.
func (f *File) Data(file []byte, t TensorInfo) ([]byte, error) {
	if t.Size < 0 {
		return nil, fmt.Errorf("tensor %s: unsupported type %s", t.Name, t.Type)
	}
	start := uint64(f.DataOffset) + t.Offset
	end := start + uint64(t.Size)
	if start < uint64(f.DataOffset) || end < start || end > uint64(len(file)) {
		return nil, fmt.Errorf("tensor %s: data [%d, %d) lies outside the file (%d bytes)", t.Name, start, end, len(file))
	}
	return file[start:end], nil
}

// Tensor finds a tensor by name.
func (f *File) Tensor(name string) (TensorInfo, bool) {
	for _, t := range f.Tensors {
		if t.Name == name {
			return t, true
		}
	}
	return TensorInfo{}, false
}

// Uint returns an integer metadata value of any integer type.
func (f *File) Uint(key string) (uint64, bool) {
	switch v := f.Metadata[key].(type) {
	case uint8:
		return uint64(v), true
	case uint16:
		return uint64(v), true
	case uint32:
		return uint64(v), true
	case uint64:
		return v, true
	case int8:
		return uint64(v), v >= 0
	case int16:
		return uint64(v), v >= 0
	case int32:
		return uint64(v), v >= 0
	case int64:
		return uint64(v), v >= 0
	}
	return 0, false
}

// Float returns a float metadata value (float32 or float64).
func (f *File) Float(key string) (float64, bool) {
	switch v := f.Metadata[key].(type) {
	case float32:
		return float64(v), true
	case float64:
		return v, true
	}
	return 0, false
}

// String returns a string metadata value.
func (f *File) String(key string) (string, bool) {
	s, ok := f.Metadata[key].(string)
	return s, ok
}

// ErrNotGGUF is returned when the file does not start with the GGUF magic.
var ErrNotGGUF = errors.New("not a GGUF file (wrong magic)")

// reader is a bounds-checked cursor over the file.
type reader struct {
	b   []byte
	off int
}

var errTruncated = errors.New("file is truncated")

func (r *reader) left() int { return len(r.b) - r.off }

func (r *reader) bytes(n uint64) ([]byte, error) {
	if n > uint64(r.left()) {
		return nil, errTruncated
	}
	s := r.b[r.off : r.off+int(n)]
	r.off += int(n)
	return s, nil
}

func (r *reader) u8() (uint8, error) {
	b, err := r.bytes(1)
	if err != nil {
		return 0, err
	}
	return b[0], nil
}

func (r *reader) u16() (uint16, error) {
	b, err := r.bytes(2)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint16(b), nil
}

func (r *reader) u32() (uint32, error) {
	b, err := r.bytes(4)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint32(b), nil
}

func (r *reader) u64() (uint64, error) {
	b, err := r.bytes(8)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint64(b), nil
}

func (r *reader) str() (string, error) {
	n, err := r.u64()
	if err != nil {
		return "", err
	}
	b, err := r.bytes(n)
	if err != nil {
		return "", fmt.Errorf("string of %d bytes: %w", n, err)
	}
	return string(b), nil
}

// Parse reads the header of a GGUF file held entirely in data.
func Parse(data []byte) (*File, error) {
	r := &reader{b: data}
	magic, err := r.bytes(4)
	if err != nil {
		return nil, ErrNotGGUF
	}
	if string(magic) != Magic {
		return nil, ErrNotGGUF
	}
	f := &File{Metadata: map[string]any{}, Alignment: DefaultAlignment}
	if f.Version, err = r.u32(); err != nil {
		return nil, fmt.Errorf("version: %w", err)
	}
	if f.Version&0xffff == 0 && f.Version != 0 {
		return nil, errors.New("big-endian GGUF files are not supported")
	}
	if f.Version != 2 && f.Version != 3 {
		return nil, fmt.Errorf("unsupported GGUF version %d (want 2 or 3)", f.Version)
	}
	nTensors, err := r.u64()
	if err != nil {
		return nil, fmt.Errorf("tensor count: %w", err)
	}
	nKV, err := r.u64()
	if err != nil {
		return nil, fmt.Errorf("metadata count: %w", err)
	}
	// A key/value takes at least 8+4+1 bytes, a tensor info 8+4+8+4+8.
	if nKV > uint64(r.left())/13 {
		return nil, fmt.Errorf("header claims %d metadata entries, more than the file can hold", nKV)
	}
	if nTensors > uint64(r.left())/32 {
		return nil, fmt.Errorf("header claims %d tensors, more than the file can hold", nTensors)
	}
	for i := uint64(0); i < nKV; i++ {
		key, err := r.str()
		if err != nil {
			return nil, fmt.Errorf("metadata entry %d: key: %w", i, err)
		}
		typ, err := r.u32()
		if err != nil {
			return nil, fmt.Errorf("metadata %s: type: %w", key, err)
		}
		v, err := r.value(typ, 0)
		if err != nil {
			return nil, fmt.Errorf("metadata %s: %w", key, err)
		}
		if _, dup := f.Metadata[key]; dup {
			return nil, fmt.Errorf("metadata %s appears twice", key)
		}
		f.Metadata[key] = v
		f.Keys = append(f.Keys, key)
	}
	if _, ok := f.Metadata["general.alignment"]; ok {
		a, ok := f.Uint("general.alignment")
		if !ok || a == 0 || a&(a-1) != 0 || a > 1<<20 {
			return nil, fmt.Errorf("general.alignment %v is not a power of two", f.Metadata["general.alignment"])
		}
		f.Alignment = int(a)
	}
	f.Tensors = make([]TensorInfo, 0, nTensors)
	seen := make(map[string]bool, nTensors)
	for i := uint64(0); i < nTensors; i++ {
		t, err := r.tensorInfo()
		if err != nil {
			if t.Name != "" {
				return nil, fmt.Errorf("tensor %s: %w", t.Name, err)
			}
			return nil, fmt.Errorf("tensor %d: %w", i, err)
		}
		if seen[t.Name] {
			return nil, fmt.Errorf("tensor %s appears twice", t.Name)
		}
		seen[t.Name] = true
		if t.Offset%uint64(f.Alignment) != 0 {
			return nil, fmt.Errorf("tensor %s: offset %d is not aligned to %d", t.Name, t.Offset, f.Alignment)
		}
		f.Tensors = append(f.Tensors, t)
	}
	start := (uint64(r.off) + uint64(f.Alignment) - 1) / uint64(f.Alignment) * uint64(f.Alignment)
	f.DataOffset = int64(start)
	for _, t := range f.Tensors {
		if t.Size < 0 {
			continue
		}
		end := start + t.Offset + uint64(t.Size)
		if end < start || end > uint64(len(data)) || t.Offset > uint64(len(data)) {
			return nil, fmt.Errorf("tensor %s: data at offset %d (%d bytes) runs past the end of the file (%d bytes): file truncated or header corrupt", t.Name, t.Offset, t.Size, len(data))
		}
	}
	return f, nil
}

func (r *reader) tensorInfo() (TensorInfo, error) {
	var t TensorInfo
	var err error
	if t.Name, err = r.str(); err != nil {
		return t, fmt.Errorf("name: %w", err)
	}
	nd, err := r.u32()
	if err != nil {
		return t, err
	}
	if nd == 0 || nd > maxDims {
		return t, fmt.Errorf("%d dimensions (want 1 to %d)", nd, maxDims)
	}
	t.Dims = make([]uint64, nd)
	total := uint64(1)
	for i := range t.Dims {
		if t.Dims[i], err = r.u64(); err != nil {
			return t, err
		}
		hi, lo := bits.Mul64(total, t.Dims[i])
		if hi != 0 || lo > 1<<50 {
			return t, fmt.Errorf("absurd shape %v", t.Dims[:i+1])
		}
		total = lo
	}
	typ, err := r.u32()
	if err != nil {
		return t, err
	}
	t.Type = quant.Type(typ)
	if t.Offset, err = r.u64(); err != nil {
		return t, err
	}
	t.Size = -1
	if t.Type.Supported() {
		bs := uint64(t.Type.BlockSize())
		if t.Dims[0]%bs != 0 {
			return t, fmt.Errorf("%d columns is not a multiple of the %s block size %d", t.Dims[0], t.Type, bs)
		}
		t.Size = int64(total / bs * uint64(t.Type.BlockBytes()))
	}
	return t, nil
}

// value reads one metadata value of type typ. depth limits nested arrays.
func (r *reader) value(typ uint32, depth int) (any, error) {
	switch typ {
	case typeUint8:
		return r.u8()
	case typeInt8:
		v, err := r.u8()
		return int8(v), err
	case typeUint16:
		return r.u16()
	case typeInt16:
		v, err := r.u16()
		return int16(v), err
	case typeUint32:
		return r.u32()
	case typeInt32:
		v, err := r.u32()
		return int32(v), err
	case typeFloat32:
		v, err := r.u32()
		return math.Float32frombits(v), err
	case typeBool:
		v, err := r.u8()
		if err == nil && v > 1 {
			return nil, fmt.Errorf("bool value %d", v)
		}
		return v == 1, err
	case typeString:
		return r.str()
	case typeUint64:
		return r.u64()
	case typeInt64:
		v, err := r.u64()
		return int64(v), err
	case typeFloat64:
		v, err := r.u64()
		return math.Float64frombits(v), err
	case typeArray:
		if depth > 2 {
			return nil, errors.New("arrays nested too deeply")
		}
		return r.array(depth)
	}
	return nil, fmt.Errorf("unknown value type %d", typ)
}

// elemSize is the minimum encoded size of one array element.
func elemSize(typ uint32) uint64 {
	switch typ {
	case typeUint8, typeInt8, typeBool:
		return 1
	case typeUint16, typeInt16:
		return 2
	case typeUint32, typeInt32, typeFloat32:
		return 4
	case typeUint64, typeInt64, typeFloat64, typeString:
		return 8
	case typeArray:
		return 12
	}
	return 1
}

func (r *reader) array(depth int) (any, error) {
	et, err := r.u32()
	if err != nil {
		return nil, err
	}
	n, err := r.u64()
	if err != nil {
		return nil, err
	}
	if n > uint64(r.left())/elemSize(et) {
		return nil, fmt.Errorf("array of %d elements is longer than the rest of the file", n)
	}
	var fixed []byte
	if sz := elemSize(et); et != typeString && et != typeArray && et != typeBool {
		if fixed, err = r.bytes(n * sz); err != nil {
			return nil, err
		}
	}
	le := binary.LittleEndian
	switch et {
	case typeUint8:
		return append([]uint8(nil), fixed...), nil
	case typeInt8:
		out := make([]int8, n)
		for i := range out {
			out[i] = int8(fixed[i])
		}
		return out, nil
	case typeUint16:
		out := make([]uint16, n)
		for i := range out {
			out[i] = le.Uint16(fixed[2*i:])
		}
		return out, nil
	case typeInt16:
		out := make([]int16, n)
		for i := range out {
			out[i] = int16(le.Uint16(fixed[2*i:]))
		}
		return out, nil
	case typeUint32:
		out := make([]uint32, n)
		for i := range out {
			out[i] = le.Uint32(fixed[4*i:])
		}
		return out, nil
	case typeInt32:
		out := make([]int32, n)
		for i := range out {
			out[i] = int32(le.Uint32(fixed[4*i:]))
		}
		return out, nil
	case typeFloat32:
		out := make([]float32, n)
		for i := range out {
			out[i] = math.Float32frombits(le.Uint32(fixed[4*i:]))
		}
		return out, nil
	case typeUint64:
		out := make([]uint64, n)
		for i := range out {
			out[i] = le.Uint64(fixed[8*i:])
		}
		return out, nil
	case typeInt64:
		out := make([]int64, n)
		for i := range out {
			out[i] = int64(le.Uint64(fixed[8*i:]))
		}
		return out, nil
	case typeFloat64:
		out := make([]float64, n)
		for i := range out {
			out[i] = math.Float64frombits(le.Uint64(fixed[8*i:]))
		}
		return out, nil
	case typeBool:
		out := make([]bool, n)
		for i := range out {
			v, err := r.u8()
			if err != nil {
				return nil, err
			}
			if v > 1 {
				return nil, fmt.Errorf("bool value %d", v)
			}
			out[i] = v == 1
		}
		return out, nil
	case typeString:
		out := make([]string, n)
		for i := range out {
			if out[i], err = r.str(); err != nil {
				return nil, fmt.Errorf("element %d: %w", i, err)
			}
		}
		return out, nil
	case typeArray:
		out := make([]any, n)
		for i := range out {
			if out[i], err = r.value(typeArray, depth+1); err != nil {
				return nil, fmt.Errorf("element %d: %w", i, err)
			}
		}
		return out, nil
	}
	return nil, fmt.Errorf("unknown array element type %d", et)
}
