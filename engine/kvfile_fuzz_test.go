package engine

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/npuchat/npuchat/engine/testmodel"
)

// FuzzReadKVFile: any bytes in a KV file are an error or a sequence,
// never a panic, a hang or an allocation the header asks for before the
// file's size says it is there; a file ReadKVFile accepts, ReadKV
// accepts too, as the same sequence, and a session resumes from it and
// computes on. The seeds are a real small file of a one-layer model
// (float16 keys and values, whose finiteness is checked, 12 KB: inputs
// the fuzzer minimizes in seconds) and pieces of it.
func FuzzReadKVFile(f *testing.F) {
	shape := tinyShape()
	shape.Layers = 1
	w, err := testmodel.Random(3, shape)
	if err != nil {
		f.Fatal(err)
	}
	mp := filepath.Join(f.TempDir(), "m.gguf")
	if err := testmodel.WriteGGUF(mp, w, testmodel.Q8_0); err != nil {
		f.Fatal(err)
	}
	m, err := Load(mp, LoadOptions{Threads: 1, KVCacheType: KVTypeF16})
	if err != nil {
		f.Fatal(err)
	}
	defer m.Close()
	if m.KVType() != KVTypeF16 {
		f.Fatalf("asked for an f16 KV cache: %s", m.KVTypeChoice())
	}
	c := m.NewKVCache(KVCacheOptions{Budget: 1 << 30})
	s := c.NewSession(0)
	s.SetTag("chat-1")
	prompt := seqTokens(5, 20)
	if _, err := s.Resume("scope", prompt); err != nil {
		f.Fatal(err)
	}
	if _, err := s.Prefill(prompt); err != nil {
		f.Fatal(err)
	}
	s.Keep()
	var seed bytes.Buffer
	if err := m.WriteKV(&seed, c.Kept()[0], "model-id"); err != nil {
		f.Fatal(err)
	}
	file := seed.Bytes()
	f.Add(file)
	f.Add(file[:kvAlign])
	f.Add(file[:len(kvMagic)+4+100])
	f.Add(file[:len(file)-4])

	p := filepath.Join(f.TempDir(), "chat-1-fuzz.kv") // one input at a time in a process
	f.Fuzz(func(t *testing.T, data []byte) {
		opts := ReadKVOptions{Capacity: 64}
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		fl, err := OpenKVFile(p)
		if err != nil {
			t.Fatal(err)
		}
		defer fl.Close()
		st, h, err := m.ReadKVFile(fl, "model-id", opts)
		st2, h2, err2 := m.ReadKV(bytes.NewReader(data), "model-id", opts)
		if err != nil {
			return
		}
		if err2 != nil {
			t.Fatalf("ReadKVFile accepted what ReadKV refuses: %v", err2)
		}
		if fmt.Sprint(*h) != fmt.Sprint(*h2) || fmt.Sprint(st.Tokens) != fmt.Sprint(st2.Tokens) {
			t.Fatalf("ReadKVFile and ReadKV read %+v %v and %+v %v", *h, st.Tokens, *h2, st2.Tokens)
		}
		for l := range h.Layers {
			for _, part := range m.kvParts() {
				n := part.positions(len(st.Tokens))
				if !bytes.Equal(part.bytes(st.kv, l, n), part.bytes(st2.kv, l, n)) {
					t.Fatalf("ReadKVFile and ReadKV read layer %d %s differently", l, part.name)
				}
			}
		}
		c := m.NewKVCache(KVCacheOptions{Budget: 1 << 30})
		if !c.Insert(st) {
			return // larger than the budget: refused, as a file should be
		}
		s := c.NewSession(0)
		next := append(append([]int(nil), st.Tokens...), 1)
		n, err := s.Resume(h.Scope, next)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Prefill(next[n:]); err != nil {
			t.Fatalf("a sequence read from an accepted file cannot compute on: %v", err)
		}
	})
}
