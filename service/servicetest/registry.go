// Package servicetest is a fixed model list for tests of the service
// and the layers over it (web, gui): a Registry gives a Manager its
// Options.Resolve and Options.Models without the model library. The
// program's models come from models/library alone; this fake resolves
// names by the same rules (names and aliases, a family without a tag).
package servicetest

import (
	"fmt"
	"strings"
	"sync"

	"github.com/npuchat/npuchat/service"
)

// Entry is a model the fake serves.
type Entry struct {
	Desc    service.ModelDesc
	Aliases []string // other names clients may use (case-insensitive)
	// Refresh, when set, recomputes Desc (installed or not) each time
	// the list is read.
	Refresh func() service.ModelDesc
}

// Registry resolves model names to entries. It is safe for concurrent use.
type Registry struct {
	mu      sync.RWMutex
	entries []*Entry
}

// Add registers a model. A later entry with the same name replaces an
// earlier one.
func (r *Registry) Add(e Entry) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, old := range r.entries {
		if strings.EqualFold(old.Desc.Name, e.Desc.Name) {
			r.entries[i] = &e
			return
		}
	}
	r.entries = append(r.entries, &e)
}

// Remove forgets the entry named name (exactly, case-insensitively);
// it reports whether there was one.
func (r *Registry) Remove(name string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, e := range r.entries {
		if strings.EqualFold(e.Desc.Name, name) {
			r.entries = append(r.entries[:i], r.entries[i+1:]...)
			return true
		}
	}
	return false
}

// Resolve maps a requested name to a served name: exact names and
// aliases match case-insensitively, and a name without a tag matches
// ("minicpm5" finds "minicpm5:2b", as "llama3" does in Ollama; also
// "minicpm5:latest").
func (r *Registry) Resolve(name string) (string, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	want := strings.TrimSpace(name)
	for _, e := range r.entries {
		if strings.EqualFold(e.Desc.Name, want) {
			return e.Desc.Name, nil
		}
		for _, a := range e.Aliases {
			if strings.EqualFold(a, want) {
				return e.Desc.Name, nil
			}
		}
	}
	base := strings.TrimSuffix(strings.ToLower(want), ":latest")
	if !strings.Contains(base, ":") {
		// The first installed model of the family, else its first (the
		// catalog lists sizes a client never installed).
		first := ""
		for _, e := range r.entries {
			if n, _, ok := strings.Cut(strings.ToLower(e.Desc.Name), ":"); ok && n == base {
				if first == "" {
					first = e.Desc.Name
				}
				if e.desc().Installed {
					return e.Desc.Name, nil
				}
			}
		}
		if first != "" {
			return first, nil
		}
	}
	var names []string
	for _, e := range r.entries {
		names = append(names, e.Desc.Name)
	}
	if len(names) == 0 {
		return "", fmt.Errorf("model %q: %w (no models are configured)", name, service.ErrUnknownModel)
	}
	return "", fmt.Errorf("model %q: %w; available: %s", name, service.ErrUnknownModel, strings.Join(names, ", "))
}

// desc is the entry's description now.
func (e *Entry) desc() service.ModelDesc {
	if e.Refresh != nil {
		return e.Refresh()
	}
	return e.Desc
}

// Models lists every entry's description.
func (r *Registry) Models() []service.ModelDesc {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]service.ModelDesc, 0, len(r.entries))
	for _, e := range r.entries {
		if e.Refresh != nil {
			out = append(out, e.Refresh())
		} else {
			out = append(out, e.Desc)
		}
	}
	return out
}
