package check

import (
	"context"
	"fmt"
	"strings"

	"github.com/npuchat/npuchat/npu/xrt"
)

// Windows requirements, from docs/npu.md.
var (
	// MinDriverFLM is the oldest NPU driver FastFlowLM accepts.
	MinDriverFLM = DriverVersion{32, 0, 203, 304}
	// RecommendedDriverFLM is the driver FastFlowLM recommends.
	RecommendedDriverFLM = DriverVersion{32, 0, 203, 311}
	// MinDriverRyzenAI is the oldest driver Ryzen AI Software 1.5–1.7 accepts.
	MinDriverRyzenAI = DriverVersion{32, 0, 203, 280}
)

// Device setup classes.
const (
	classComputeAccelerator = "{F01A9D53-3FF6-48D2-9F97-C8A7004BE10C}"
	classSystem             = "{4D36E97D-E325-11CE-BFC1-08002BE10318}"
)

// Configuration-manager status bits (cfg.h).
const (
	dnStarted    = 0x00000008
	dnHasProblem = 0x00000400
)

const fixWinDriver = "Install the current AMD NPU driver (\"NPU Compute Accelerator Device\"): from Windows Update, or the Ryzen AI driver package from amd.com/support " +
	"(run npu_sw_installer.exe as administrator), then restart."

// runWindows performs W1–W5.
func runWindows(ctx context.Context, sys WindowsSystem, prober xrt.Prober) *Report {
	var b builder
	devices, err := sys.Devices()

	// W1: the device.
	c := Check{ID: "W1", Title: "NPU device", Group: GroupHardware, required: true,
		Need: `an AMD XDNA 2 NPU (hardware id PCI\VEN_1022&DEV_17F0)`}
	var dev *WinDevice
	var id pciID
	var name, gen string
	for i := range devices {
		p, ok := matchNPU(devices[i].HardwareIDs)
		if !ok {
			continue
		}
		n, g, _ := classify(p)
		if dev == nil || rank(g) > rank(gen) {
			dev, id, name, gen = &devices[i], p, n, g
		}
	}
	switch {
	case err != nil:
		c.Status, c.Found = Fail, fmt.Sprintf("cannot list devices: %v", err)
		c.Fix = "Run the check again; if it keeps failing, attach `npuchat check --record DIR` to a bug report."
	case dev == nil:
		c.Status, c.Found = Fail, "no AMD NPU found"
		c.Fix = "This needs a Ryzen AI processor with an XDNA 2 NPU (Ryzen AI 300 \"Strix\", Ryzen AI Max \"Strix Halo\", Ryzen AI 7/5 \"Krackan\"). " +
			"If yours has one, enable the NPU (\"IPU Device\" / \"NPU\") in the BIOS setup."
	default:
		c.Found = fmt.Sprintf("%s NPU (%s), PCI %s", name, gen, id)
		switch gen {
		case XDNA2:
			c.Status = Pass
		case XDNA1:
			c.Status, c.Found = Fail, c.Found+": XDNA 1 is not supported by FastFlowLM"
			c.Fix = "FastFlowLM runs only on XDNA 2 NPUs (Ryzen AI 300 and later); NPU Chat runs the model on the CPU here."
		default:
			c.Status, c.Found = Fail, c.Found+": FastFlowLM on Windows accepts only DEV_17F0"
			c.Fix = "NPU Chat runs the model on the CPU here."
		}
	}
	b.add(c)

	// W2: class and name, i.e. the current MCDM driver rather than the legacy IPU one.
	c = Check{ID: "W2", Title: "NPU driver type", Group: GroupWindows, required: true,
		Need: "class ComputeAccelerator, \"NPU Compute Accelerator Device\" (the current MCDM driver)"}
	if dev == nil {
		c.Status, c.Found = skip("no NPU (W1)")
	} else {
		desc := orUnknown(dev.Description)
		switch {
		case strings.EqualFold(dev.ClassGUID, classComputeAccelerator):
			c.Status, c.Found = Pass, fmt.Sprintf("%q, class ComputeAccelerator", desc)
		case strings.EqualFold(dev.ClassGUID, classSystem) || strings.Contains(strings.ToLower(desc), "ipu"):
			c.Status, c.Found = Fail, fmt.Sprintf("%q in class %s: the legacy IPU driver (Ryzen AI 1.1 or older)", desc, orUnknown(dev.Class))
			c.Fix = fixWinDriver
		case dev.ClassGUID == "":
			c.Status, c.Found = Fail, "the NPU has no driver installed"
			c.Fix = fixWinDriver
		default:
			c.Status, c.Found = Fail, fmt.Sprintf("%q in class %s %s, not ComputeAccelerator", desc, orUnknown(dev.Class), dev.ClassGUID)
			c.Fix = fixWinDriver
		}
	}
	b.add(c)

	// W3: device status.
	c = Check{ID: "W3", Title: "NPU device status", Group: GroupWindows, required: true,
		Need: "the device is started and has no problem code"}
	switch {
	case dev == nil:
		c.Status, c.Found = skip("no NPU (W1)")
	case dev.StatusError != "":
		c.Status, c.Found = Fail, "cannot read the device status: "+dev.StatusError
		c.Fix = fixWinDriver
	case dev.Status&dnHasProblem != 0:
		c.Status, c.Found = Fail, fmt.Sprintf("the device has problem code %d%s", dev.Problem, problemText(dev.Problem))
		c.Fix = "Open Device Manager > Neural processors > NPU Compute Accelerator Device to see the problem. " + fixWinDriver
		if dev.Problem == 22 {
			c.Fix = "The NPU is disabled: enable it in Device Manager (Neural processors > right-click > Enable device)."
		}
	case dev.Status&dnStarted == 0:
		c.Status, c.Found = Fail, "the device is not started"
		c.Fix = fixWinDriver
	default:
		c.Status, c.Found = Pass, "started, no problem"
	}
	b.add(c)

	// W4: driver version.
	c = Check{ID: "W4", Title: "NPU driver version", Group: GroupWindows, required: true,
		Need: fmt.Sprintf("%s or newer (FastFlowLM; %s recommended; Ryzen AI 1.5–1.7 need %s)", MinDriverFLM, RecommendedDriverFLM, MinDriverRyzenAI)}
	switch {
	case dev == nil:
		c.Status, c.Found = skip("no NPU (W1)")
	case dev.DriverVersion == "":
		c.Status, c.Found = Fail, "no driver version: "+orUnknown(dev.DriverVersionError)
		c.Fix = fixWinDriver
	default:
		c.Status, c.Found, c.Fix = judgeDriverVersion(dev.DriverVersion)
	}
	b.add(c)

	// W5: the driver's user-mode runtime (XRT).
	c = Check{ID: "W5", Title: "NPU runtime (XRT)", Group: GroupRuntime,
		Need: xrt.WindowsLibrary + " (installed by the NPU driver in System32) loads and opens device 0"}
	switch {
	case dev == nil:
		c.Status, c.Found = skip("no NPU (W1)")
	case prober == nil:
		c.Status, c.Found = skip("XRT probe not run")
	default:
		c.required = true
		c.Status, c.Found, c.Fix = probeWindowsXRT(ctx, prober, b.status("W3") == Pass)
	}
	b.add(c)

	r := &Report{OS: "windows", Checks: b.checks}
	if dev != nil {
		r.NPU = &NPU{Location: dev.InstanceID, PCIID: id.String(), Name: name, Generation: gen}
	}
	r.finish()
	return r
}

// judgeDriverVersion compares all four fields with FastFlowLM's minimum.
func judgeDriverVersion(s string) (Status, string, string) {
	v, err := ParseDriverVersion(s)
	if err != nil {
		return Fail, fmt.Sprintf("cannot read the driver version: %v", err), fixWinDriver
	}
	switch {
	case v.Compare(MinDriverFLM) < 0:
		found := fmt.Sprintf("driver %s is older than %s", v, MinDriverFLM)
		if v.Compare(MinDriverRyzenAI) >= 0 {
			found += " (enough for Ryzen AI 1.5–1.7, not for FastFlowLM)"
		}
		return Fail, found, fixWinDriver
	case v.Compare(RecommendedDriverFLM) < 0:
		return Warn, fmt.Sprintf("driver %s works; FastFlowLM recommends %s", v, RecommendedDriverFLM), fixWinDriver
	}
	return Pass, "driver " + v.String(), ""
}

func probeWindowsXRT(ctx context.Context, prober xrt.Prober, open bool) (Status, string, string) {
	const fix = "The driver's runtime is missing or broken: reinstall the NPU driver. " + fixWinDriver
	r, err := prober.Probe(ctx, xrt.WindowsLibrary, false)
	switch {
	case err != nil:
		return Fail, fmt.Sprintf("loading %s failed: %v", xrt.WindowsLibrary, err), fix
	case !r.Loaded:
		return Fail, fmt.Sprintf("%s does not load: %s", xrt.WindowsLibrary, r.LoadError), fix
	case !open:
		return Pass, fmt.Sprintf("XRT %s loads (device not opened: W3 did not pass)", r.Version), ""
	}
	o, err := prober.Probe(ctx, xrt.WindowsLibrary, true)
	switch {
	case err != nil:
		return Fail, fmt.Sprintf("XRT %s crashed or hung opening device 0: %v", r.Version, err), fix
	case !o.DeviceOpened:
		return Fail, fmt.Sprintf("XRT %s cannot open device 0: %s", r.Version, orUnknown(o.DeviceError)), fix
	}
	return Pass, fmt.Sprintf("XRT %s opened and closed device 0", r.Version), ""
}

// problemText names the common device problem codes (CM_PROB_*).
func problemText(code uint32) string {
	switch code {
	case 10:
		return " (the device cannot start)"
	case 18, 28:
		return " (the driver is not installed)"
	case 22:
		return " (the device is disabled)"
	case 31:
		return " (the driver failed to load)"
	case 43:
		return " (the driver reported a failure)"
	case 52:
		return " (the driver's signature is not trusted)"
	}
	return ""
}
