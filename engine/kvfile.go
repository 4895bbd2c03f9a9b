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
)

// The KV file format (Model.WriteKV, Model.ReadKV, Model.ReadKVFile):
// one kept sequence's tokens, keys and values, exactly as they are in
// memory, so that a sequence read back computes what it computed; every
// part starts at a multiple of kvAlign (4 KB) so that a reader could map
// the file's pages as the slabs themselves (ReadKVFile does not, and
// says why):
//
//	head      magic "NPUCHATKV3\n" (11 bytes), uint32 little-endian
//	          length, then JSON (KVFileHeader), then header.Tokens ×
//	          uint32, then zeros to a multiple of kvAlign
//	layers    for each layer its parts (kvParts: the arrays the KV type
//	          keeps a layer in), each followed by zeros to a multiple of
//	          kvAlign; for float32 and float16 (header.Type), the keys
//	          (whole 16-position blocks), then the values, little-endian;
//	          for q8_0, the keys' int8 values, their float16 scales, the
//	          values' int8 values, their scales
//	checksums CRC-32C (Castagnoli) of the head, then of each layer's
//	          parts (with their zeros), uint32 little-endian each
//
// A reader trusts nothing before the checksums matched: the header's
// sizes are checked against the model first (a file of another model,
// another KV type or a damaged header is refused before anything is
// allocated), and the checksums refuse a damaged or truncated body. One
// checksum per part lets a reader check the parts in parallel (and, one
// day, a layer as it arrives).
//
// The checksums are there against damage (a disk or a copy gone wrong, a
// file cut short by a crash), not against someone who writes the folder
// on purpose: the folder is the user's own, beside the history. CRC-32C
// catches every error burst of up to 32 bits and all but one in 2³² of
// the others, at memory speed (the SSE 4.2 instruction), where SHA-256,
// used until version 1, took longer than reading a file from the page
// cache. Version 1 and 2 files are refused as not KV files.
const kvMagic = "NPUCHATKV3\n"

// kvAlign is what every part of a KV file starts at a multiple of: a
// page on x86-64 and most arm64 systems.
const kvAlign = 4096

// alignUp rounds n up to a multiple of kvAlign.
func alignUp(n int64) int64 { return (n + kvAlign - 1) / kvAlign * kvAlign }

// kvLayout is where a KV file's parts are.
type kvLayout struct {
	head   int64    // bytes of the head, with its zeros
	parts  []kvPart // a layer's parts (Model.kvParts)
	sizes  []int64  // their bytes in the file, with their zeros
	layer  int64    // a layer's bytes
	layers int
}

// layout is where the parts of a file of header h are, its head (before
// the zeros) raw bytes long.
func (m *Model) layout(h *KVFileHeader, raw int) kvLayout {
	lo := kvLayout{head: alignUp(int64(raw)), parts: m.kvParts(), layers: h.Layers}
	for _, p := range lo.parts {
		size := alignUp(int64(p.positions(h.Tokens) * p.perPos))
		lo.sizes = append(lo.sizes, size)
		lo.layer += size
	}
	return lo
}

// at is where part i of layer l starts.
func (lo kvLayout) at(l, i int) int64 {
	off := lo.head + int64(l)*lo.layer
	for _, size := range lo.sizes[:i] {
		off += size
	}
	return off
}

// sum is the index of part i of layer l's checksum (0 is the head's);
// count is how many checksums there are.
func (lo kvLayout) sum(l, i int) int { return 1 + l*len(lo.parts) + i }
func (lo kvLayout) count() int       { return 1 + lo.layers*len(lo.parts) }

// name names checksum i's part ("the head", "layer 3 keys").
func (lo kvLayout) name(i int) string {
	if i == 0 {
		return "the head"
	}
	return fmt.Sprintf("layer %d %s", (i-1)/len(lo.parts), lo.parts[(i-1)%len(lo.parts)].name)
}

// sums is where the checksums start, size the file's whole size.
func (lo kvLayout) sums() int64 { return lo.head + int64(lo.layers)*lo.layer }
func (lo kvLayout) size() int64 { return lo.sums() + 4*int64(lo.count()) }

// castagnoli is CRC-32C's table.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// zeros pads a KV file's parts.
var zeros [kvAlign]byte

// kvSum starts a KV file's checksum.
func kvSum() hash.Hash32 { return crc32.New(castagnoli) }

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

// kvMagic1 and kvMagic2 are the magics of versions 1 and 2 of the format.
const (
	kvMagic1 = "NPUCHATKV1\n"
	kvMagic2 = "NPUCHATKV2\n"
)

// IsOldKVFile reports whether the file at path is a KV file of an
// earlier version of the format (which this one refuses, so that a disk
// cache can delete it).
func IsOldKVFile(path string) bool {
	f, err := OpenKVFile(path)
	if err != nil {
		return false
	}
	defer f.Close()
	head := make([]byte, len(kvMagic))
	if _, err := io.ReadFull(f, head); err != nil {
		return false
	}
	return string(head) == kvMagic1 || string(head) == kvMagic2
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
	head := append([]byte(kvMagic), binary.LittleEndian.AppendUint32(nil, uint32(len(hj)))...)
	head = append(head, hj...)
	for _, t := range st.Tokens {
		head = binary.LittleEndian.AppendUint32(head, uint32(t))
	}
	lo := m.layout(&h, len(head))
	bw := bufio.NewWriterSize(w, 1<<20)
	sums := make([]byte, 0, 4*lo.count())
	// part writes b and the zeros to size bytes, and adds its checksum
	part := func(b []byte, size int64) {
		sum := crc32.Update(0, castagnoli, b)
		bw.Write(b)
		for pad := size - int64(len(b)); pad > 0; pad -= kvAlign {
			z := zeros[:min(pad, kvAlign)]
			sum = crc32.Update(sum, castagnoli, z)
			bw.Write(z)
		}
		sums = binary.LittleEndian.AppendUint32(sums, sum)
	}
	part(head, lo.head)
	for l := range c.Layers {
		for i, p := range lo.parts {
			part(p.bytes(st.kv, l, p.positions(len(st.Tokens))), lo.sizes[i])
		}
	}
	bw.Write(sums)
	if err := bw.Flush(); err != nil {
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

// readKVHead reads and checks a KV file's head up to its zeros (through
// sum, when not nil) and returns its header, its tokens and how many
// bytes that was.
func (m *Model) readKVHead(r io.Reader, identity string, sum hash.Hash) (*KVFileHeader, []int, int, error) {
	if sum != nil {
		r = io.TeeReader(r, sum)
	}
	head := make([]byte, len(kvMagic)+4)
	if _, err := io.ReadFull(r, head); err != nil {
		return nil, nil, 0, fmt.Errorf("not a KV file: %w", err)
	}
	if string(head[:len(kvMagic)]) != kvMagic {
		return nil, nil, 0, errors.New("not a KV file of this version (no NPUCHATKV3 magic)")
	}
	hl := binary.LittleEndian.Uint32(head[len(kvMagic):])
	if hl == 0 || hl > maxKVHeader {
		return nil, nil, 0, fmt.Errorf("KV file: header of %d bytes", hl)
	}
	hj := make([]byte, hl)
	if _, err := io.ReadFull(r, hj); err != nil {
		return nil, nil, 0, fmt.Errorf("KV file: header: %w", err)
	}
	var h KVFileHeader
	dec := json.NewDecoder(bytes.NewReader(hj))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&h); err != nil {
		return nil, nil, 0, fmt.Errorf("KV file: header: %w", err)
	}
	c := &m.cfg
	switch {
	case h.Identity != identity:
		return nil, nil, 0, fmt.Errorf("KV file of another model (%q, this is %q)", h.Identity, identity)
	case h.Layers != c.Layers || h.KVDim != c.KVHeads*c.HeadDim || h.Type != m.KVType():
		return nil, nil, 0, fmt.Errorf("KV file of another shape (%d layers × %d, %s; the model has %d × %d, %s)",
			h.Layers, h.KVDim, h.Type, c.Layers, c.KVHeads*c.HeadDim, m.KVType())
	case h.Tokens <= 0 || h.Tokens > 1<<24:
		return nil, nil, 0, fmt.Errorf("KV file of %d tokens", h.Tokens)
	case c.ContextLength > 0 && h.Tokens > c.ContextLength:
		// no session holds more (NewSession): not a file of this model,
		// and one that claims it would be read whole for its checksums
		return nil, nil, 0, fmt.Errorf("KV file of %d tokens, more than the model's context of %d", h.Tokens, c.ContextLength)
	}
	// the tokens as they arrive, not a buffer of the size the header
	// claims: a short file claiming 2²⁴ tokens costs what it holds
	var tbuf bytes.Buffer
	if n, err := io.Copy(&tbuf, io.LimitReader(r, 4*int64(h.Tokens))); err != nil || n != 4*int64(h.Tokens) {
		if err == nil {
			err = io.ErrUnexpectedEOF
		}
		return nil, nil, 0, fmt.Errorf("KV file: tokens: %w", err)
	}
	tb := tbuf.Bytes()
	tokens := make([]int, h.Tokens)
	for i := range tokens {
		t := binary.LittleEndian.Uint32(tb[4*i:])
		if int64(t) >= int64(c.VocabSize) {
			return nil, nil, 0, fmt.Errorf("KV file: token %d is outside the vocabulary", t)
		}
		tokens[i] = int(t)
	}
	return &h, tokens, len(head) + int(hl) + len(tb), nil
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
// anywhere, is an error. ReadKVFile reads a file faster.
//
// The keys and values are read straight into their slabs, layer by
// layer, while another goroutine checksums (and checks for values that
// are not finite) what was read before, so reading a file costs about
// the time of the reads, not reads plus hashing.
func (m *Model) ReadKV(r io.Reader, identity string, opts ReadKVOptions) (*StoredKV, *KVFileHeader, error) {
	sum := kvSum()
	h, tokens, raw, err := m.readKVHead(r, identity, sum)
	if err != nil {
		return nil, nil, err
	}
	lo := m.layout(h, raw)
	keep := keptOf(h.Tokens, opts)
	kv := m.newKVSlabs(max(opts.Capacity, keep), nil, 0)

	// the body's parts go to the checker in file order; what is not kept
	// (and the zeros) is read into scratch buffers that the checker gives
	// back
	type piece struct {
		b       []byte
		sum     int                 // which checksum (kvLayout.sum)
		finite  func(b []byte) bool // nil: not tested
		scratch bool
	}
	const scratchSize = 1 << 20
	free := make(chan []byte, 4)
	for range cap(free) {
		free <- make([]byte, scratchSize)
	}
	pieces := make(chan piece, 8)
	sums := make([]uint32, lo.count())
	bad := make(chan error, 1)
	go func() {
		var err error
		for p := range pieces {
			sums[p.sum] = crc32.Update(sums[p.sum], castagnoli, p.b)
			if p.scratch {
				free <- p.b[:cap(p.b)]
				continue
			}
			if err == nil && p.finite != nil && !p.finite(p.b) {
				err = fmt.Errorf("KV file: %s holds a value that is not finite", lo.name(p.sum))
			}
		}
		bad <- err
	}()
	skip := func(bytes int64, sum int) error {
		for bytes > 0 {
			b := <-free
			b = b[:min(bytes, int64(len(b)))]
			if _, err := io.ReadFull(r, b); err != nil {
				return fmt.Errorf("KV file: %s: %w", lo.name(sum), err)
			}
			pieces <- piece{b: b, sum: sum, scratch: true}
			bytes -= int64(len(b))
		}
		return nil
	}
	sums[0] = sum.Sum32()
	err = skip(lo.head-int64(raw), 0)
	for l := range h.Layers {
		for i, p := range lo.parts {
			if err != nil {
				break
			}
			// the kept positions straight into the slab, the rest skipped
			n := p.positions(keep)
			p.cut(kv, l, n)
			b := p.bytes(kv, l, n)
			populate(b) // the slab's memory in one call, not a fault per page as it is read into
			if _, err = io.ReadFull(r, b); err != nil {
				err = fmt.Errorf("KV file: %s: %w", lo.name(lo.sum(l, i)), err)
				break
			}
			pieces <- piece{b: b, sum: lo.sum(l, i), finite: p.finite}
			err = skip(lo.sizes[i]-int64(len(b)), lo.sum(l, i))
		}
	}
	close(pieces)
	checkErr := <-bad
	if err != nil {
		return nil, nil, err
	}
	want := make([]byte, 4*len(sums))
	if _, err := io.ReadFull(r, want); err != nil {
		return nil, nil, fmt.Errorf("KV file: checksums: %w", err)
	}
	if err := lo.check(want, sums); err != nil {
		return nil, nil, err
	}
	if checkErr != nil {
		return nil, nil, checkErr
	}
	return &StoredKV{Scope: h.Scope, Tag: h.Tag, Tokens: tokens[:keep], kv: kv}, h, nil
}

// keptOf is how many of a file's n positions a read keeps.
func keptOf(n int, opts ReadKVOptions) int {
	if opts.Keep > 0 && opts.Keep < n {
		return opts.Keep
	}
	return n
}

// check compares a file's checksums (want, as stored) with those
// computed, naming the first part that differs.
func (lo kvLayout) check(want []byte, got []uint32) error {
	for i, g := range got {
		if binary.LittleEndian.Uint32(want[4*i:]) != g {
			return fmt.Errorf("KV file: the checksum of %s does not match (a damaged file)", lo.name(i))
		}
	}
	return nil
}

// finiteF32 and finiteF16 report whether no value is an infinity or a
// NaN (all exponent bits set). They test 64 bits at a time: a lane whose
// exponent bits are all set is a zero lane of (x & exp) ^ exp, which the
// borrow of the subtraction finds (the classic test for a zero byte, in
// 32- or 16-bit lanes: exact, as the lanes' top bits are clear).
func finiteF32(x []float32) bool {
	const exp, ones, tops = 0x7f8000007f800000, 0x0000000100000001, 0x8000000080000000
	w := unsafe.Slice((*uint64)(unsafe.Pointer(unsafe.SliceData(x))), len(x)/2)
	for len(w) >= 4 {
		a, b, c, d := w[0]&exp^exp, w[1]&exp^exp, w[2]&exp^exp, w[3]&exp^exp
		if ((a-ones)&^a|(b-ones)&^b|(c-ones)&^c|(d-ones)&^d)&tops != 0 {
			return false
		}
		w = w[4:]
	}
	for _, v := range w {
		if v = v&exp ^ exp; (v-ones)&^v&tops != 0 {
			return false
		}
	}
	if len(x)%2 == 1 && math.Float32bits(x[len(x)-1])&0x7f800000 == 0x7f800000 {
		return false
	}
	return true
}

func finiteF16(x []uint16) bool {
	const exp, ones, tops = 0x7c007c007c007c00, 0x0001000100010001, 0x8000800080008000
	w := unsafe.Slice((*uint64)(unsafe.Pointer(unsafe.SliceData(x))), len(x)/4)
	for len(w) >= 4 {
		a, b, c, d := w[0]&exp^exp, w[1]&exp^exp, w[2]&exp^exp, w[3]&exp^exp
		if ((a-ones)&^a|(b-ones)&^b|(c-ones)&^c|(d-ones)&^d)&tops != 0 {
			return false
		}
		w = w[4:]
	}
	for _, v := range w {
		if v = v&exp ^ exp; (v-ones)&^v&tops != 0 {
			return false
		}
	}
	for _, v := range x[len(x)/4*4:] {
		if v&0x7c00 == 0x7c00 {
			return false
		}
	}
	return true
}

// ReadKVFile is ReadKV of a file opened by OpenKVFile: its size is
// checked against its header before memory is allocated for the
// positions the header claims, then its bytes are read (pread) into the
// sequence's own memory and checked there.
//
// The file is never mapped. A mapping's pages stay the file's: any
// process of the user (a backup or sync tool, a second NPU Chat on the
// same folder) could cut the file short under a session that reads them
// (a fault that ends the whole process) or change bytes after their
// checksum matched (values that reach an answer unchecked). Memory of
// the sequence's own holds exactly what was checked, whatever happens to
// the file afterwards. What that costs the reopen path: a copy from the
// page cache and the faults of fresh memory, where a mapping shared the
// page cache's pages; ReadKV asks for the memory in one call
// (populate) rather than a fault per page.
func (m *Model) ReadKVFile(f *os.File, identity string, opts ReadKVOptions) (*StoredKV, *KVFileHeader, error) {
	fi, err := f.Stat()
	if err != nil {
		return nil, nil, fmt.Errorf("KV file: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return nil, nil, fmt.Errorf("KV file: %s is not a regular file (%s)", fi.Name(), fi.Mode().Type())
	}
	size := fi.Size()
	h, _, raw, err := m.readKVHead(bufio.NewReaderSize(io.NewSectionReader(f, 0, size), 1<<16), identity, nil)
	if err != nil {
		return nil, nil, err
	}
	if want := m.layout(h, raw).size(); size != want {
		return nil, nil, fmt.Errorf("KV file of %d bytes, its header says %d (cut short or damaged)", size, want)
	}
	// a section of the size checked: a file grown meanwhile reads as the
	// one checked, one cut short as an early end (an error)
	return m.ReadKV(bufio.NewReaderSize(io.NewSectionReader(f, 0, size), 1<<16), identity, opts)
}

// OpenKVFile opens a KV file for ReadKVFile or ReadKVHeader without ever
// waiting: a FIFO, a device or a folder named like a KV file (anything
// but a regular file) is refused at once, and so is a symbolic link in
// its place. A KV file's size is checked against its header as it is
// read.
func OpenKVFile(path string) (*os.File, error) {
	f, err := os.OpenFile(path, openKVFlags, 0)
	if err != nil {
		return nil, fmt.Errorf("KV file: %w", err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("KV file: %w", err)
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("KV file: %s is not a regular file (%s)", path, fi.Mode().Type())
	}
	return f, nil
}
