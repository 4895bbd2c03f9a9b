package check

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"
)

// buildLDCache writes a cache in glibc's new format, optionally after an
// old-format table, with the given soname → path entries.
func buildLDCache(oldPrefix bool, entries [][2]string) []byte {
	var strs []byte
	type ent struct{ key, value uint32 }
	var es []ent
	base := uint32(48 + 24*len(entries))
	for _, e := range entries {
		k := base + uint32(len(strs))
		strs = append(append(strs, e[0]...), 0)
		v := base + uint32(len(strs))
		strs = append(append(strs, e[1]...), 0)
		es = append(es, ent{k, v})
	}
	h := make([]byte, 48)
	copy(h, ldCacheMagic)
	binary.LittleEndian.PutUint32(h[20:], uint32(len(entries)))
	binary.LittleEndian.PutUint32(h[24:], uint32(len(strs)))
	for _, e := range es {
		rec := make([]byte, 24)
		binary.LittleEndian.PutUint32(rec[0:], 0x0303)
		binary.LittleEndian.PutUint32(rec[4:], e.key)
		binary.LittleEndian.PutUint32(rec[8:], e.value)
		h = append(h, rec...)
	}
	out := append(h, strs...)
	if oldPrefix {
		out = append([]byte("ld.so-1.7.0\x00\x00\x00\x00\x00garbage-old-table"), out...)
	}
	return out
}

func TestLDCacheLookup(t *testing.T) {
	entries := [][2]string{
		{"libz.so.1", "/lib/x86_64-linux-gnu/libz.so.1"},
		{"libxrt_coreutil.so.2", "/usr/lib/x86_64-linux-gnu/libxrt_coreutil.so.2"},
		{"libxrt_coreutil.so.2", "/opt/xilinx/xrt/lib/libxrt_coreutil.so.2"},
	}
	for _, old := range []bool{false, true} {
		got := ldCacheLookup(buildLDCache(old, entries), "libxrt_coreutil.so.2")
		if len(got) != 2 || got[0] != entries[1][1] || got[1] != entries[2][1] {
			t.Errorf("old prefix %v: %v", old, got)
		}
	}
	for _, bad := range [][]byte{nil, []byte("nonsense"), []byte(ldCacheMagic + "\xff\xff\xff\x7f"), buildLDCache(false, entries)[:60]} {
		if got := ldCacheLookup(bad, "libz.so.1"); got != nil {
			t.Errorf("bad cache gave %v", got)
		}
	}
}

// TestLDCacheOfThisMachine reads the real /etc/ld.so.cache: libc.so.6 is
// in every glibc system's cache.
func TestLDCacheOfThisMachine(t *testing.T) {
	b, err := os.ReadFile("/etc/ld.so.cache")
	if err != nil {
		t.Fatalf("read /etc/ld.so.cache: %v (this test needs a glibc system)", err)
	}
	got := ldCacheLookup(b, "libc.so.6")
	if len(got) == 0 {
		t.Fatal("libc.so.6 not found in /etc/ld.so.cache")
	}
	if filepath.Base(got[0]) != "libc.so.6" {
		t.Errorf("libc.so.6 -> %v", got)
	}
	if _, err := os.Stat(got[0]); err != nil {
		t.Errorf("cache path %s: %v", got[0], err)
	}
}
