package check

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func TestRoutes(t *testing.T) {
	ready := &Report{Ready: true, OS: "linux", Summary: "Ready."}
	notReady := &Report{OS: "linux", Summary: "Not ready: [L13] Locked-memory limit (memlock): soft 8 MiB, hard 8 MiB."}
	tests := []struct {
		name  string
		route Route
		line  string
		fix   string
	}{
		{name: "oflm ready", route: Route{Models: "MiniCPM5-2B", Via: "oflm", Ready: true, Status: "ready"},
			line: "MiniCPM5-2B: NPU via oflm (ready)"},
		{name: "FLM ready", route: FLMRoute("/usr/bin/flm", ready), line: "FastFlowLM's models: NPU via FLM (ready)"},
		{name: "FLM with the NPU not ready", route: FLMRoute("/usr/bin/flm", notReady),
			line: "FastFlowLM's models: NPU via FLM, not ready: Not ready: [L13] Locked-memory limit (memlock): soft 8 MiB, hard 8 MiB",
			fix:  "See the fixes above."},
		{name: "FLM without a check report", route: FLMRoute("/usr/bin/flm", nil),
			line: "FastFlowLM's models: NPU via FLM, not known whether it can run: the NPU was not checked",
			fix:  "Run `npuchat check` to check the NPU."},
		{name: "no FLM", route: FLMRoute("", ready), line: "FastFlowLM's models: no NPU route: FastFlowLM (flm) is not installed",
			fix: "Install FastFlowLM: https://github.com/FastFlowLM/FastFlowLM"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.route.Line(); got != tt.line {
				t.Errorf("Line = %q, want %q", got, tt.line)
			}
			rep := &Report{OS: "linux", Summary: "Ready.", Ready: true, Routes: []Route{tt.route}}
			var text bytes.Buffer
			if err := WriteText(&text, rep); err != nil {
				t.Fatal(err)
			}
			flat := strings.Join(strings.Fields(text.String()), " ")
			if !strings.Contains(flat, "NPU routes "+tt.line) {
				t.Errorf("text report lacks the route line %q:\n%s", tt.line, text.String())
			}
			if tt.fix != "" && !strings.Contains(flat, tt.fix) {
				t.Errorf("text report lacks the fix %q:\n%s", tt.fix, text.String())
			}
			var js bytes.Buffer
			if err := WriteJSON(&js, rep); err != nil {
				t.Fatal(err)
			}
			var back struct {
				Routes []Route `json:"routes"`
			}
			if err := json.Unmarshal(js.Bytes(), &back); err != nil || len(back.Routes) != 1 || back.Routes[0] != tt.route {
				t.Errorf("JSON routes = %+v, %v; want %+v", back.Routes, err, tt.route)
			}
		})
	}
	var text bytes.Buffer
	WriteText(&text, ready)
	if strings.Contains(text.String(), "NPU routes") {
		t.Error("a report without routes shows a routes section")
	}
}
