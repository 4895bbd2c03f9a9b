// Package fakecli holds what the fake `flm` (npu/flm/fakeflm) and the
// fake `oflm` (npu/oflm/fakeoflm) share: oflm is a fork of FastFlowLM and
// keeps its command line, so both fakes read `serve` the same way, and
// the tests build both the same way. Only tests and the fakes import it.
package fakecli

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// Build compiles the main package pkg into dir as name (name.exe on
// Windows) and returns its path. It runs `go build`, so it must run
// inside the npuchat module, as tests do.
func Build(dir, name, pkg string) (string, error) {
	if runtime.GOOS == "windows" {
		name += ".exe"
	}
	out := filepath.Join(dir, name)
	goTool, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("build %s: the go command is not on PATH: %w", pkg, err)
	}
	if msg, err := exec.Command(goTool, "build", "-o", out, pkg).CombinedOutput(); err != nil {
		return "", fmt.Errorf("build %s: %w\n%s", pkg, err, msg)
	}
	return out, nil
}

// BuildTemp is Build into a temporary folder of t; the test fails if the
// build fails.
func BuildTemp(t testing.TB, name, pkg string) string {
	t.Helper()
	path, err := Build(t.TempDir(), name, pkg)
	if err != nil {
		t.Fatal(err)
	}
	return path
}

// HasFlag says whether args hold one of names.
func HasFlag(args []string, names ...string) bool {
	for _, a := range args {
		for _, n := range names {
			if a == n {
				return true
			}
		}
	}
	return false
}

// Serve is what a fake reads of `serve`'s arguments.
type Serve struct {
	Tag    string // the model tag; "" when none was given
	Host   string // --host (default 127.0.0.1)
	Port   int    // --port/-p (default: the caller's)
	CtxLen int    // --ctx-len/-c, 0 when not given
}

// DefaultPort is FastFlowLM's serve port when none is given.
const DefaultPort = 52625

// ParseServe reads serve's arguments (after "serve") as FastFlowLM's
// boost program_options do (src/include/utils/vm_args.hpp): valued
// flags take the next argument, switches none, one positional tag. The
// port is DefaultPort, or the number $portEnv holds, unless --port says.
// The error is the text the real program prints.
func ParseServe(args []string, valued, switches map[string]bool, portEnv string) (Serve, error) {
	s := Serve{Host: "127.0.0.1", Port: DefaultPort}
	if p, err := strconv.Atoi(os.Getenv(portEnv)); err == nil {
		s.Port = p
	}
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case switches[a]:
		case valued[a]:
			if i+1 >= len(args) {
				return s, fmt.Errorf("Error: the required argument for option '%s' is missing", a)
			}
			v := args[i+1]
			i++
			var err error
			switch a {
			case "--host":
				s.Host = v
			case "--port", "-p":
				s.Port, err = strconv.Atoi(v)
			case "--ctx-len", "-c":
				s.CtxLen, err = strconv.Atoi(v)
			}
			if err != nil {
				return s, fmt.Errorf("Error: the argument ('%s') for option '%s' is invalid", v, a)
			}
		case strings.HasPrefix(a, "-"):
			return s, fmt.Errorf("Error: unrecognised option '%s'", a)
		case s.Tag == "":
			s.Tag = a
		default:
			return s, errors.New("Error: too many positional options have been specified on the command line")
		}
	}
	return s, nil
}
