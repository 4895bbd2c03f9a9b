package enginekind

import (
	"slices"
	"strings"
	"testing"
)

// TestTable: the settings a person may choose, the tray's menu (the
// remote engine only while it is the setting) and the names for people
// all come from the one table; an unknown kind is named as it is.
func TestTable(t *testing.T) {
	if got := Engines(); !slices.Equal(got, []Kind{Auto, NPU, OFLM, FLM, CPU, Remote}) {
		t.Errorf("Engines() = %v", got)
	}
	if got := EngineNames(); got != "auto, npu, oflm, flm, cpu, remote" {
		t.Errorf("EngineNames() = %q", got)
	}
	for _, tc := range []struct {
		current Kind
		want    []Kind
	}{
		{Auto, []Kind{Auto, NPU, OFLM, FLM, CPU}},
		{Remote, []Kind{Auto, NPU, OFLM, FLM, CPU, Remote}},
	} {
		var got []Kind
		for _, c := range Choices(tc.current) {
			got = append(got, c.Kind)
			if c.Label == "" {
				t.Errorf("%s has no menu label", c.Kind)
			}
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("Choices(%s) = %v, want %v", tc.current, got, tc.want)
		}
	}
	for _, tc := range []struct {
		k           Kind
		short, name string
	}{
		{NPU, "NPU", "NPU"}, {CPU, "CPU", "CPU"}, {Remote, "remote", "remote server"}, {OFLM, "NPU (oflm)", "NPU through oflm"}, {"gpu", "gpu", "gpu"},
	} {
		if tc.k.Short() != tc.short || tc.k.Name() != tc.name {
			t.Errorf("%s: %q, %q; want %q, %q", tc.k, tc.k.Short(), tc.k.Name(), tc.short, tc.name)
		}
	}
	for _, tc := range []struct {
		in   string
		want Kind
		err  bool
	}{
		{"", Auto, false}, {" cpu ", CPU, false}, {"remote", Remote, false}, {"fake", "", true}, {"gpu", "", true}, {"oflm", OFLM, false}, {"flm", FLM, false},
	} {
		got, err := ParseEngine(tc.in)
		if got != tc.want || (err != nil) != tc.err || (err != nil && !strings.Contains(err.Error(), "auto, npu, oflm, flm, cpu, remote")) {
			t.Errorf("ParseEngine(%q) = %q, %v", tc.in, got, err)
		}
	}
}

// TestRoutes: the engine setting npu means every NPU route, oflm first;
// flm forces FastFlowLM's (whose backend kind is npu); a backend kind is
// its own route; auto has none of its own.
func TestRoutes(t *testing.T) {
	for _, tc := range []struct {
		k    Kind
		want []Kind
		npu  bool
	}{
		{NPU, []Kind{OFLM, NPU}, true}, {OFLM, []Kind{OFLM}, true}, {FLM, []Kind{NPU}, false},
		{CPU, []Kind{CPU}, false}, {Remote, []Kind{Remote}, false}, {Auto, nil, false},
	} {
		if got := tc.k.Routes(); !slices.Equal(got, tc.want) || tc.k.OnNPU() != tc.npu {
			t.Errorf("%s: routes %v, on the NPU %v; want %v, %v", tc.k, got, tc.k.OnNPU(), tc.want, tc.npu)
		}
	}
}
