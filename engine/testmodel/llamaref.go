package testmodel

import (
	"os"
	"path/filepath"
	"testing"
)

// LlamaRef returns the path of the llama.cpp oracle that scripts/setup
// builds (tools/llamaref): $LLAMAREF, else .cache/llamacpp/llamaref at
// the repository root. A missing oracle fails the test: it is installed
// by setup, never skipped.
func LlamaRef(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("LLAMAREF"); p != "" {
		return p
	}
	dir, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("cannot find the repository root (go.mod)")
		}
		dir = parent
	}
	p := filepath.Join(dir, ".cache", "llamacpp", "llamaref")
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("the llama.cpp oracle is missing (%s): run scripts/setup", p)
	}
	return p
}
