package check

import (
	"fmt"
	"strconv"
	"strings"
)

// AMDVendor is AMD's PCI vendor id.
const AMDVendor = 0x1022

// Generations of NPU.
const (
	XDNA2 = "XDNA 2"
	XDNA1 = "XDNA 1"
	AIE4  = "AIE4"
)

// pciID is an NPU's PCI device id and revision.
type pciID struct {
	Device   uint16
	Revision uint8
	HasRev   bool
}

func (p pciID) String() string {
	if !p.HasRev {
		return fmt.Sprintf("%04x:%04x", AMDVendor, p.Device)
	}
	return fmt.Sprintf("%04x:%04x rev %02x", AMDVendor, p.Device, p.Revision)
}

// classify names an AMD NPU by device id and revision (docs/npu.md: the
// driver picks the variant by both). known is false for a device id that
// is not an NPU.
func classify(p pciID) (name, generation string, known bool) {
	switch p.Device {
	case 0x1502:
		return "Phoenix / Hawk Point", XDNA1, true
	case 0x17f0:
		if !p.HasRev {
			return "Ryzen AI", XDNA2, true
		}
		switch p.Revision {
		case 0x00:
			return "npu2 (pre-release)", XDNA2, true
		case 0x10:
			return "Strix", XDNA2, true
		case 0x11:
			return "Strix / Strix Halo", XDNA2, true
		case 0x20:
			return "Krackan", XDNA2, true
		}
		return "Ryzen AI", XDNA2, true
	case 0x17f1, 0x17f2, 0x17f3, 0x1b0a, 0x1b0b, 0x1b0c:
		return "next-generation NPU", AIE4, true
	}
	return "", "", false
}

// rank orders generations for picking one NPU when several are present.
func rank(gen string) int {
	switch gen {
	case XDNA2:
		return 3
	case AIE4:
		return 2
	case XDNA1:
		return 1
	}
	return 0
}

// parseHardwareID reads a Windows PCI hardware id such as
// PCI\VEN_1022&DEV_17F0&SUBSYS_00000000&REV_11 (case-insensitive). ok is
// false unless the vendor is AMD and the device is a known NPU.
func parseHardwareID(id string) (pciID, bool) {
	up := strings.ToUpper(strings.TrimSpace(id))
	rest, found := strings.CutPrefix(up, `PCI\`)
	if !found {
		return pciID{}, false
	}
	var p pciID
	vendorOK, devOK := false, false
	for _, part := range strings.Split(rest, "&") {
		key, val, _ := strings.Cut(part, "_")
		switch key {
		case "VEN":
			v, err := strconv.ParseUint(val, 16, 16)
			vendorOK = err == nil && v == AMDVendor
		case "DEV":
			v, err := strconv.ParseUint(val, 16, 16)
			if err == nil {
				p.Device, devOK = uint16(v), true
			}
		case "REV":
			v, err := strconv.ParseUint(val, 16, 8)
			if err == nil {
				p.Revision, p.HasRev = uint8(v), true
			}
		}
	}
	if !vendorOK || !devOK {
		return pciID{}, false
	}
	_, _, known := classify(p)
	return p, known
}

// matchNPU returns the most specific NPU id among a device's hardware ids
// (one with a revision when there is one).
func matchNPU(ids []string) (pciID, bool) {
	var best pciID
	found := false
	for _, id := range ids {
		p, ok := parseHardwareID(id)
		if !ok {
			continue
		}
		if !found || (p.HasRev && !best.HasRev) {
			best, found = p, true
		}
	}
	return best, found
}

// DriverVersion is a Windows driver version: four 16-bit fields a.b.c.d.
type DriverVersion [4]uint16

// ParseDriverVersion reads "32.0.203.304". All four fields are required.
func ParseDriverVersion(s string) (DriverVersion, error) {
	parts := strings.Split(strings.TrimSpace(s), ".")
	if len(parts) != 4 {
		return DriverVersion{}, fmt.Errorf("driver version %q: want four numbers a.b.c.d", s)
	}
	var v DriverVersion
	for i, p := range parts {
		n, err := strconv.ParseUint(p, 10, 16)
		if err != nil {
			return DriverVersion{}, fmt.Errorf("driver version %q: field %d: want a number 0-65535", s, i+1)
		}
		v[i] = uint16(n)
	}
	return v, nil
}

// Compare returns -1, 0 or 1 as v is older than, equal to or newer than w,
// comparing all four fields in order (FastFlowLM compares only the last).
func (v DriverVersion) Compare(w DriverVersion) int {
	for i := range v {
		switch {
		case v[i] < w[i]:
			return -1
		case v[i] > w[i]:
			return 1
		}
	}
	return 0
}

func (v DriverVersion) String() string {
	return fmt.Sprintf("%d.%d.%d.%d", v[0], v[1], v[2], v[3])
}

// kernelVersion reads "6.14.0-15-generic" as (6, 14).
func kernelVersion(release string) (major, minor int, ok bool) {
	s := release
	if i := strings.IndexAny(s, "-+~_ "); i >= 0 {
		s = s[:i]
	}
	parts := strings.Split(s, ".")
	if len(parts) < 2 {
		return 0, 0, false
	}
	maj, err1 := strconv.Atoi(parts[0])
	min, err2 := strconv.Atoi(parts[1])
	if err1 != nil || err2 != nil {
		return 0, 0, false
	}
	return maj, min, true
}

// versionAtLeast compares (a, b) with (c, d).
func versionAtLeast(a, b, c, d int) bool { return a > c || (a == c && b >= d) }
