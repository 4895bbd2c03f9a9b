package engine

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/npuchat/npuchat/engine/mmapfile"
	"github.com/npuchat/npuchat/engine/quant"
)

// The q4nx cache: FastFlowLM's model.q4nx stores its matrices in the
// NPU's chunk layout, which the CPU kernels cannot read, so loading it
// means unpacking every matrix (and repacking it for the AVX-512
// kernels). With LoadOptions.CacheDir set, the first load writes the
// matrices, exactly as the kernels read them (after KV folding), into
// one file in that folder; a later load maps that file instead, which
// takes well under a second and keeps one copy of the weights (the
// mapping). The file is keyed by the source's path, size and
// modification time and by what shapes its content (layout, folding), so
// a changed model.q4nx or other options make a new one; files are only
// ever written inside CacheDir, never next to the model.

// cacheMagic starts every cache file; cacheVersion changes whenever the
// content for the same key would differ (packed layout, unpacking).
const (
	cacheMagic   = "NPUCHAT-Q4NX-CACHE\n"
	cacheVersion = 1
	cacheAlign   = 4096
)

// cacheHeader is the cache file's JSON index.
type cacheHeader struct {
	Version int         `json:"version"`
	Source  cacheSource `json:"source"`
	Layout  string      `json:"layout"` // "packed16" (quant.Packed) or "rows" (quant.Q4_1BF16 rows)
	Fold    bool        `json:"fold"`
	// KVHeads are the KV heads after folding; FileKVHeads the source's.
	KVHeads     int          `json:"kv_heads"`
	FileKVHeads int          `json:"file_kv_heads"`
	Tensors     []cacheEntry `json:"tensors"`
}

// cacheSource identifies the model.q4nx a cache was made from.
type cacheSource struct {
	Path    string `json:"path"`
	Size    int64  `json:"size"`
	ModTime int64  `json:"mtime_ns"`
}

type cacheEntry struct {
	Name   string     `json:"name"`
	Type   quant.Type `json:"type"`
	Rows   int        `json:"rows"`
	Cols   int        `json:"cols"`
	Packed bool       `json:"packed"`
	Offset int64      `json:"offset"`
	Size   int64      `json:"size"`
}

// cacheKey names the cache file for a source and the content options.
func cacheKey(src cacheSource, layout string, fold bool) string {
	h := sha256.New()
	fmt.Fprintf(h, "v%d\x00%s\x00%d\x00%d\x00%s\x00%v", cacheVersion, src.Path, src.Size, src.ModTime, layout, fold)
	return "q4nx-" + hex.EncodeToString(h.Sum(nil)[:12]) + ".bin"
}

// q4nxIdentity reads what keys the cache for the model.q4nx at path.
func q4nxIdentity(path string) (cacheSource, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return cacheSource{}, err
	}
	st, err := os.Stat(abs)
	if err != nil {
		return cacheSource{}, err
	}
	return cacheSource{Path: abs, Size: st.Size(), ModTime: st.ModTime().UnixNano()}, nil
}

// cacheMatrices lists the model's matrices with their cache names, in
// file order.
func (m *Model) cacheMatrices() []struct {
	name string
	mat  *matrix
} {
	type nm = struct {
		name string
		mat  *matrix
	}
	list := []nm{{hfNames.embed, &m.embed}}
	if !m.cfg.Tied {
		list = append(list, nm{hfNames.output, &m.output})
	}
	for i := range m.layers {
		w := &m.layers[i]
		for _, x := range []struct {
			pattern string
			mat     *matrix
		}{{hfNames.q, &w.wq}, {hfNames.k, &w.wk}, {hfNames.v, &w.wv}, {hfNames.o, &w.wo},
			{hfNames.gate, &w.gate}, {hfNames.up, &w.up}, {hfNames.down, &w.down}} {
			list = append(list, nm{fmt.Sprintf(x.pattern, i), x.mat})
		}
	}
	return list
}

// writeCache writes the model's matrices into dir/name (through a
// temporary file renamed into place, so a crash leaves no half file).
func (m *Model) writeCache(dir, name string, hdr cacheHeader) (err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	mats := m.cacheMatrices()
	off := int64(0)
	bodies := make([][]byte, len(mats))
	for i, x := range mats {
		e := cacheEntry{Name: x.name, Type: x.mat.Type, Rows: x.mat.Rows, Cols: x.mat.Cols}
		b := x.mat.Data
		if x.mat.packed != nil {
			e.Packed, b = true, x.mat.packed.Data
		}
		e.Offset, e.Size = off, int64(len(b))
		off += (e.Size + cacheAlign - 1) / cacheAlign * cacheAlign
		hdr.Tensors = append(hdr.Tensors, e)
		bodies[i] = b
	}
	js, err := json.Marshal(hdr)
	if err != nil {
		return err
	}
	head := append([]byte(cacheMagic), make([]byte, 8)...)
	binary.LittleEndian.PutUint64(head[len(cacheMagic):], uint64(len(js)))
	head = append(head, js...)
	dataStart := (int64(len(head)) + cacheAlign - 1) / cacheAlign * cacheAlign
	f, err := os.CreateTemp(dir, name+".*.tmp")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if _, err := f.Write(head); err != nil {
		return err
	}
	for i, b := range bodies {
		if _, err := f.WriteAt(b, dataStart+hdr.Tensors[i].Offset); err != nil {
			return err
		}
	}
	if err := f.Truncate(dataStart + off); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), filepath.Join(dir, name))
}

// openCache maps dir/name and checks it against src; a missing, stale or
// damaged file is reported as an error (the caller then rebuilds it).
func openCache(dir, name string, src cacheSource) (*mmapfile.File, *cacheHeader, map[string][]byte, error) {
	mf, err := mmapfile.Open(filepath.Join(dir, name))
	if err != nil {
		return nil, nil, nil, err
	}
	// The kernels read the matrices straight from this mapping: 2 MB
	// pages where the page cache has them (as for the packed GGUF
	// weights, see arena), and 2 MB read-ahead when it does not.
	adviseHuge(mf.Data)
	hdr, bodies, err := parseCache(mf.Data, src)
	if err != nil {
		mf.Close()
		return nil, nil, nil, fmt.Errorf("cache %s: %w", filepath.Join(dir, name), err)
	}
	return mf, hdr, bodies, nil
}

func parseCache(data []byte, src cacheSource) (*cacheHeader, map[string][]byte, error) {
	n := len(cacheMagic)
	if len(data) < n+8 || string(data[:n]) != cacheMagic {
		return nil, nil, errors.New("not a cache file")
	}
	hl := binary.LittleEndian.Uint64(data[n:])
	if hl > uint64(len(data)-n-8) {
		return nil, nil, errors.New("header runs past the end")
	}
	var hdr cacheHeader
	if err := json.Unmarshal(data[n+8:n+8+int(hl)], &hdr); err != nil {
		return nil, nil, fmt.Errorf("header: %w", err)
	}
	if hdr.Version != cacheVersion || hdr.Source != src {
		return nil, nil, errors.New("made from another file or version")
	}
	dataStart := (int64(n+8+int(hl)) + cacheAlign - 1) / cacheAlign * cacheAlign
	bodies := map[string][]byte{}
	for _, e := range hdr.Tensors {
		want := int64(0)
		if e.Packed {
			want = int64(quant.PackedBytes(e.Type, e.Rows, e.Cols))
		} else if rb, err := e.Type.RowBytes(e.Cols); err == nil {
			want = int64(e.Rows) * int64(rb)
		}
		if e.Size != want || e.Offset < 0 || dataStart+e.Offset+e.Size > int64(len(data)) {
			return nil, nil, fmt.Errorf("tensor %s: %d bytes at %d do not fit", e.Name, e.Size, e.Offset)
		}
		bodies[e.Name] = data[dataStart+e.Offset : dataStart+e.Offset+e.Size]
	}
	return &hdr, bodies, nil
}

// cachedSource serves matrices from a cache file and vectors from the
// model.q4nx they were made from.
type cachedSource struct {
	q4nx   *q4nxSource
	hdr    *cacheHeader
	bodies map[string][]byte
}

func (s *cachedSource) has(name string) bool { return s.q4nx.has(name) }

// vector reads name from model.q4nx; a k or v bias of the source's KV
// heads is folded as the cached matrices were.
func (s *cachedSource) vector(name string, n int) ([]float32, error) {
	v, err := s.q4nx.vector(name, n)
	if r := s.hdr.FileKVHeads / max(1, s.hdr.KVHeads); err != nil && r > 1 && n%s.hdr.KVHeads == 0 {
		if full, err2 := s.q4nx.vector(name, n*r); err2 == nil {
			return keepHeadFloats(full, n/s.hdr.KVHeads, r), nil
		}
	}
	return v, err
}

func (s *cachedSource) matrix(name string, rows, cols int) (matrix, error) {
	for _, e := range s.hdr.Tensors {
		if e.Name != name {
			continue
		}
		if e.Rows != rows || e.Cols != cols {
			return matrix{}, fmt.Errorf("cached tensor %s is %d×%d, the config needs %d×%d", name, e.Rows, e.Cols, rows, cols)
		}
		b := s.bodies[name]
		if !e.Packed {
			return newMatrix(e.Type, rows, cols, b)
		}
		p, err := quant.NewPacked(e.Type, rows, cols, b)
		if err != nil {
			return matrix{}, fmt.Errorf("cached tensor %s: %w", name, err)
		}
		rb, _ := e.Type.RowBytes(cols)
		return matrix{Type: e.Type, Rows: rows, Cols: cols, rowBytes: rb, kern: kernPacked, packed: p}, nil
	}
	return matrix{}, fmt.Errorf("tensor %s is not in the cache", name)
}
