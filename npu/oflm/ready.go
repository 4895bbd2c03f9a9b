package oflm

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/npuchat/npuchat/npu/check"
)

// Readiness says whether oflm can serve a model on this machine: oflm's
// own verdict (validate --json) combined with NPU Chat's checks of the
// device, the render group and the memlock limit.
type Readiness struct {
	Ready bool
	// Version is oflm's version, when it answered.
	Version string
	// Problems say, for a person, what is missing and how to fix it.
	Problems []string
}

// Summary is one line: "ready", or the problems.
func (r Readiness) Summary() string {
	if r.Ready {
		return "ready"
	}
	return strings.Join(r.Problems, "; ")
}

// neededChecks are the NPU checks (npu/check) the oflm route depends on
// beyond what oflm validates: the device (L1, W1), access to its node
// through the render group (L4, L5), and the memlock limit (L13, run with
// the model's size: oflm locks size + 512 MB, and 8 MB fails with "mmap
// err=-11"; unlimited is what the sources recommend).
var neededChecks = []string{"L1", "L4", "L5", "L13", "W1"}

// Assess combines validate's report (nil when it could not run) with
// NPU Chat's check report (nil when it was not run).
func Assess(v *Validation, rep *check.Report) Readiness {
	var r Readiness
	if v == nil {
		r.Problems = append(r.Problems, "oflm validate did not run")
	} else if !v.Ready || !v.RuntimeOK {
		for _, p := range v.Problems() {
			r.Problems = append(r.Problems, "oflm validate: "+p)
		}
	}
	if rep != nil {
		for _, id := range neededChecks {
			c := rep.Check(id)
			if c == nil || c.Status == check.Pass || c.Status == check.Warn {
				continue
			}
			p := fmt.Sprintf("[%s] %s: %s", c.ID, c.Title, c.Found)
			if c.Fix != "" {
				p += ". Fix: " + c.Fix
			}
			r.Problems = append(r.Problems, p)
		}
	}
	r.Ready = len(r.Problems) == 0
	return r
}

// Check runs `oflm version --json` and `oflm validate --json` with exe
// and NPU Chat's NPU check with opts (its Root a recorded system, and
// ModelBytes the registry entry's size), and assesses them.
func Check(ctx context.Context, exe string, opts check.Options) Readiness {
	var r Readiness
	ver, verr := Version(ctx, exe)
	v, err := Validate(ctx, exe)
	rep, cerr := check.Run(ctx, opts)
	if cerr != nil {
		rep = nil
	}
	r = Assess(v, rep)
	r.Version = ver
	if err != nil {
		r.Problems = append([]string{err.Error()}, r.Problems[1:]...)
	}
	if verr != nil {
		r.Problems = append(r.Problems, verr.Error())
	}
	if cerr != nil {
		r.Problems = append(r.Problems, "NPU check: "+cerr.Error())
	}
	r.Ready = len(r.Problems) == 0
	return r
}

// Route is the NPU check's line for MiniCPM5-2B's oflm route: findErr is
// Locator.Find's error, r the readiness of the oflm found.
func Route(findErr error, r Readiness) check.Route {
	rt := check.Route{Models: "MiniCPM5-2B", Via: "oflm"}
	var nf *NotFoundError
	switch {
	case findErr != nil && !errors.As(findErr, &nf):
		rt.Via = ""
		rt.Status = findErr.Error()
		rt.Fix = "Set the path of oflm again, or clear it to use the installed one (" + InstallLink + ")."
	case findErr != nil:
		rt.Via = ""
		rt.Status = "oflm (OpenFlowLM-Next), the one route that decodes it on the NPU, is not installed; FastFlowLM cannot run it (FastFlowLM #712)"
		rt.Fix = "Install oflm as " + InstallLink + " says (NPU Chat does not download or bundle it), then run `npuchat check` again. Until then MiniCPM5-2B runs on the CPU."
	case !r.Ready:
		rt.Status = r.Summary()
		rt.Fix = "Fix what is listed, then run `npuchat check` again. Until then MiniCPM5-2B runs on the CPU."
	default:
		rt.Ready, rt.Status = true, "ready"
		if r.Version != "" {
			rt.Status = "ready, oflm " + r.Version
		}
	}
	return rt
}

// Probe is the whole oflm part of the NPU check in one call: it finds oflm
// (configured first; see Locator.Find), runs its version and validate and
// NPU Chat's checks with opts, and returns what it found, its readiness
// and the route line for check.Report.Routes.
func Probe(ctx context.Context, loc Locator, configured string, opts check.Options) (Found, Readiness, check.Route) {
	found, err := loc.Find(configured)
	if err != nil {
		return found, Readiness{Problems: []string{err.Error()}}, Route(err, Readiness{})
	}
	r := Check(ctx, found.Path, opts)
	return found, r, Route(nil, r)
}
