package oflm

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/npuchat/npuchat/npu/oflm/oflmtest"
)

// fakeExe is the fake oflm, built once for the package's tests.
var fakeExe string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "fakeoflm-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fakeExe, err = oflmtest.BuildTo(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// copyTree copies testdata/src into dst.
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(filepath.Join("testdata", src), func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(filepath.Join("testdata", src), p)
		out := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(out, 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(out, b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// installed is an oflm folder with the test model prepared and
// registered, and the kernel set in the model folder.
type installed struct {
	layout  Layout
	kernels *KernelSet
	reg     *Registered
}

func install(t *testing.T) installed {
	t.Helper()
	home := t.TempDir()
	l, err := NewLayout("linux", func(string) string { return "" }, home, fakeExe)
	if err != nil {
		t.Fatal(err)
	}
	dir := l.ModelDir(Folder)
	copyTree(t, "model", dir)
	copyTree(t, "open_kernels", filepath.Join(dir, "open_kernels"))
	ks, err := l.FindKernels(func(string) string { return "" }, dir, Folder)
	if err != nil {
		t.Fatal(err)
	}
	reg, err := l.Register(Registration{Kernels: ks, OFLMVersion: "0.1.0", ParameterSize: "2B", Quantization: "Q4_1"})
	if err != nil {
		t.Fatal(err)
	}
	return installed{layout: l, kernels: ks, reg: reg}
}
