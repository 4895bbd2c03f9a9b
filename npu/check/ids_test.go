package check

import (
	"strings"
	"testing"
)

func TestDriverVersionCompare(t *testing.T) {
	tests := []struct {
		a, b string
		want int
	}{
		{"32.0.203.304", "32.0.203.311", -1},
		{"32.0.203.311", "32.0.203.304", 1},
		{"32.0.203.304", "32.0.203.280", 1},
		{"32.0.203.280", "32.0.203.304", -1},
		{"32.0.203.304", "32.0.203.304", 0},
		// FastFlowLM compares only the last field; a full compare orders these right.
		{"32.0.201.400", "32.0.203.304", -1},
		{"33.0.0.1", "32.0.203.304", 1},
		{"10.1009.8.100", "32.0.203.304", -1},
	}
	for _, tt := range tests {
		a, err := ParseDriverVersion(tt.a)
		if err != nil {
			t.Fatal(err)
		}
		b, err := ParseDriverVersion(tt.b)
		if err != nil {
			t.Fatal(err)
		}
		if got := a.Compare(b); got != tt.want {
			t.Errorf("%s vs %s = %d, want %d", tt.a, tt.b, got, tt.want)
		}
		if a.String() != tt.a {
			t.Errorf("String() = %s, want %s", a, tt.a)
		}
	}
}

func TestParseDriverVersionMalformed(t *testing.T) {
	for _, s := range []string{"", "32.0.203", "32.0.203.304.1", "32.0.x.304", "32..203.304", "70000.0.0.0", "-1.0.0.0", "32.0.203.304 beta"} {
		if v, err := ParseDriverVersion(s); err == nil {
			t.Errorf("ParseDriverVersion(%q) = %v, want an error", s, v)
		}
	}
}

func TestJudgeDriverVersion(t *testing.T) {
	tests := []struct {
		v      string
		status Status
		found  string
	}{
		{"32.0.203.311", Pass, "driver 32.0.203.311"},
		{"32.0.203.376", Pass, "driver 32.0.203.376"},
		{"32.0.203.304", Warn, "FastFlowLM recommends 32.0.203.311"},
		{"32.0.203.280", Fail, "enough for Ryzen AI 1.5–1.7, not for FastFlowLM"},
		{"32.0.203.257", Fail, "older than 32.0.203.304"},
		{"32.0.203", Fail, "cannot read the driver version"},
	}
	for _, tt := range tests {
		s, found, fix := judgeDriverVersion(tt.v)
		if s != tt.status || !strings.Contains(found, tt.found) {
			t.Errorf("%s: %s %q, want %s containing %q", tt.v, s, found, tt.status, tt.found)
		}
		if (s != Pass) != (fix != "") {
			t.Errorf("%s: status %s with fix %q", tt.v, s, fix)
		}
	}
}

func TestHardwareIDs(t *testing.T) {
	tests := []struct {
		id      string
		ok      bool
		want    string
		gen     string
		product string
	}{
		{`PCI\VEN_1022&DEV_17F0&SUBSYS_0B3D1028&REV_11`, true, "1022:17f0 rev 11", XDNA2, "Strix / Strix Halo"},
		{`pci\ven_1022&dev_17f0&rev_10`, true, "1022:17f0 rev 10", XDNA2, "Strix"},
		{`PCI\VEN_1022&DEV_17F0&REV_20`, true, "1022:17f0 rev 20", XDNA2, "Krackan"},
		{`PCI\VEN_1022&DEV_17F0`, true, "1022:17f0", XDNA2, "Ryzen AI"},
		{`PCI\VEN_1022&DEV_1502&SUBSYS_88D1103C&REV_00`, true, "1022:1502 rev 00", XDNA1, "Phoenix / Hawk Point"},
		{`PCI\VEN_1022&DEV_17F2&REV_10`, true, "1022:17f2 rev 10", AIE4, "next-generation NPU"},
		{`PCI\VEN_1002&DEV_17F0&REV_11`, false, "", "", ""}, // not AMD's CPU vendor id
		{`PCI\VEN_1022&DEV_1480&REV_00`, false, "", "", ""}, // an AMD host bridge
		{`USB\VID_1022&PID_17F0`, false, "", "", ""},        // not PCI
		{`PCI\VEN_1022&DEV_ZZZZ`, false, "", "", ""},        // malformed
		{`ACPI\VEN_AMDI&DEV_0500`, false, "", "", ""},       // ACPI
	}
	for _, tt := range tests {
		p, ok := parseHardwareID(tt.id)
		if ok != tt.ok {
			t.Errorf("%s: ok = %v, want %v", tt.id, ok, tt.ok)
			continue
		}
		if !ok {
			continue
		}
		name, gen, _ := classify(p)
		if p.String() != tt.want || gen != tt.gen || name != tt.product {
			t.Errorf("%s: %s %s %s, want %s %s %s", tt.id, p, gen, name, tt.want, tt.gen, tt.product)
		}
	}
	// The most specific id wins.
	p, ok := matchNPU([]string{`PCI\VEN_1022&DEV_17F0&CC_118000`, `PCI\VEN_1022&DEV_17F0&SUBSYS_0B3D1028&REV_11`, `PCI\CC_118000`})
	if !ok || !p.HasRev || p.Revision != 0x11 {
		t.Errorf("matchNPU picked %v, %v", p, ok)
	}
	if _, ok := matchNPU([]string{`PCI\VEN_8086&DEV_7D1D`}); ok {
		t.Error("matchNPU accepted an Intel NPU")
	}
}

func TestKernelVersion(t *testing.T) {
	tests := []struct {
		release  string
		maj, min int
		ok       bool
	}{
		{"6.14.0-15-generic", 6, 14, true},
		{"7.0.0-rc3", 7, 0, true},
		{"6.18.44-fc-v1045", 6, 18, true},
		{"6.8.0", 6, 8, true},
		{"6.17.7-arch1-1", 6, 17, true},
		{"6", 0, 0, false},
		{"x.y", 0, 0, false},
	}
	for _, tt := range tests {
		maj, min, ok := kernelVersion(tt.release)
		if maj != tt.maj || min != tt.min || ok != tt.ok {
			t.Errorf("%s: %d.%d %v, want %d.%d %v", tt.release, maj, min, ok, tt.maj, tt.min, tt.ok)
		}
	}
}

func TestErrnoAndLimitRoundTrip(t *testing.T) {
	for _, s := range []string{"EACCES", "ENODEV", "ENOTTY"} {
		err := errFrom(s)
		if errnoOf(err) != Errno(s) || errString(err) != s {
			t.Errorf("%s: round trip gave %v", s, err)
		}
	}
	if err := errFrom("xrt probe: child failed"); errnoOf(err) != "" {
		t.Errorf("a message became an errno: %v", err)
	}
	for _, l := range []Limit{Unlimited, 8 << 20, 0} {
		b, err := l.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		var back Limit
		if err := back.UnmarshalJSON(b); err != nil || back != l {
			t.Errorf("%v: round trip gave %v, %v", l, back, err)
		}
	}
	var bad Limit
	if err := bad.UnmarshalJSON([]byte(`"lots"`)); err == nil {
		t.Error(`UnmarshalJSON("lots") succeeded`)
	}
}

func TestParseFirmware(t *testing.T) {
	if v, err := parseFirmware("1.1.2.65\n"); err != nil || v.String() != "1.1.2.65" {
		t.Errorf("parseFirmware: %v %v", v, err)
	}
	for _, s := range []string{"1.1.2", "1.x.2.65", ""} {
		if _, err := parseFirmware(s); err == nil {
			t.Errorf("parseFirmware(%q) succeeded", s)
		}
	}
}
