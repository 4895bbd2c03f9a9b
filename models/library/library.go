// Package library is the one owner of NPU Chat's models: which exist,
// where their files are, what can run each and which is current.
// Library resolves every source once (NPU Chat's catalog and what is
// installed of it, FastFlowLM's own model_list.json, the files the user
// added, a --model path, what a remote server serves) into Entries,
// keeps the current model in the settings (config.Store), and publishes
// Changed on the process's event bus when either changes, so that the
// tray and the page follow without polling.
//
// The models the user added from outside NPU Chat's folders (a GGUF
// file, a Hugging Face folder, a FastFlowLM model folder) are
// remembered in a small JSON file in the data folder (File), written
// atomically; and the library is the only way a path typed or browsed
// on the page or in the tray becomes a model: Roots confines every path
// to the user's home and the models folders, after following links, so
// that no "..", symlink or absolute path leads outside them.
//
// Forgetting a model removes it from the file only: files the user
// added are never deleted.
package library

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/npuchat/npuchat/config"
)

// Formats of a model on disk, as Detect names them.
const (
	FormatGGUF = "gguf"        // one .gguf file
	FormatHF   = "safetensors" // a Hugging Face folder: config.json, *.safetensors, tokenizer
	FormatFLM  = "q4nx"        // a FastFlowLM folder: config.json, model.q4nx, tokenizer
)

// Record is one model the user added, as library.json keeps it.
type Record struct {
	Name   string    `json:"name"`
	Path   string    `json:"path"`
	Format string    `json:"format"`
	Added  time.Time `json:"added"`
}

// File is the list of added models, kept in one JSON file. Its methods
// are safe for concurrent use.
type File struct {
	path    string
	mu      sync.Mutex
	entries []Record
}

type fileJSON struct {
	Models []Record `json:"models"`
}

// Open reads the library file at path; a missing file is an empty
// library. A damaged file is an error that names it (nothing is
// overwritten until it is fixed or removed).
func Open(path string) (*File, error) {
	f := &File{path: path}
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return f, nil
	}
	if err != nil {
		return nil, fmt.Errorf("model library %s: %w", path, err)
	}
	var j fileJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return nil, fmt.Errorf("model library %s is damaged (%v): fix or remove it", path, err)
	}
	f.entries = j.Models
	return f, nil
}

// Path is the library file's path.
func (f *File) Path() string { return f.path }

// Entries lists the added models in the order they were added.
func (f *File) Entries() []Record {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.entries)
}

// Add remembers e (replacing an entry of the same name or path) and
// writes the file.
func (f *File) Add(e Record) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	next := slices.DeleteFunc(slices.Clone(f.entries), func(o Record) bool {
		return strings.EqualFold(o.Name, e.Name) || o.Path == e.Path
	})
	next = append(next, e)
	if err := f.write(next); err != nil {
		return err
	}
	f.entries = next
	return nil
}

// Forget removes the entry named name from the file (its files stay
// where they are). It reports whether there was one.
func (f *File) Forget(name string) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	next := slices.DeleteFunc(slices.Clone(f.entries), func(o Record) bool { return strings.EqualFold(o.Name, name) })
	if len(next) == len(f.entries) {
		return false, nil
	}
	if err := f.write(next); err != nil {
		return false, err
	}
	f.entries = next
	return true, nil
}

func (f *File) write(entries []Record) error {
	if entries == nil {
		entries = []Record{}
	}
	b, err := json.MarshalIndent(fileJSON{Models: entries}, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(f.path), 0o700); err != nil {
		return fmt.Errorf("model library: %w", err)
	}
	if err := config.WriteFileAtomic(f.path, append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("model library: %w", err)
	}
	return nil
}

// Lookup returns the entry named name.
func (f *File) Lookup(name string) (Record, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, e := range f.entries {
		if strings.EqualFold(e.Name, name) {
			return e, true
		}
	}
	return Record{}, false
}
