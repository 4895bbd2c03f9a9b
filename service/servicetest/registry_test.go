package servicetest

import (
	"testing"

	"github.com/npuchat/npuchat/service"
)

// TestResolveFamilyPrefersInstalled: a name without a size finds the
// family's installed model, not the first size the catalog offers; an
// exact name finds its entry installed or not; a family with nothing
// installed finds its first entry.
func TestResolveFamilyPrefersInstalled(t *testing.T) {
	r := &Registry{}
	r.Add(Entry{Desc: service.ModelDesc{Name: "minicpm5:2b"}})
	r.Add(Entry{Desc: service.ModelDesc{Name: "qwen3:0.6b"}})
	r.Add(Entry{Desc: service.ModelDesc{Name: "qwen3:1.7b"}, Refresh: func() service.ModelDesc { return service.ModelDesc{Name: "qwen3:1.7b"} }})
	r.Add(Entry{Desc: service.ModelDesc{Name: "qwen3:4b"}, Refresh: func() service.ModelDesc { return service.ModelDesc{Name: "qwen3:4b", Installed: true} }})
	for in, want := range map[string]string{"qwen3": "qwen3:4b", "QWEN3:latest": "qwen3:4b", "qwen3:0.6b": "qwen3:0.6b", "minicpm5": "minicpm5:2b"} {
		if got, err := r.Resolve(in); err != nil || got != want {
			t.Errorf("Resolve(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}
