// Package enginekind names the engines that run a model (the backend
// kinds: cpu, npu, remote, ...) and the engine setting's choices. It is
// a leaf: the settings (config), the model library, the service, the
// backends and the tray all import it, and it imports nothing of NPU
// Chat's.
//
// A kind is declared once, as a constant and its row in table: the
// setting's allow-list (config), its menu in the tray, its messages and
// its names for people all read the table. What else a new kind needs
// is where it acts: its backend is one case in app.newBackend, and the
// models it can run list it in their library entry's Engines
// (models/library, where its source is read).
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

// row is one kind: whether a person can choose it as the engine setting
// and how the tray offers it, and its names for people.
type row struct {
	kind Kind
	// setting: a person may choose it as the engine setting; menu: the
	// tray offers it always (false: only while it is the setting, as the
	// remote engine, which needs a URL given elsewhere).
	setting, menu bool
	// label is its line in the tray's Engine menu; short its name in the
	// status line; name its name in a sentence.
	label, short, name string
}

// table is every kind, in the order the menus show the settable ones.
func table() []row {
	return []row{
		{Auto, true, true, "Auto (NPU, else CPU)", "auto", "auto"},
		{NPU, true, true, "NPU", "NPU", "NPU"},
		{CPU, true, true, "CPU", "CPU", "CPU"},
		{Remote, true, false, "Remote server", "remote", "remote server"},
		{Fake, false, false, "Fake", "fake", "fake engine"},
	}
}

// lookup is k's row (a kind not in the table: its own name everywhere).
func lookup(k Kind) row {
	for _, r := range table() {
		if r.kind == k {
			return r
		}
	}
	return row{kind: k, label: string(k), short: string(k), name: string(k)}
}

// Short is the kind's name in the tray's status line ("NPU", "remote").
func (k Kind) Short() string { return lookup(k).short }

// Name is the kind's name in a sentence ("NPU", "remote server").
func (k Kind) Name() string { return lookup(k).name }

// Choice is an engine setting the tray's Engine menu offers.
type Choice struct {
	Kind  Kind
	Label string
}

// Choices are the engine settings the tray offers while current is the
// setting, in menu order.
func Choices(current Kind) []Choice {
	var out []Choice
	for _, r := range table() {
		if r.setting && (r.menu || r.kind == current) {
			out = append(out, Choice{r.kind, r.label})
		}
	}
	return out
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
