package check

import (
	"bytes"
	"encoding/binary"
)

// ldCacheMagic starts the table of /etc/ld.so.cache that glibc 2.32 and
// later write (struct cache_file_new in glibc's dl-cache.h). Older files
// put an "ld.so-1.7.0" table first and this one after it.
const ldCacheMagic = "glibc-ld.so.cache1.1"

// ldCacheLookup returns the paths /etc/ld.so.cache lists for a soname,
// in cache order: what the dynamic loader would load. A cache it cannot
// read gives nothing (the other search directories still apply).
//
// Layout: a 48-byte header (magic and version, 20 bytes; nlibs u32;
// len_strings u32; flags, padding, extension offset and unused words),
// then nlibs 24-byte entries (flags i32; key u32; value u32; osversion
// u32; hwcap u64), where key and value are offsets of NUL-terminated
// strings from the start of this header.
func ldCacheLookup(cache []byte, soname string) []string {
	start := bytes.Index(cache, []byte(ldCacheMagic))
	if start < 0 {
		return nil
	}
	b := cache[start:]
	const headerSize, entrySize = 48, 24
	if len(b) < headerSize {
		return nil
	}
	n := int(binary.LittleEndian.Uint32(b[20:]))
	if n < 0 || n > (len(b)-headerSize)/entrySize {
		return nil
	}
	str := func(off uint32) (string, bool) {
		if int(off) >= len(b) {
			return "", false
		}
		end := bytes.IndexByte(b[off:], 0)
		if end < 0 {
			return "", false
		}
		return string(b[off : int(off)+end]), true
	}
	var out []string
	for i := range n {
		e := b[headerSize+i*entrySize:]
		key, ok := str(binary.LittleEndian.Uint32(e[4:]))
		if !ok || key != soname {
			continue
		}
		if value, ok := str(binary.LittleEndian.Uint32(e[8:])); ok {
			out = append(out, value)
		}
	}
	return out
}
