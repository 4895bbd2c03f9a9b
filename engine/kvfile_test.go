package engine

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"unsafe"
)

// kvReaders are the ways to read a KV file: ReadKV from a stream,
// ReadKVFile from a file.
var kvReaders = []struct {
	name string
	read func(t *testing.T, m *Model, file []byte, identity string, opts ReadKVOptions) (*StoredKV, *KVFileHeader, error)
}{
	{"stream", func(_ *testing.T, m *Model, file []byte, identity string, opts ReadKVOptions) (*StoredKV, *KVFileHeader, error) {
		return m.ReadKV(bytes.NewReader(file), identity, opts)
	}},
	{"file", func(t *testing.T, m *Model, file []byte, identity string, opts ReadKVOptions) (*StoredKV, *KVFileHeader, error) {
		return m.ReadKVFile(kvTempFile(t, file), identity, opts)
	}},
}

// kvTempFile is file's bytes in a file, open for reading (closed with
// the test).
func kvTempFile(t *testing.T, file []byte) *os.File {
	t.Helper()
	p := filepath.Join(t.TempDir(), "c.kv")
	if err := os.WriteFile(p, file, 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := OpenKVFile(p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// keptSequence computes prompt in a fresh cache and returns what it kept.
func keptSequence(t *testing.T, m *Model, prompt []int) *StoredKV {
	t.Helper()
	c := m.NewKVCache(KVCacheOptions{Budget: 1 << 30})
	s := c.NewSession(0)
	s.SetTag("chat-1")
	if _, err := s.Resume("scope", prompt); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Prefill(prompt); err != nil {
		t.Fatal(err)
	}
	s.Keep()
	return c.Kept()[0]
}

func kvFileBytes(t *testing.T, m *Model, st *StoredKV) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := m.WriteKV(&b, st, "model-id"); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// slabStart is the address of layer 0's keys (to tell whether a slab was
// copied).
func slabStart(kv *kvSlabs) uintptr {
	if kv.keys != nil {
		return uintptr(unsafe.Pointer(unsafe.SliceData(kv.keys[0])))
	}
	if kv.keys8 != nil {
		return uintptr(unsafe.Pointer(unsafe.SliceData(kv.keys8[0])))
	}
	return uintptr(unsafe.Pointer(unsafe.SliceData(kv.keys16[0])))
}

// TestKVFileResumesInPlace: a KV file read back with room for a prompt is
// the same sequence (tokens, scope, tag), and a session resuming from it
// computes the rest of the prompt in the slabs that were read, without
// copying them to grow, bit for bit as a fresh computation.
func TestKVFileResumesInPlace(t *testing.T) {
	for _, typ := range KVTypes() {
		m := kvModel(t, LoadOptions{KVCacheType: typ})
		if m.KVType() != typ {
			t.Fatalf("asked for a %s KV cache: %s", typ, m.KVTypeChoice())
		}
		chat := seqTokens(30, 90) // 90: a partial last block
		more := cat(chat, seqTokens(31, 40))
		file := kvFileBytes(t, m, keptSequence(t, m, chat))
		for _, rd := range kvReaders {
			t.Run(typ+"/"+rd.name, func(t *testing.T) {
				st, h, err := rd.read(t, m, file, "model-id", ReadKVOptions{Capacity: len(more) + 8})
				if err != nil {
					t.Fatal(err)
				}
				if fmt.Sprint(st.Tokens) != fmt.Sprint(chat) || st.Scope != "scope" || st.Tag != "chat-1" || h.Tokens != len(chat) {
					t.Fatalf("read back %d tokens, scope %q, tag %q; want the %d written, \"scope\", \"chat-1\"", len(st.Tokens), st.Scope, st.Tag, len(chat))
				}
				if st.kv.capPos < len(more) {
					t.Fatalf("read with room for %d positions, holds %d", len(more)+8, st.kv.capPos)
				}
				c := m.NewKVCache(KVCacheOptions{Budget: 1 << 30})
				if !c.Insert(st) {
					t.Fatal("the cache did not take the sequence read back")
				}
				at := slabStart(st.kv)
				s := c.NewSession(0)
				n, err := s.Resume("scope", more)
				if err != nil || n != len(chat) {
					t.Fatalf("resumed %d positions (%v), want %d", n, err, len(chat))
				}
				l, err := s.Prefill(more[n:])
				if err != nil {
					t.Fatal(err)
				}
				if slabStart(s.kv) != at {
					t.Error("the slabs read back were copied to grow")
				}
				if fmt.Sprint(l) != freshLogits(t, m, more) {
					t.Error("resumed from the file: logits differ from a fresh computation")
				}
			})
		}
	}
}

// TestKVFileRefusesDamage: a KV file changed in any part (header, tokens,
// keys, values, checksum), cut short anywhere, holding a value that is
// not finite under a valid checksum, or of another identity, is an
// error, never a sequence.
func TestKVFileRefusesDamage(t *testing.T) {
	for _, typ := range KVTypes() {
		t.Run(typ, func(t *testing.T) {
			m := kvModel(t, LoadOptions{KVCacheType: typ})
			if m.KVType() != typ {
				t.Fatalf("asked for a %s KV cache: %s", typ, m.KVTypeChoice())
			}
			chat := seqTokens(32, 70)
			st := keptSequence(t, m, chat)
			file := kvFileBytes(t, m, st)
			for _, rd := range kvReaders {
				if _, _, err := rd.read(t, m, file, "model-id", ReadKVOptions{}); err != nil {
					t.Fatalf("%s: the intact file: %v", rd.name, err)
				}
				hl := int(file[len(kvMagic)]) | int(file[len(kvMagic)+1])<<8
				body := len(kvMagic) + 4 + hl + 4*len(chat)
				flip := map[string]int{
					"header": len(kvMagic) + 4 + hl/2, "tokens": body - 3, "first keys": body + 5,
					"middle": (body + len(file)) / 2, "last values": len(file) - 40, "checksum": len(file) - 1,
				}
				for name, at := range flip {
					bad := append([]byte(nil), file...)
					bad[at] ^= 0x10
					for _, keep := range []int{0, 20} { // all, or a prefix: the rest is checked too
						if _, _, err := rd.read(t, m, bad, "model-id", ReadKVOptions{Keep: keep}); err == nil {
							t.Errorf("%s: a byte changed in the %s (offset %d of %d), keeping %d: read without an error", rd.name, name, at, len(file), keep)
						}
					}
				}
				for _, n := range []int{0, 5, len(kvMagic) + 2, body - 1, body + 100, len(file) / 2, len(file) - 5, len(file) - 4, len(file) - 1} {
					if _, _, err := rd.read(t, m, file[:n], "model-id", ReadKVOptions{}); err == nil {
						t.Errorf("%s: cut to %d of %d bytes: read without an error", rd.name, n, len(file))
					}
				}
				if _, _, err := rd.read(t, m, append(file, 0), "model-id", ReadKVOptions{}); err == nil && rd.name != "stream" {
					t.Errorf("%s: a byte too many: read without an error", rd.name)
				}
				if _, _, err := rd.read(t, m, file, "another model", ReadKVOptions{}); err == nil || !strings.Contains(err.Error(), "another model") {
					t.Errorf("%s: another identity: %v", rd.name, err)
				}

				for _, part := range []string{"keys", "values"} {
					nan := keptSequence(t, m, chat)
					switch {
					case typ == KVTypeQ8 && part == "keys": // a scale
						nan.kv.keysD[1][7] = 0x7e00
					case typ == KVTypeQ8:
						nan.kv.valuesD[0][len(nan.kv.valuesD[0])-1] = 0x7c00
					case typ == KVTypeF16 && part == "keys":
						nan.kv.keys16[1][7] = 0x7e00
					case typ == KVTypeF16:
						nan.kv.values16[0][len(nan.kv.values16[0])-1] = 0x7c00
					case part == "keys":
						nan.kv.keys[1][7] = float32(math.NaN())
					default:
						nan.kv.values[0][len(nan.kv.values[0])-1] = float32(math.Inf(1))
					}
					_, _, err := rd.read(t, m, kvFileBytes(t, m, nan), "model-id", ReadKVOptions{})
					if err == nil || !strings.Contains(err.Error(), "not finite") {
						t.Errorf("%s: a value that is not finite in the %s: %v", rd.name, part, err)
					}
				}
			}
		})
	}
}

// TestKVFileKeepsThePrefix: a prompt that shares only part of a KV file
// reads only that part into memory (the rest is checked, not kept), and
// resuming from it computes bit for bit what a fresh computation does.
func TestKVFileKeepsThePrefix(t *testing.T) {
	for _, typ := range KVTypes() {
		m := kvModel(t, LoadOptions{KVCacheType: typ})
		if m.KVType() != typ {
			t.Fatalf("asked for a %s KV cache: %s", typ, m.KVTypeChoice())
		}
		chat := seqTokens(33, 90)
		file := kvFileBytes(t, m, keptSequence(t, m, chat))
		edited := cat(chat[:37], seqTokens(34, 20)) // the chat edited after 37 tokens
		for _, rd := range kvReaders {
			t.Run(typ+"/"+rd.name, func(t *testing.T) {
				st, _, err := rd.read(t, m, file, "model-id", ReadKVOptions{Keep: 37, Capacity: len(edited) + 8})
				if err != nil {
					t.Fatal(err)
				}
				if fmt.Sprint(st.Tokens) != fmt.Sprint(chat[:37]) {
					t.Fatalf("kept %d tokens, want the first 37", len(st.Tokens))
				}
				if got, want := slabBytes(st.kv), m.KVBytes(len(edited)+8); got != want {
					t.Errorf("the prefix read takes %d bytes, want the %d of its capacity (the file holds %d)", got, want, m.KVBytes(len(chat)))
				}
				c := m.NewKVCache(KVCacheOptions{Budget: 1 << 30})
				c.Insert(st)
				s := c.NewSession(0)
				n, err := s.Resume("scope", edited)
				if err != nil || n != 37 {
					t.Fatalf("resumed %d (%v), want 37", n, err)
				}
				l, err := s.Prefill(edited[n:])
				if err != nil {
					t.Fatal(err)
				}
				if fmt.Sprint(l) != freshLogits(t, m, edited) {
					t.Error("resumed from a prefix of the file: logits differ from a fresh computation")
				}
			})
		}
	}
}

// TestFiniteChecks: finiteF32 and finiteF16 (64 bits at a time) find an
// infinity or a NaN at every position of slices of every length up to
// a few words past their unrolled loop, and pass every finite value,
// the largest and the subnormal ones included.
func TestFiniteChecks(t *testing.T) {
	f32s := []struct {
		name   string
		v      float32
		finite bool
	}{
		{"zero", 0, true}, {"-0", float32(math.Copysign(0, -1)), true}, {"largest", math.MaxFloat32, true},
		{"-largest", -math.MaxFloat32, true}, {"subnormal", math.SmallestNonzeroFloat32, true}, {"one", 1, true},
		{"+inf", float32(math.Inf(1)), false}, {"-inf", float32(math.Inf(-1)), false}, {"nan", float32(math.NaN()), false},
		{"nan with a sign", math.Float32frombits(0xffc00001), false},
	}
	f16s := []struct {
		name   string
		v      uint16
		finite bool
	}{
		{"zero", 0, true}, {"largest", 0x7bff, true}, {"-largest", 0xfbff, true}, {"subnormal", 0x0001, true},
		{"+inf", 0x7c00, false}, {"-inf", 0xfc00, false}, {"nan", 0x7e00, false}, {"-nan", 0xfe01, false},
	}
	for n := 1; n <= 23; n++ {
		for at := range n {
			for _, c := range f32s {
				x := make([]float32, n)
				for i := range x {
					x[i] = 1.5 // a finite background with its exponent bits partly set
				}
				x[at] = c.v
				if got := finiteF32(x); got != c.finite {
					t.Errorf("f32 %s at %d of %d: finite %v, want %v", c.name, at, n, got, c.finite)
				}
				if got := finiteF32(x[1:]); at > 0 && got != c.finite { // not 8-byte aligned
					t.Errorf("f32 %s at %d of %d, from 1: finite %v, want %v", c.name, at, n, got, c.finite)
				}
			}
			for _, c := range f16s {
				x := make([]uint16, n)
				for i := range x {
					x[i] = 0x3e00 // 1.5
				}
				x[at] = c.v
				if got := finiteF16(x); got != c.finite {
					t.Errorf("f16 %s at %d of %d: finite %v, want %v", c.name, at, n, got, c.finite)
				}
				if got := finiteF16(x[1:]); at > 0 && got != c.finite {
					t.Errorf("f16 %s at %d of %d, from 1: finite %v, want %v", c.name, at, n, got, c.finite)
				}
			}
		}
	}
	if !finiteF32(nil) || !finiteF16(nil) {
		t.Error("an empty slice is not finite")
	}
}

// TestKVFileOfAnotherType: a KV file written by a model with another KV
// cache type is refused (its header's type names it), under the same
// identity string and shape, before anything is allocated, both ways
// between every pair of types; the model's own type reads back.
func TestKVFileOfAnotherType(t *testing.T) {
	models := map[string]*Model{}
	files := map[string][]byte{}
	chat := seqTokens(35, 40)
	for _, typ := range KVTypes() {
		m := kvModel(t, LoadOptions{KVCacheType: typ})
		models[typ], files[typ] = m, kvFileBytes(t, m, keptSequence(t, m, chat))
	}
	for _, wrote := range KVTypes() {
		for _, reads := range KVTypes() {
			_, _, err := models[reads].ReadKV(bytes.NewReader(files[wrote]), "model-id", ReadKVOptions{})
			if _, _, herr := models[reads].ReadKVHeader(bytes.NewReader(files[wrote]), "model-id"); (herr == nil) != (err == nil) {
				t.Errorf("%s file, %s model: ReadKVHeader %v but ReadKV %v", wrote, reads, herr, err)
			}
			switch {
			case wrote == reads && err != nil:
				t.Errorf("%s file read by its own type: %v", wrote, err)
			case wrote != reads && (err == nil || !strings.Contains(err.Error(), "another shape") || !strings.Contains(err.Error(), wrote)):
				t.Errorf("%s file read by a %s model: %v, want refused as another shape naming %s", wrote, reads, err, wrote)
			}
		}
	}
}

// TestKVFileClaimCostsNothing: a short file whose header claims 2²⁴
// tokens is refused having allocated about what it holds, not the 64 MB
// of tokens (nor the keys and values) the header asks for.
func TestKVFileClaimCostsNothing(t *testing.T) {
	m := kvModel(t, LoadOptions{})
	file := kvFileBytes(t, m, keptSequence(t, m, seqTokens(50, 20)))
	hl := int(binary.LittleEndian.Uint32(file[len(kvMagic):]))
	hj := file[len(kvMagic)+4 : len(kvMagic)+4+hl]
	claim := bytes.Replace(hj, []byte(`"tokens":20,`), []byte(`"tokens":16777216,`), 1)
	if bytes.Equal(claim, hj) {
		t.Fatalf("no token count in the header %s", hj)
	}
	forged := append([]byte(kvMagic), binary.LittleEndian.AppendUint32(nil, uint32(len(claim)))...)
	forged = append(append(forged, claim...), file[len(kvMagic)+4+hl:]...)
	for _, rd := range []struct {
		name string
		read func() error
	}{
		{"header", func() error { _, _, err := m.ReadKVHeader(bytes.NewReader(forged), "model-id"); return err }},
		{"stream", func() error { _, _, err := m.ReadKV(bytes.NewReader(forged), "model-id", ReadKVOptions{}); return err }},
		{"file", func() error {
			_, _, err := m.ReadKVFile(kvTempFile(t, forged), "model-id", ReadKVOptions{})
			return err
		}},
	} {
		t.Run(rd.name, func(t *testing.T) {
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			err := rd.read()
			runtime.ReadMemStats(&after)
			if err == nil {
				t.Fatal("a file claiming 2²⁴ tokens it does not hold was read")
			}
			if got := after.TotalAlloc - before.TotalAlloc; got > 8<<20 {
				t.Errorf("refusing a %d-byte file allocated %d MB (%v)", len(forged), got>>20, err)
			}
		})
	}
}

// TestKVFileLongerThanTheContext: a file that claims more tokens than
// the model's context (which no session holds, so no disk cache wrote)
// is refused at its header, before its body (gigabytes, were it real) is
// read for its checksums.
func TestKVFileLongerThanTheContext(t *testing.T) {
	m := kvModel(t, LoadOptions{})
	n := m.Config().ContextLength
	if n <= 0 {
		t.Fatal("the test model has no context length")
	}
	file := kvFileBytes(t, m, keptSequence(t, m, seqTokens(51, 20)))
	hl := int(binary.LittleEndian.Uint32(file[len(kvMagic):]))
	hj := file[len(kvMagic)+4 : len(kvMagic)+4+hl]
	claim := bytes.Replace(hj, []byte(`"tokens":20,`), []byte(fmt.Sprintf(`"tokens":%d,`, n+1)), 1)
	forged := append([]byte(kvMagic), binary.LittleEndian.AppendUint32(nil, uint32(len(claim)))...)
	forged = append(forged, claim...)
	forged = append(forged, make([]byte, 4*(n+1))...) // its tokens: all there
	if _, _, err := m.ReadKVHeader(bytes.NewReader(forged), "model-id"); err == nil || !strings.Contains(err.Error(), "context") {
		t.Errorf("a header of %d tokens, the context %d: %v; want refused for the context", n+1, n, err)
	}
}
