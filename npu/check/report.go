// Package check says whether this machine can run a model on its AMD
// XDNA 2 NPU through FastFlowLM, and if not, exactly what to do.
//
// [Run] performs the checks of docs/npu.md (Linux L1–L18, Windows W1–W5)
// and returns a [Report]: each check with an id, a title, a status, what
// was found, what is needed and a fix a person can act on. Checks depend
// on each other: when there is no device, the driver checks are skipped
// with the reason.
//
// Everything the checks learn comes through three seams, so that the
// logic runs on any OS against recorded systems:
//   - files under a root directory ([FS]): sysfs, procfs, /dev, /lib;
//   - system calls ([LinuxSystem], [WindowsSystem]): uname, getrlimit,
//     access, open and the amdxdna ioctls, the kernel log, SetupAPI and
//     the registry;
//   - the XRT probe ([xrt.Prober]).
//
// [Record] copies the files a run read into a folder and writes the
// system-call answers to npucheck.json beside them; [Run] with that
// folder as Options.Root replays it. The test scenarios in testdata are
// such trees, and users can attach one to a bug report.
//
// Dependencies: golang.org/x/sys v0.50.0 for the Linux system calls and
// for SetupAPI and the registry on Windows (no cgo); see package xrt for
// purego.
package check

import (
	"fmt"
)

// Status is the outcome of one check.
type Status string

// The statuses a check can have.
const (
	Pass    Status = "pass"
	Warn    Status = "warn"
	Fail    Status = "fail"
	Skipped Status = "skipped"
)

// Check is one line of the report.
type Check struct {
	// ID is stable: L1–L18 on Linux, W1–W5 on Windows (see docs/npu.md).
	ID     string `json:"id"`
	Title  string `json:"title"`
	Group  string `json:"group"`
	Status Status `json:"status"`
	// Found is what the check saw; for a skipped check, why it was skipped.
	Found string `json:"found"`
	// Need is what passing requires.
	Need string `json:"need"`
	// Fix is what a person can do, with exact commands where they exist.
	// Empty when the check passed.
	Fix string `json:"fix,omitempty"`

	// required checks must pass (not merely not fail) for Ready.
	required bool
}

// NPU describes the device the checks looked at.
type NPU struct {
	// Location is the PCI address on Linux, the device instance on Windows.
	Location string `json:"location,omitempty"`
	// PCIID is "1022:17f0 rev 11".
	PCIID string `json:"pci_id"`
	// Name is the product: "Strix / Strix Halo" and the like.
	Name string `json:"name"`
	// Generation is "XDNA 2", "XDNA 1" or "AIE4".
	Generation string `json:"generation"`
	// Node is the accel device node on Linux.
	Node string `json:"node,omitempty"`
}

// Report is the result of [Run].
type Report struct {
	// Ready is true when the NPU path can run a model: no check failed and
	// every check the NPU path depends on passed.
	Ready bool `json:"ready"`
	// OS is "linux" or "windows".
	OS string `json:"os"`
	// Summary is one sentence for a person: ready, or the first problem.
	Summary string `json:"summary"`
	// NPU is the device found, if any.
	NPU *NPU `json:"npu,omitempty"`
	// Checks are in id order.
	Checks []Check `json:"checks"`
	// Routes say which NPU route serves which models (routes.go); the
	// caller adds them.
	Routes []Route `json:"routes,omitempty"`
}

// Check returns the check with the given id, or nil.
func (r *Report) Check(id string) *Check {
	for i := range r.Checks {
		if r.Checks[i].ID == id {
			return &r.Checks[i]
		}
	}
	return nil
}

// finish computes Ready and Summary from the checks.
func (r *Report) finish() {
	var firstFail, firstMissing *Check
	for i := range r.Checks {
		c := &r.Checks[i]
		if c.Status == Fail && firstFail == nil {
			firstFail = c
		}
		if c.required && c.Status != Pass && c.Status != Warn && firstMissing == nil {
			firstMissing = c
		}
	}
	r.Ready = firstFail == nil && firstMissing == nil
	switch {
	case r.Ready && r.NPU != nil:
		r.Summary = fmt.Sprintf("Ready: the %s NPU (%s) can run models with FastFlowLM.", r.NPU.Name, r.NPU.Generation)
	case r.Ready:
		r.Summary = "Ready: the NPU can run models with FastFlowLM."
	case firstFail != nil && firstFail.ID[1:] == "1":
		r.Summary = "No usable NPU: " + firstFail.Found + "."
	case firstFail != nil:
		r.Summary = fmt.Sprintf("Not ready: [%s] %s: %s.", firstFail.ID, firstFail.Title, firstFail.Found)
	default:
		r.Summary = fmt.Sprintf("Not ready: %s could not be checked: %s.", firstMissing.ID, firstMissing.Found)
	}
	if n := r.count(Warn); r.Ready && n > 0 {
		r.Summary += fmt.Sprintf(" %d warning(s) below.", n)
	}
}

func (r *Report) count(s Status) int {
	n := 0
	for _, c := range r.Checks {
		if c.Status == s {
			n++
		}
	}
	return n
}

// builder collects checks in order.
type builder struct {
	checks []Check
}

func (b *builder) add(c Check) *Check {
	b.checks = append(b.checks, c)
	return &b.checks[len(b.checks)-1]
}

// status returns the status of an earlier check.
func (b *builder) status(id string) Status {
	for _, c := range b.checks {
		if c.ID == id {
			return c.Status
		}
	}
	return Skipped
}

// skip is the body of a skipped check.
func skip(reason string) (Status, string) { return Skipped, reason }
