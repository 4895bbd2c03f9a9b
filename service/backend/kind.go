package backend

import (
	"fmt"
	"strings"
)

// Kind names a backend: the engine that runs a model. It is what
// Backend.Kind returns, what the service's status and an answer name as
// the engine serving, and (with Auto) what the engine setting holds.
type Kind string

// The backend kinds.
const (
	// CPU is the in-process engine (service/cpu).
	CPU Kind = "cpu"
	// NPU is FastFlowLM on the NPU, as a child process (npu/flm).
	NPU Kind = "npu"
	// Remote is an OpenAI-compatible server a person names (oaicompat).
	Remote Kind = "remote"
	// Fake is the scripted backend of the tests (backend/fake).
	Fake Kind = "fake"
)

// Auto is the engine setting that picks the NPU when it can serve the
// model, else the CPU. It is an engine setting, not a backend's kind.
const Auto Kind = "auto"

// Engines are the engine settings a person can choose, in the order the
// menus show them: the one list every allow-list and menu reads.
func Engines() []Kind { return []Kind{Auto, NPU, CPU, Remote} }

// EngineNames is the list of Engines for a message ("auto, npu, cpu,
// remote").
func EngineNames() string {
	names := make([]string, 0, 4)
	for _, k := range Engines() {
		names = append(names, string(k))
	}
	return strings.Join(names, ", ")
}

// ParseEngine reads an engine setting; "" is Auto. Anything not in
// Engines is an error that lists them.
func ParseEngine(s string) (Kind, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return Auto, nil
	}
	for _, k := range Engines() {
		if string(k) == s {
			return k, nil
		}
	}
	return "", fmt.Errorf("engine %q is not one of %s", s, EngineNames())
}
