package check

import (
	"fmt"
	"strings"
)

// Route says whether models can run on the NPU, and by which route: oflm
// (OpenFlowLM-Next) for MiniCPM5-2B, FastFlowLM for its own models. The
// caller, which knows the executables and models, adds them to a Report
// (Report.Routes); [WriteText] and [WriteJSON] show them.
type Route struct {
	// Models names what the route serves: "MiniCPM5-2B", "FastFlowLM's models".
	Models string `json:"models"`
	// Via is the route: "oflm" or "FLM"; "" when there is none.
	Via string `json:"via,omitempty"`
	// Ready is true when the route can serve now.
	Ready bool `json:"ready"`
	// Unknown is true when whether it can serve was not checked (no NPU
	// check report); Ready is then false.
	Unknown bool `json:"unknown,omitempty"`
	// Status is "ready", or what is missing.
	Status string `json:"status"`
	// Fix is what to do when it is not ready, with where to get what is
	// missing.
	Fix string `json:"fix,omitempty"`
}

// Line is the route in one line: "MiniCPM5-2B: NPU via oflm (ready)".
func (r Route) Line() string {
	switch {
	case r.Via == "":
		return fmt.Sprintf("%s: no NPU route: %s", r.Models, r.Status)
	case r.Ready:
		return fmt.Sprintf("%s: NPU via %s (ready)", r.Models, r.Via)
	case r.Unknown:
		return fmt.Sprintf("%s: NPU via %s, not known whether it can run: %s", r.Models, r.Via, r.Status)
	}
	return fmt.Sprintf("%s: NPU via %s, not ready: %s", r.Models, r.Via, r.Status)
}

// FLMRoute is the FastFlowLM route for FastFlowLM's own models: ready when
// flm was found (exe) and the NPU check r passed; unknown when there is no
// check report (r is nil), never ready on a check that did not run.
func FLMRoute(exe string, r *Report) Route {
	rt := Route{Models: "FastFlowLM's models", Via: "FLM"}
	switch {
	case exe == "":
		rt.Via, rt.Status = "", "FastFlowLM (flm) is not installed"
		rt.Fix = "Install FastFlowLM: https://github.com/FastFlowLM/FastFlowLM"
	case r == nil:
		rt.Unknown, rt.Status = true, "the NPU was not checked"
		rt.Fix = "Run `npuchat check` to check the NPU."
	case !r.Ready:
		rt.Status = strings.TrimSuffix(r.Summary, ".")
		rt.Fix = "See the fixes above."
	default:
		rt.Ready, rt.Status = true, "ready"
	}
	return rt
}

// writeRoutes writes the routes section of the text report.
func writeRoutes(sb *strings.Builder, routes []Route) {
	if len(routes) == 0 {
		return
	}
	sb.WriteString("\nNPU routes\n")
	for _, rt := range routes {
		fmt.Fprintf(sb, "  %s\n", wrap(rt.Line(), 76, "    "))
		if !rt.Ready && rt.Fix != "" {
			fmt.Fprintf(sb, "    %s\n", wrap(rt.Fix, 74, "    "))
		}
	}
}
