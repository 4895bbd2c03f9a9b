package flmtest

import (
	"encoding/json"
	"os/exec"
	"testing"
)

// TestBuildAndCLI builds the fake and checks its one-shot commands against
// FLM's output shapes (src/src/main.cpp).
func TestBuildAndCLI(t *testing.T) {
	flm := Build(t)
	out, err := exec.Command(flm, "version", "--json").Output()
	if err != nil {
		t.Fatal(err)
	}
	var v struct{ Version string }
	if err := json.Unmarshal(out, &v); err != nil || v.Version == "" {
		t.Errorf("version --json = %q, %v", out, err)
	}

	modes := NewModes(t, ModeNormal)
	for _, tt := range []struct {
		mode  string
		ready bool
	}{{ModeNormal, true}, {ModeNoDevice, false}} {
		modes.Set(t, tt.mode)
		cmd := exec.Command(flm, "validate", "--json")
		cmd.Env = []string{modes.Env()}
		out, err := cmd.Output()
		if (err == nil) != tt.ready {
			t.Errorf("%s: validate exit %v", tt.mode, err)
		}
		var got map[string]any
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("%s: validate --json = %q: %v", tt.mode, out, err)
		}
		for _, k := range []string{"object", "kernel_ok", "amd_device_found", "all_fw_ok", "enough_cols", "memlock_ok", "devices", "ready"} {
			if _, ok := got[k]; !ok {
				t.Errorf("%s: validate --json lacks %q", tt.mode, k)
			}
		}
		if got["ready"] != tt.ready || got["amd_device_found"] != tt.ready {
			t.Errorf("%s: %v", tt.mode, got)
		}
	}

	if err := exec.Command(flm, "serve", "x", "--bogus").Run(); err == nil {
		t.Error("serve accepted an unknown option")
	}
}
