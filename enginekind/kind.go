// Package enginekind names the engines that run a model (the backend
// kinds: cpu, npu, remote, ...) and the engine setting's choices. It is
// a leaf: the settings (config), the model library, the service and the
// backends all import it, and it imports nothing of NPU Chat's.
//
// Adding a kind is one row in table (and its constant): the setting's
// allow-list, its menus and its messages read the table. The app then
// makes a backend of the new kind in its one backend constructor
// (app.newBackend).
package enginekind

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

// row is one kind and whether a person can choose it as the engine
// setting.
type row struct {
	kind    Kind
	setting bool
}

// table is every kind, in the order the menus show the settable ones.
func table() []row {
	return []row{
		{Auto, true},
		{NPU, true},
		{CPU, true},
		{Remote, true},
		{Fake, false},
	}
}

// Engines are the engine settings a person can choose, in the order the
// menus show them: the one list every allow-list and menu reads.
func Engines() []Kind {
	var out []Kind
	for _, r := range table() {
		if r.setting {
			out = append(out, r.kind)
		}
	}
	return out
}

// EngineNames is the list of Engines for a message ("auto, npu, cpu,
// remote").
func EngineNames() string {
	var names []string
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
