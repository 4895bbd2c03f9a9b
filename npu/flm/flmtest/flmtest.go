// Package flmtest builds the fake `flm` executable (npu/flm/fakeflm) for
// the tests of packages that run FastFlowLM, so that they run on machines
// without an NPU. It is a test helper package: only tests import it.
//
// The fake's failure modes are chosen with the environment variables its
// package doc lists (FAKEFLM_MODE, FAKEFLM_MODE_FILE, ...); pass them in
// the FLM backend's Options.Env.
package flmtest

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
)

// FakePackage is the import path of the fake flm's main package.
const FakePackage = "github.com/npuchat/npuchat/npu/flm/fakeflm"

// Build compiles the fake flm into a temporary folder of t and returns
// its path. The test fails if the build fails.
func Build(t testing.TB) string {
	t.Helper()
	path, err := BuildTo(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return path
}

// BuildTo compiles the fake flm into dir (as flm, or flm.exe on Windows)
// and returns its path. It runs `go build`, so it must run inside the
// npuchat module, as tests do.
func BuildTo(dir string) (string, error) {
	name := "flm"
	if runtime.GOOS == "windows" {
		name += ".exe"
	}
	out := filepath.Join(dir, name)
	goTool, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("build fake flm: the go command is not on PATH: %w", err)
	}
	cmd := exec.Command(goTool, "build", "-o", out, FakePackage)
	if msg, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build fake flm: %w\n%s", err, msg)
	}
	return out, nil
}
