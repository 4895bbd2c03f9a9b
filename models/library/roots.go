package library

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// ErrOutside is wrapped by Roots.Resolve for a path that leads out of
// every root.
var ErrOutside = errors.New("outside the folders models may be added from")

// Roots are the folders models may be added from (the user's home, NPU
// Chat's and FastFlowLM's models folders).
type Roots []string

// real is the roots that exist, absolute and with links followed.
func (r Roots) real() []string {
	var out []string
	for _, d := range r {
		if d == "" {
			continue
		}
		abs, err := filepath.Abs(d)
		if err != nil {
			continue
		}
		if p, err := filepath.EvalSymlinks(abs); err == nil && !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}

// Resolve turns p (absolute, or "~/..." for the home given as home) into
// the real path it names, with every link followed, and checks that it
// is inside one of the roots. It does not check what the path holds.
func (r Roots) Resolve(p, home string) (string, error) {
	p = strings.TrimSpace(p)
	if p == "" {
		return "", errors.New("no path given: type or choose a GGUF file or a model folder")
	}
	if strings.ContainsRune(p, 0) {
		return "", errors.New("the path holds a NUL byte")
	}
	if p == "~" || strings.HasPrefix(p, "~/") || strings.HasPrefix(p, `~\`) {
		if home == "" {
			return "", errors.New("the home folder is unknown: give the whole path")
		}
		p = filepath.Join(home, p[1:])
	}
	if !filepath.IsAbs(p) {
		return "", fmt.Errorf("%s is not a whole path: start it at the home folder (~/) or the drive", p)
	}
	real, err := filepath.EvalSymlinks(filepath.Clean(p))
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return "", fmt.Errorf("%s does not exist", p)
		}
		return "", fmt.Errorf("%s: %w", p, err)
	}
	for _, root := range r.real() {
		if within(root, real) {
			return real, nil
		}
	}
	return "", fmt.Errorf("%s: %w (%s)", p, ErrOutside, strings.Join(r.real(), ", "))
}

// within reports whether p is root or inside it (both clean and real).
func within(root, p string) bool {
	rel, err := filepath.Rel(root, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel)
}

// Item is one entry of a browsed folder.
type Item struct {
	Name string `json:"name"`
	Path string `json:"path"`
	// Kind is "dir" for a folder to open, or the model format
	// (FormatGGUF, FormatHF, FormatFLM) of something that can be added.
	Kind string `json:"kind"`
	Size int64  `json:"size,omitempty"`
}

// Listing is a browsed folder: where it is, its parent (when that is
// still inside a root) and what it holds that matters (folders and
// models; other files are left out).
type Listing struct {
	Dir    string   `json:"dir"`
	Parent string   `json:"parent,omitempty"`
	Roots  []string `json:"roots"`
	Items  []Item   `json:"items"`
}

// List browses dir (the first root when empty), confined to the roots.
// Hidden entries are left out; links are followed only when they stay
// inside a root.
func (r Roots) List(dir, home string) (*Listing, error) {
	roots := r.real()
	if len(roots) == 0 {
		return nil, errors.New("no folder to browse: the home and models folders do not exist")
	}
	if dir == "" {
		dir = roots[0]
	}
	real, err := r.Resolve(dir, home)
	if err != nil {
		return nil, err
	}
	des, err := os.ReadDir(real)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", real, err)
	}
	l := &Listing{Dir: real, Roots: roots, Items: []Item{}}
	if parent := filepath.Dir(real); parent != real {
		for _, root := range roots {
			if within(root, parent) {
				l.Parent = parent
				break
			}
		}
	}
	for _, de := range des {
		if strings.HasPrefix(de.Name(), ".") {
			continue
		}
		p := filepath.Join(real, de.Name())
		target, err := r.Resolve(p, home)
		if err != nil {
			continue // a link out of the roots, or broken
		}
		fi, err := os.Stat(target)
		if err != nil {
			continue
		}
		it := Item{Name: de.Name(), Path: p}
		switch {
		case fi.IsDir():
			it.Kind = "dir"
			if f, err := Detect(target); err == nil {
				it.Kind, it.Size = f, dirSize(target)
			}
		case strings.EqualFold(filepath.Ext(de.Name()), ".gguf"):
			it.Kind, it.Size = FormatGGUF, fi.Size()
		default:
			continue
		}
		l.Items = append(l.Items, it)
	}
	return l, nil
}
