package oflm

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// manifestVersion changes whenever the same source and options would
// give different output (a change of the conversion itself).
const manifestVersion = 1

// FileSum is one output file's size and SHA-256 (hex).
type FileSum struct {
	Name   string `json:"name"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// sourceID identifies what a conversion was made from and how: the source
// files by size and modification time, and the options that shape the
// output.
type sourceID struct {
	Dir     string       `json:"dir"`
	Files   []sourceFile `json:"files"`
	KVHeads int          `json:"kv_heads"`
	Rows    RowOrder     `json:"source_rows"`
}

type sourceFile struct {
	Name    string `json:"name"`
	Size    int64  `json:"size"`
	ModTime int64  `json:"mtime_ns"`
}

func (a sourceID) equal(b sourceID) bool {
	if a.Dir != b.Dir || a.KVHeads != b.KVHeads || a.Rows != b.Rows || len(a.Files) != len(b.Files) {
		return false
	}
	for i := range a.Files {
		if a.Files[i] != b.Files[i] {
			return false
		}
	}
	return true
}

// manifest is ManifestFile's content.
type manifest struct {
	Version int       `json:"version"`
	Source  sourceID  `json:"source"`
	Files   []FileSum `json:"files"`
}

// identify describes the source files a conversion reads.
func identify(src string, o Options, kv int) (sourceID, error) {
	abs, err := filepath.Abs(src)
	if err != nil {
		return sourceID{}, err
	}
	id := sourceID{Dir: abs, KVHeads: kv, Rows: o.SourceRows}
	for _, name := range []string{"config.json", "tokenizer_config.json", "tokenizer.json", "chat_template.jinja", weightsFile} {
		st, err := os.Stat(filepath.Join(src, name))
		if errors.Is(err, os.ErrNotExist) && name == "chat_template.jinja" {
			continue
		}
		if err != nil {
			return sourceID{}, err
		}
		id.Files = append(id.Files, sourceFile{Name: name, Size: st.Size(), ModTime: st.ModTime().UnixNano()})
	}
	return id, nil
}

func readManifest(dir string) (manifest, error) {
	var m manifest
	b, err := os.ReadFile(filepath.Join(dir, ManifestFile))
	if err != nil {
		return m, err
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return m, fmt.Errorf("%s: %w", ManifestFile, err)
	}
	if m.Version != manifestVersion {
		return m, fmt.Errorf("%s: version %d, this NPU Chat writes %d", ManifestFile, m.Version, manifestVersion)
	}
	return m, nil
}

func writeManifest(dir string, m manifest) error {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	_, err = writeFile(dir, ManifestFile, func(w io.Writer) error { _, err := w.Write(append(b, '\n')); return err })
	return err
}

// verify checks every file the manifest lists: present, of its size, with
// its SHA-256.
func verify(dir string, m manifest) ([]FileSum, error) {
	if len(m.Files) == 0 {
		return nil, fmt.Errorf("%s lists no files", ManifestFile)
	}
	for _, want := range m.Files {
		if filepath.Base(want.Name) != want.Name || want.Name == "." || want.Name == ".." {
			return nil, fmt.Errorf("%s names %q, not a file of this folder", ManifestFile, want.Name)
		}
		f, err := os.Open(filepath.Join(dir, want.Name))
		if err != nil {
			return nil, err
		}
		h := sha256.New()
		n, err := io.Copy(h, f)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", want.Name, err)
		}
		if got := hex.EncodeToString(h.Sum(nil)); n != want.Size || got != want.SHA256 {
			return nil, fmt.Errorf("%s is %d bytes with SHA-256 %s; the conversion wrote %d bytes with %s", want.Name, n, got, want.Size, want.SHA256)
		}
	}
	return m.Files, nil
}

// Verify checks that dir holds a finished conversion: its manifest is
// there and every file it lists has the recorded size and SHA-256.
func Verify(dir string) ([]FileSum, error) {
	m, err := readManifest(dir)
	if err != nil {
		return nil, fmt.Errorf("verify %s: %w", dir, err)
	}
	files, err := verify(dir, m)
	if err != nil {
		return nil, fmt.Errorf("verify %s: %w", dir, err)
	}
	return files, nil
}

// Prepared is the quick check of a finished conversion: dir's manifest
// is there and every file it lists has the recorded size. It reads no
// file's content (Verify hashes them): it is what a model list asks on
// every scan; serving verifies in full (npu/oflm Register).
func Prepared(dir string) error {
	m, err := readManifest(dir)
	if err != nil {
		return fmt.Errorf("prepared %s: %w", dir, err)
	}
	if len(m.Files) == 0 {
		return fmt.Errorf("prepared %s: %s lists no files", dir, ManifestFile)
	}
	for _, want := range m.Files {
		if filepath.Base(want.Name) != want.Name || want.Name == "." || want.Name == ".." {
			return fmt.Errorf("prepared %s: %s names %q, not a file of this folder", dir, ManifestFile, want.Name)
		}
		st, err := os.Stat(filepath.Join(dir, want.Name))
		if err != nil {
			return fmt.Errorf("prepared %s: %w", dir, err)
		}
		if st.Size() != want.Size {
			return fmt.Errorf("prepared %s: %s is %d bytes; the conversion wrote %d", dir, want.Name, st.Size(), want.Size)
		}
	}
	return nil
}
