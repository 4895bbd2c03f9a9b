package engine

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"math"
	"os"
	"unsafe"

	"github.com/npuchat/npuchat/engine/quant"
)

// The KV file format (Model.WriteKV, Model.ReadKV): one kept sequence's
// tokens, keys and values, exactly as they are in memory, so that a
// sequence read back computes what it computed:
//
//	magic     "NPUCHATKV2\n" (11 bytes)
//	header    uint32 little-endian length, then JSON (KVFileHeader)
//	tokens    header.Tokens × uint32
//	layers    for each layer: keys (whole 16-position blocks), then values,
//	          float32 or float16 (header.Type) little-endian; for q8_0,
//	          the keys' int8 values, their float16 scales, the values'
//	          int8 values, their scales (kvSlabs' layout)
//	checksum  CRC-32C (Castagnoli) of everything before it, uint32
//	          little-endian
//
// A reader trusts nothing before the checksum matched: the header's
// sizes are checked against the model first (a file of another model,
// another KV type or a damaged header is refused before anything is
// allocated), and the checksum at the end refuses a damaged or truncated
// body.
//
// The checksum is there against damage (a disk or a copy gone wrong, a
// file cut short by a crash), not against someone who writes the folder
// on purpose: the folder is the user's own, beside the history. CRC-32C
// catches every error burst of up to 32 bits and all but one in 2³² of
// the others, at memory speed (the SSE 4.2 instruction), where SHA-256,
// used until version 1, took longer than reading a file from the page
// cache. Version 1 files are refused as not KV files.
const kvMagic = "NPUCHATKV2\n"

// kvSum starts a KV file's checksum.
func kvSum() hash.Hash32 { return crc32.New(crc32.MakeTable(crc32.Castagnoli)) }

// KVFileHeader is a KV file's header.
type KVFileHeader struct {
	// Identity names the model computation the keys and values belong to:
	// the caller's (the model file's path, size and time) and the
	// engine's (Model.KVIdentity). A file of another identity is refused.
	Identity string `json:"identity"`
	Scope    string `json:"scope"`
	// Tag is the caller's label (the chat a sequence belongs to, so that
	// its files go with it).
	Tag    string `json:"tag,omitempty"`
	Tokens int    `json:"tokens"`
	Layers int    `json:"layers"`
	KVDim  int    `json:"kv_dim"`
	Type   string `json:"type"` // the KV cache type: "f32", "f16" or "q8_0" (KVTypes)
}

// kvMagic1 is the magic of version 1 of the format.
const kvMagic1 = "NPUCHATKV1\n"

// IsOldKVFile reports whether the file at path is a KV file of an
// earlier version of the format (which this one refuses, so that a disk
// cache can delete it).
func IsOldKVFile(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	head := make([]byte, len(kvMagic))
	if _, err := io.ReadFull(f, head); err != nil {
		return false
	}
	return string(head) == kvMagic1
}

// maxKVHeader bounds a KV file's header (its identity and scope).
const maxKVHeader = 1 << 16

// KVIdentity names how this model computes keys and values: its shape,
// the KV type and the options that change what a layer computes. A KV
// file's identity is the caller's identity of the model file plus this.
func (m *Model) KVIdentity() string {
	c := &m.cfg
	return fmt.Sprintf("%s layers=%d heads=%d/%d dim=%d hidden=%d rope=%s/%g kv=%s arith=%+v",
		c.Arch, c.Layers, c.Heads, c.KVHeads, c.HeadDim, c.Hidden, c.RopeLayout, c.RopeTheta, m.KVType(), m.arith)
}

// WriteKV writes a kept sequence (from KVCache.Kept or the Evicted hook)
// as a KV file, under identity, with its tag.
func (m *Model) WriteKV(w io.Writer, st *StoredKV, identity string) error {
	if st == nil || st.kv == nil || len(st.Tokens) == 0 {
		return errors.New("write KV: nothing to write")
	}
	c := &m.cfg
	h := KVFileHeader{Identity: identity, Scope: st.Scope, Tag: st.Tag, Tokens: len(st.Tokens), Layers: c.Layers,
		KVDim: c.KVHeads * c.HeadDim, Type: m.KVType()}
	hj, err := json.Marshal(h)
	if err != nil {
		return err
	}
	sum := kvSum()
	bw := bufio.NewWriterSize(io.MultiWriter(w, sum), 1<<20)
	bw.WriteString(kvMagic)
	binary.Write(bw, binary.LittleEndian, uint32(len(hj)))
	bw.Write(hj)
	tok := make([]byte, 4*len(st.Tokens))
	for i, t := range st.Tokens {
		binary.LittleEndian.PutUint32(tok[4*i:], uint32(t))
	}
	bw.Write(tok)
	n := len(st.Tokens)
	nk, nv := roundBlock(n)*h.KVDim, n*h.KVDim
	for l := range c.Layers {
		switch m.kv {
		case kvQ8:
			const b8 = quant.KVBlock8
			bw.Write(i8Bytes(st.kv.keys8[l][:nk]))
			bw.Write(u16Bytes(st.kv.keysD[l][:nk/b8]))
			bw.Write(i8Bytes(st.kv.values8[l][:nv]))
			bw.Write(u16Bytes(st.kv.valuesD[l][:nv/b8]))
		case kvF16:
			bw.Write(u16Bytes(st.kv.keys16[l][:nk]))
			bw.Write(u16Bytes(st.kv.values16[l][:nv]))
		default:
			bw.Write(f32Bytes(st.kv.keys[l][:nk]))
			bw.Write(f32Bytes(st.kv.values[l][:nv]))
		}
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("write KV: %w", err)
	}
	if _, err := w.Write(binary.LittleEndian.AppendUint32(nil, sum.Sum32())); err != nil {
		return fmt.Errorf("write KV: %w", err)
	}
	return nil
}

// ReadKVHeader reads a KV file's header and tokens (for an index of the
// files), checking them against the model and identity; the body is not
// read, so the checksum is not checked yet (ReadKV does).
func (m *Model) ReadKVHeader(r io.Reader, identity string) (*KVFileHeader, []int, error) {
	h, tokens, _, err := m.readKVHead(r, identity, nil)
	return h, tokens, err
}

func (m *Model) readKVHead(r io.Reader, identity string, sum hash.Hash) (*KVFileHeader, []int, io.Reader, error) {
	if sum != nil {
		r = io.TeeReader(r, sum)
	}
	head := make([]byte, len(kvMagic)+4)
	if _, err := io.ReadFull(r, head); err != nil {
		return nil, nil, nil, fmt.Errorf("not a KV file: %w", err)
	}
	if string(head[:len(kvMagic)]) != kvMagic {
		return nil, nil, nil, errors.New("not a KV file of this version (no NPUCHATKV2 magic)")
	}
	hl := binary.LittleEndian.Uint32(head[len(kvMagic):])
	if hl == 0 || hl > maxKVHeader {
		return nil, nil, nil, fmt.Errorf("KV file: header of %d bytes", hl)
	}
	hj := make([]byte, hl)
	if _, err := io.ReadFull(r, hj); err != nil {
		return nil, nil, nil, fmt.Errorf("KV file: header: %w", err)
	}
	var h KVFileHeader
	dec := json.NewDecoder(bytes.NewReader(hj))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&h); err != nil {
		return nil, nil, nil, fmt.Errorf("KV file: header: %w", err)
	}
	c := &m.cfg
	switch {
	case h.Identity != identity:
		return nil, nil, nil, fmt.Errorf("KV file of another model (%q, this is %q)", h.Identity, identity)
	case h.Layers != c.Layers || h.KVDim != c.KVHeads*c.HeadDim || h.Type != m.KVType():
		return nil, nil, nil, fmt.Errorf("KV file of another shape (%d layers × %d, %s; the model has %d × %d, %s)",
			h.Layers, h.KVDim, h.Type, c.Layers, c.KVHeads*c.HeadDim, m.KVType())
	case h.Tokens <= 0 || h.Tokens > 1<<24:
		return nil, nil, nil, fmt.Errorf("KV file of %d tokens", h.Tokens)
	}
	tb := make([]byte, 4*h.Tokens)
	if _, err := io.ReadFull(r, tb); err != nil {
		return nil, nil, nil, fmt.Errorf("KV file: tokens: %w", err)
	}
	tokens := make([]int, h.Tokens)
	for i := range tokens {
		t := binary.LittleEndian.Uint32(tb[4*i:])
		if int64(t) >= int64(c.VocabSize) {
			return nil, nil, nil, fmt.Errorf("KV file: token %d is outside the vocabulary", t)
		}
		tokens[i] = int(t)
	}
	return &h, tokens, r, nil
}

// ReadKVOptions say how much of a KV file Model.ReadKV keeps.
type ReadKVOptions struct {
	// Keep is how many of the file's positions to keep (0 or more than
	// the file holds: all of them): what a prompt shares with it. The
	// rest is read only to check the checksum, into a small buffer that
	// is reused, so it takes neither memory nor the budget.
	Keep int
	// Capacity is the positions the sequence has room for (at least
	// those kept): the prompt about to resume from it and its answer, so
	// that the session taking it over computes on at once instead of
	// copying it to grow.
	Capacity int
}

// ReadKV reads a KV file written by WriteKV for this model and identity:
// a sequence to KVCache.Insert (its first opts.Keep positions). A file
// of another model, shape or KV type, or one damaged or cut short
// anywhere, is an error.
//
// The keys and values are read straight into their slabs, layer by
// layer, while another goroutine checksums (and checks for values that
// are not finite) what was read before, so reading a file costs about
// the time of the reads, not reads plus hashing.
func (m *Model) ReadKV(r io.Reader, identity string, opts ReadKVOptions) (*StoredKV, *KVFileHeader, error) {
	sum := kvSum()
	h, tokens, _, err := m.readKVHead(r, identity, sum)
	if err != nil {
		return nil, nil, err
	}
	n := h.Tokens
	keep := n
	if opts.Keep > 0 && opts.Keep < n {
		keep = opts.Keep
	}
	kv := m.newKVSlabs(max(opts.Capacity, keep), nil, 0)
	fk, fv := roundBlock(n)*h.KVDim, n*h.KVDim       // per layer in the file
	nk, nv := roundBlock(keep)*h.KVDim, keep*h.KVDim // of them kept
	elem := 4
	if m.kv == kvF16 {
		elem = 2
	}

	// the body's pieces go to the checker in file order; the parts not
	// kept are read into scratch buffers that the checker gives back
	type piece struct {
		b       []byte
		f32     []float32
		f16     []uint16
		name    string
		scratch bool
	}
	const scratchSize = 1 << 20
	free := make(chan []byte, 4)
	if keep < n {
		for range cap(free) {
			free <- make([]byte, scratchSize)
		}
	}
	pieces := make(chan piece, 8)
	bad := make(chan error, 1)
	go func() {
		var err error
		for p := range pieces {
			sum.Write(p.b)
			if p.scratch {
				free <- p.b[:cap(p.b)]
				continue
			}
			if err == nil && (p.f32 != nil && !finiteF32(p.f32) || p.f16 != nil && !finiteF16(p.f16)) {
				err = fmt.Errorf("KV file: %s holds a value that is not finite", p.name)
			}
		}
		bad <- err
	}()
	read := func(b []byte, f32 []float32, f16 []uint16, name string) error {
		if _, err := io.ReadFull(r, b); err != nil {
			return fmt.Errorf("KV file: %s: %w", name, err)
		}
		pieces <- piece{b: b, f32: f32, f16: f16, name: name}
		return nil
	}
	skip := func(bytes int, name string) error {
		for bytes > 0 {
			b := <-free
			b = b[:min(bytes, len(b))]
			if _, err := io.ReadFull(r, b); err != nil {
				return fmt.Errorf("KV file: %s: %w", name, err)
			}
			pieces <- piece{b: b, scratch: true}
			bytes -= len(b)
		}
		return nil
	}
	for l := range h.Layers {
		kname, vname := fmt.Sprintf("layer %d keys", l), fmt.Sprintf("layer %d values", l)
		if m.kv == kvQ8 {
			// int8 values (any byte is one), then float16 scales
			const b8 = quant.KVBlock8
			kv.keys8[l], kv.values8[l] = kv.keys8[l][:nk], kv.values8[l][:nv]
			kv.keysD[l], kv.valuesD[l] = kv.keysD[l][:nk/b8], kv.valuesD[l][:nv/b8]
			for _, p := range []struct {
				kept   []byte
				scales []uint16
				skip   int
				name   string
			}{
				{i8Bytes(kv.keys8[l]), nil, fk - nk, kname},
				{u16Bytes(kv.keysD[l]), kv.keysD[l], 2 * (fk - nk) / b8, kname + " scales"},
				{i8Bytes(kv.values8[l]), nil, fv - nv, vname},
				{u16Bytes(kv.valuesD[l]), kv.valuesD[l], 2 * (fv - nv) / b8, vname + " scales"},
			} {
				if err = read(p.kept, nil, p.scales, p.name); err == nil {
					err = skip(p.skip, p.name)
				}
				if err != nil {
					break
				}
			}
			if err != nil {
				break
			}
			continue
		}
		if m.kv == kvF16 {
			kv.keys16[l], kv.values16[l] = kv.keys16[l][:nk], kv.values16[l][:nv]
			err = read(u16Bytes(kv.keys16[l]), nil, kv.keys16[l], kname)
		} else {
			kv.keys[l], kv.values[l] = kv.keys[l][:nk], kv.values[l][:nv]
			err = read(f32Bytes(kv.keys[l]), kv.keys[l], nil, kname)
		}
		if err == nil {
			err = skip((fk-nk)*elem, kname)
		}
		if err == nil && m.kv == kvF16 {
			err = read(u16Bytes(kv.values16[l]), nil, kv.values16[l], vname)
		} else if err == nil {
			err = read(f32Bytes(kv.values[l]), kv.values[l], nil, vname)
		}
		if err == nil {
			err = skip((fv-nv)*elem, vname)
		}
		if err != nil {
			break
		}
	}
	close(pieces)
	checkErr := <-bad
	if err != nil {
		return nil, nil, err
	}
	want := binary.LittleEndian.AppendUint32(nil, sum.Sum32())
	got := make([]byte, len(want))
	if _, err := io.ReadFull(r, got); err != nil {
		return nil, nil, fmt.Errorf("KV file: checksum: %w", err)
	}
	if !bytes.Equal(got, want) {
		return nil, nil, errors.New("KV file: the checksum does not match (a damaged file)")
	}
	if checkErr != nil {
		return nil, nil, checkErr
	}
	return &StoredKV{Scope: h.Scope, Tag: h.Tag, Tokens: tokens[:keep], kv: kv}, h, nil
}

// finiteF32 and finiteF16 report whether no value is an infinity or a
// NaN (all exponent bits set).
func finiteF32(x []float32) bool {
	for _, v := range x {
		if math.Float32bits(v)&0x7f800000 == 0x7f800000 {
			return false
		}
	}
	return true
}

func finiteF16(x []uint16) bool {
	for _, v := range x {
		if v&0x7c00 == 0x7c00 {
			return false
		}
	}
	return true
}

// f32Bytes and u16Bytes view slices as their bytes (the file is little
// endian, as every CPU the engine runs on).
func f32Bytes(x []float32) []byte {
	if len(x) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&x[0])), 4*len(x))
}

func i8Bytes(x []int8) []byte {
	if len(x) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&x[0])), len(x))
}

func u16Bytes(x []uint16) []byte {
	if len(x) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&x[0])), 2*len(x))
}
