// Package flmtest builds the fake `flm` executable (npu/flm/fakeflm) for
// the tests of packages that run FastFlowLM, so that they run on machines
// without an NPU. It is a test helper package: only tests import it.
//
// The fake's failure modes are chosen with the environment variables its
// package doc lists (FAKEFLM_MODE, FAKEFLM_MODE_FILE, ...); pass them in
// the FLM backend's Options.Env.
package flmtest

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/npuchat/npuchat/npu/fakecli"
)

// FakePackage is the import path of the fake flm's main package.
const FakePackage = "github.com/npuchat/npuchat/npu/flm/fakeflm"

// Build compiles the fake flm into a temporary folder of t and returns
// its path. The test fails if the build fails.
func Build(t testing.TB) string {
	t.Helper()
	return fakecli.BuildTemp(t, "flm", FakePackage)
}

// BuildTo compiles the fake flm into dir (as flm, or flm.exe on Windows)
// and returns its path. It runs `go build`, so it must run inside the
// npuchat module, as tests do.
func BuildTo(dir string) (string, error) { return fakecli.Build(dir, "flm", FakePackage) }

// The fake flm's modes (see npu/flm/fakeflm).
const (
	ModeNormal       = "normal"        // answers
	ModeERT          = "ert"           // FLM's ERT_CMD_STATE_TIMEOUT after prefill, nothing streamed
	ModeERTMidstream = "ert-midstream" // the same after some tokens: the connection drops
	ModeCrash        = "crash"         // exits with status 139 mid-answer
	ModeNoDevice     = "nodevice"      // fails at start: "No such device with index '0'"
	ModeHang         = "hang"          // never ready, ignores SIGTERM
	ModeSlow         = "slow"          // ready after FAKEFLM_START_DELAY (default 2s)
	ModeBusyPort     = "busyport"      // fails at start as if its port were taken
	ModeStall        = "stall"         // streams one token, then nothing (a hung NPU)
)

// Modes switches the mode of fake flm processes, running or not, through
// a mode file.
type Modes struct {
	path string
}

// NewModes makes a mode file in a temporary folder of t, set to initial.
func NewModes(t testing.TB, initial string) *Modes {
	t.Helper()
	m := &Modes{path: filepath.Join(t.TempDir(), "fakeflm-mode")}
	m.Set(t, initial)
	return m
}

// Env is the environment entry that points the fake at the mode file;
// add it to the FLM backend's Options.Env.
func (m *Modes) Env() string { return "FAKEFLM_MODE_FILE=" + m.path }

// Set changes the mode; running fakes read it at their next request.
func (m *Modes) Set(t testing.TB, mode string) {
	t.Helper()
	tmp := m.path + ".tmp"
	if err := os.WriteFile(tmp, []byte(mode+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, m.path); err != nil {
		t.Fatal(err)
	}
}
