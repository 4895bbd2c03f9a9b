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
	if got := Engines(); !slices.Equal(got, []Kind{Auto, NPU, CPU, Remote}) {
		t.Errorf("Engines() = %v", got)
	}
	if got := EngineNames(); got != "auto, npu, cpu, remote" {
		t.Errorf("EngineNames() = %q", got)
	}
	for _, tc := range []struct {
		current Kind
		want    []Kind
	}{
		{Auto, []Kind{Auto, NPU, CPU}},
		{Remote, []Kind{Auto, NPU, CPU, Remote}},
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
		{NPU, "NPU", "NPU"}, {CPU, "CPU", "CPU"}, {Remote, "remote", "remote server"}, {"oflm", "oflm", "oflm"},
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
		{"", Auto, false}, {" cpu ", CPU, false}, {"remote", Remote, false}, {"fake", "", true}, {"gpu", "", true},
	} {
		got, err := ParseEngine(tc.in)
		if got != tc.want || (err != nil) != tc.err || (err != nil && !strings.Contains(err.Error(), "auto, npu, cpu, remote")) {
			t.Errorf("ParseEngine(%q) = %q, %v", tc.in, got, err)
		}
	}
}
