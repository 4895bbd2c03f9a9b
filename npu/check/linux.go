package check

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strconv"
	"strings"

	"github.com/npuchat/npuchat/npu/amdxdna"
	"github.com/npuchat/npuchat/npu/xrt"
)

// Groups of checks, in the order the report shows them.
const (
	GroupHardware = "Hardware"
	GroupDriver   = "Kernel driver"
	GroupAccess   = "Device access"
	GroupNPU      = "NPU firmware and array"
	GroupLimits   = "Limits"
	GroupRuntime  = "Runtime (XRT)"
	GroupWindows  = "Windows driver"
)

// Requirements, from docs/npu.md.
const (
	minDRMMajor, minDRMMinor = 0, 6 // FastFlowLM: amdxdna ABI 0.6 or newer
	minFWMajor, minFWMinor   = 1, 1 // FastFlowLM: firmware 1.1.0.0 or newer
	minCols                  = 8    // FastFlowLM: at least 8 AIE columns (XDNA 2)
	validateMemlock          = 100 << 20
	memlockHeadroom          = 512 << 20 // FastFlowLM reserves model size + 512 MiB
	recommendedTimeout       = 10        // seconds; the driver default is 2
)

// Fix texts that several checks share.
const (
	fixKernel = "Upgrade to kernel 7.0 or newer, or install the out-of-tree driver: " +
		"Ubuntu `sudo add-apt-repository ppa:lemonade-team/stable && sudo apt install amdxdna-dkms libxrt-npu2`, " +
		"Arch `amdxdna-dkms` (AUR); then reboot."
	fixRender = "Add yourself to the render group: `sudo usermod -aG render $USER`, then log out and in again (check with `id -nG`). " +
		"If `ls -l /dev/accel/accel0` shows `crw------- root root` (no udev rule gives the node to render), add one: " +
		"`echo 'SUBSYSTEM==\"accel\", KERNEL==\"accel*\", GROUP=\"render\", MODE=\"0660\"' | sudo tee /etc/udev/rules.d/70-amdxdna.rules && sudo udevadm control --reload && sudo udevadm trigger`."
	fixIOMMU = "The NPU needs the IOMMU (SVA/PASID): enable IOMMU / AMD-Vi in the BIOS setup, remove `amd_iommu=off` and `iommu=off` " +
		"from the kernel command line (/etc/default/grub GRUB_CMDLINE_LINUX, then `sudo update-grub` and reboot; `iommu=pt` is fine), " +
		"and run on the machine itself, not in a virtual machine."
	fixFirmware = "Update the NPU firmware: install the current linux-firmware package (it ships amdnpu/<dev>_<rev>/npu_7.sbin or npu.sbin 1.1.x), " +
		"or use amdxdna-dkms, which matches driver and firmware; then reboot. With an older in-tree driver (kernel before 7.0) do not force 1.1 firmware: use DKMS."
	fixXRT = "Install XRT with the NPU plugin: Ubuntu `sudo add-apt-repository ppa:lemonade-team/stable && sudo apt install libxrt-npu2`; " +
		"Arch `sudo pacman -S xrt xrt-plugin-amdxdna`; or build amd/xdna-driver. For XRT in a custom prefix, set XILINX_XRT to it."
	fixPlugin = "Install the XRT xdna plugin (libxrt_driver_xdna.so.2): Arch `sudo pacman -S xrt-plugin-amdxdna`; " +
		"Ubuntu PPA ppa:lemonade-team/stable `sudo apt install libxrt-npu2`; or build amd/xdna-driver and install its plugin package. " +
		"Without it XRT sees no device and FastFlowLM fails with \"No such device with index '0'\"."
	fixTimeout = "Raise the amdxdna command timeout (it is writable while the driver runs): `echo 20 | sudo tee /sys/module/amdxdna/parameters/timeout_in_sec`, " +
		"or reload the driver with it: `sudo modprobe -r amdxdna && sudo modprobe amdxdna timeout_in_sec=20`; " +
		"to keep it across reboots, `echo 'options amdxdna timeout_in_sec=20' | sudo tee /etc/modprobe.d/amdxdna.conf` (and `sudo update-initramfs -u` where the module loads from the initramfs)."
)

// linuxRun holds the state of one Linux run: the seams and the facts
// earlier checks learned for later ones.
type linuxRun struct {
	ctx        context.Context
	fs         FS
	sys        LinuxSystem
	xrt        xrt.Prober
	getenv     func(string) string
	modelBytes int64
	b          builder

	npu       *pciDevice
	others    []pciDevice
	release   string
	moduleSrc string // "dkms", "in-tree", "built-in" or ""
	moduleVer string
	node      string
	dev       Device
	opened    bool // L6 opened the node (dev is closed after L10)
	xrtLib    string
	xrtDir    string
	xrtLoaded bool
	pluginOK  bool
}

// pciDevice is an AMD NPU found on the PCI bus.
type pciDevice struct {
	BDF  string
	ID   pciID
	Name string
	Gen  string
}

func (d pciDevice) sys(attr string) string { return "/sys/bus/pci/devices/" + d.BDF + "/" + attr }

// runLinux performs L1–L18.
func runLinux(ctx context.Context, f FS, sys LinuxSystem, prober xrt.Prober, getenv func(string) string, modelBytes int64) *Report {
	l := &linuxRun{ctx: ctx, fs: f, sys: sys, xrt: prober, getenv: getenv, modelBytes: modelBytes}
	defer l.closeDevice()
	l.pci()         // L1
	l.bound()       // L2
	l.kernel()      // L3
	l.deviceNode()  // L4
	l.perms()       // L5
	l.open()        // L6
	l.iommu()       // L7
	l.drmVersion()  // L8
	l.firmware()    // L9
	l.columns()     // L10
	l.closeDevice() // XRT opens the NPU itself below
	l.fwFiles()     // L11
	l.moduleInfo()  // L12
	l.memlock()     // L13
	l.xrtLibrary()  // L14
	l.xrtPlugin()   // L15
	l.xrtOpen()     // L16
	l.kernelLog()   // L17
	l.cmdTimeout()  // L18
	r := &Report{OS: "linux", Checks: l.b.checks}
	if l.npu != nil {
		r.NPU = &NPU{Location: l.npu.BDF, PCIID: l.npu.ID.String(), Name: l.npu.Name, Generation: l.npu.Gen, Node: l.node}
	}
	r.finish()
	return r
}

const noNPU = "no NPU on the PCI bus (L1)"

// L1: an AMD NPU on the PCI bus.
func (l *linuxRun) pci() {
	c := Check{ID: "L1", Title: "NPU on the PCI bus", Group: GroupHardware, required: true,
		Need: "an AMD XDNA 2 NPU (PCI 1022:17f0: Strix, Strix Halo, Krackan)"}
	names, err := l.fs.ReadDir("/sys/bus/pci/devices")
	if err != nil {
		c.Status, c.Found = Fail, fmt.Sprintf("cannot list PCI devices: %v", err)
		c.Fix = "Run the check on the machine itself (sysfs must be mounted at /sys)."
		l.b.add(c)
		return
	}
	var found []pciDevice
	for _, bdf := range names {
		base := "/sys/bus/pci/devices/" + bdf + "/"
		if v, err := readHex(l.fs, base+"vendor"); err != nil || v != AMDVendor {
			continue
		}
		dev, err := readHex(l.fs, base+"device")
		if err != nil {
			continue
		}
		p := pciID{Device: uint16(dev)}
		if rev, err := readHex(l.fs, base+"revision"); err == nil {
			p.Revision, p.HasRev = uint8(rev), true
		}
		name, gen, known := classify(p)
		if !known {
			continue
		}
		found = append(found, pciDevice{BDF: bdf, ID: p, Name: name, Gen: gen})
	}
	if len(found) == 0 {
		c.Status, c.Found = Fail, "no AMD NPU found on the PCI bus"
		c.Fix = "This needs a Ryzen AI processor with an XDNA 2 NPU (Ryzen AI 300 \"Strix\", Ryzen AI Max \"Strix Halo\", Ryzen AI 7/5 \"Krackan\"). " +
			"If yours has one, enable the NPU (\"IPU Device\" / \"NPU\") in the BIOS setup and reboot. In a virtual machine the NPU is not available."
		l.b.add(c)
		return
	}
	best := 0
	for i := range found {
		if rank(found[i].Gen) > rank(found[best].Gen) {
			best = i
		}
	}
	d := found[best]
	l.npu = &d
	for i := range found {
		if i != best {
			l.others = append(l.others, found[i])
		}
	}
	c.Found = fmt.Sprintf("%s NPU (%s), PCI %s at %s", d.Name, d.Gen, d.ID, d.BDF)
	if vbnv, err := readString(l.fs, d.sys("vbnv")); err == nil && vbnv != "" {
		c.Found += ", " + vbnv
	}
	switch d.Gen {
	case XDNA2:
		c.Status = Pass
	case XDNA1:
		c.Status = Fail
		c.Found += ": XDNA 1 is not supported by FastFlowLM"
		c.Fix = "FastFlowLM runs only on XDNA 2 NPUs (Ryzen AI 300 and later). On this Phoenix / Hawk Point machine NPU Chat runs the model on the CPU; " +
			"Ryzen AI Software (ONNX Runtime) still supports this NPU for other workloads."
	case AIE4:
		c.Status = Warn
		c.Found += ": a newer NPU generation FastFlowLM does not list yet"
		c.Fix = "Supported only by the out-of-tree amd/xdna-driver; FastFlowLM may not run on it. The array check (L10) decides."
	}
	l.b.add(c)
}

// L2: amdxdna bound to the device.
func (l *linuxRun) bound() {
	c := Check{ID: "L2", Title: "amdxdna driver bound", Group: GroupDriver, required: true,
		Need: "the amdxdna kernel driver bound to the NPU"}
	if l.npu == nil {
		c.Status, c.Found = skip(noNPU)
		l.b.add(c)
		return
	}
	link, err := l.fs.Readlink(l.npu.sys("driver"))
	driver := path.Base(link)
	switch {
	case err == nil && driver == "amdxdna":
		c.Status, c.Found = Pass, "amdxdna is bound to "+l.npu.BDF
	case err == nil:
		c.Status, c.Found = Fail, fmt.Sprintf("%s is bound to driver %s, not amdxdna", l.npu.BDF, driver)
		c.Fix = fmt.Sprintf("Unbind it (for vfio-pci: remove the device from vfio-pci.ids) and load amdxdna: `echo %s | sudo tee /sys/bus/pci/drivers/%s/unbind && sudo modprobe amdxdna`.", l.npu.BDF, driver)
	case l.fs.Exists("/sys/module/amdxdna"):
		c.Status, c.Found = Fail, "amdxdna is loaded but did not bind to "+l.npu.BDF+" (its probe failed)"
		c.Fix = "See why: `sudo dmesg | grep -i amdxdna` (L17 reads it when run as root). Usual causes: firmware missing or too new for the driver (L11, L9), IOMMU off (L7)."
	case l.moduleAvailable():
		c.Status, c.Found = Fail, "amdxdna is installed but not loaded"
		c.Fix = "Load it: `sudo modprobe amdxdna`; if that fails, `sudo dmesg | grep -i amdxdna` says why."
	default:
		c.Status, c.Found = Fail, "the amdxdna driver is not installed for this kernel"
		c.Fix = fixKernel
	}
	l.b.add(c)
}

// moduleAvailable reports whether modules.dep or modules.builtin of the
// running kernel lists amdxdna, and records where it comes from.
func (l *linuxRun) moduleAvailable() bool {
	l.ensureRelease()
	if l.release == "" {
		return false
	}
	base := "/lib/modules/" + l.release + "/"
	if b, err := l.fs.ReadFile(base + "modules.dep"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			mod, _, _ := strings.Cut(line, ":")
			if path.Base(strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(mod, ".zst"), ".xz"), ".gz")) != "amdxdna.ko" {
				continue
			}
			if strings.Contains(mod, "dkms") || strings.HasPrefix(mod, "updates/") || strings.HasPrefix(mod, "extra/") {
				l.moduleSrc = "dkms"
			} else {
				l.moduleSrc = "in-tree"
			}
			return true
		}
	}
	if b, err := l.fs.ReadFile(base + "modules.builtin"); err == nil && strings.Contains(string(b), "/amdxdna.ko") {
		l.moduleSrc = "built-in"
		return true
	}
	return false
}

func (l *linuxRun) ensureRelease() {
	if l.release != "" {
		return
	}
	if u, err := l.sys.Uname(); err == nil {
		l.release = u.Release
	}
}

// L3: kernel version.
func (l *linuxRun) kernel() {
	c := Check{ID: "L3", Title: "Kernel version", Group: GroupDriver,
		Need: "kernel 7.0 or newer, or kernel 6.10+ with amdxdna-dkms (FastFlowLM's requirement)"}
	if l.npu == nil {
		c.Status, c.Found = skip(noNPU)
		l.b.add(c)
		return
	}
	u, err := l.sys.Uname()
	if err != nil {
		c.Status, c.Found = Warn, fmt.Sprintf("cannot read the kernel version: %v", err)
		l.b.add(c)
		return
	}
	l.release = u.Release
	l.moduleAvailable()
	if l.fs.Exists("/sys/module/amdxdna/version") {
		l.moduleSrc = "dkms"
	}
	major, minor, ok := kernelVersion(u.Release)
	c.Found = "Linux " + u.Release
	switch {
	case !ok:
		c.Status, c.Found = Warn, fmt.Sprintf("cannot parse kernel release %q", u.Release)
	case l.moduleSrc == "dkms" && versionAtLeast(major, minor, 6, 10):
		c.Status, c.Found = Pass, c.Found+" with amdxdna from DKMS"
	case versionAtLeast(major, minor, 7, 0):
		c.Status = Pass
	case versionAtLeast(major, minor, 6, 17):
		c.Status = Warn
		c.Found += ": `flm validate` accepts 6.17+, but FastFlowLM's documentation wants 7.0+ or amdxdna-dkms"
		c.Fix = "If the driver or firmware checks fail, " + lowerFirst(fixKernel)
	default:
		c.Status = Fail
		if l.moduleSrc == "dkms" {
			c.Found += ": amdxdna-dkms needs kernel 6.10 or newer"
		} else {
			c.Found += ": too old for FastFlowLM without amdxdna-dkms (`flm validate` wants 6.17+)"
		}
		c.Fix = fixKernel
	}
	l.b.add(c)
}

// L4: the accel device node.
func (l *linuxRun) deviceNode() {
	c := Check{ID: "L4", Title: "Device node", Group: GroupAccess, required: true,
		Need: "/dev/accel/accelN for the NPU"}
	if s := l.b.status("L2"); s != Pass {
		c.Status, c.Found = skip(dependsOn("L2", l.npu == nil))
		l.b.add(c)
		return
	}
	names, err := l.fs.ReadDir(l.npu.sys("accel"))
	if err != nil || len(names) == 0 {
		c.Status, c.Found = Fail, "amdxdna is bound but created no accel device (no "+l.npu.sys("accel")+")"
		c.Fix = "The driver's start-up failed after binding: `sudo dmesg | grep -i amdxdna` (see L17); usually firmware (L9, L11) or IOMMU (L7)."
		l.b.add(c)
		return
	}
	node := "/dev/accel/" + names[0]
	if !l.fs.Exists(node) {
		c.Status, c.Found = Fail, fmt.Sprintf("sysfs has %s but %s does not exist", names[0], node)
		c.Fix = "udev did not create the node: `sudo udevadm trigger --subsystem-match=accel`; check that /dev is devtmpfs."
		l.b.add(c)
		return
	}
	l.node = node
	c.Status, c.Found = Pass, node
	l.b.add(c)
}

// L5: read-write access to the node.
func (l *linuxRun) perms() {
	c := Check{ID: "L5", Title: "Permission on the device node", Group: GroupAccess, required: true,
		Need: "read and write access to the accel node (group render)"}
	if l.node == "" {
		c.Status, c.Found = skip(dependsOn("L4", l.npu == nil))
		l.b.add(c)
		return
	}
	err := l.sys.Access(l.node)
	switch e := errnoOf(err); {
	case err == nil:
		c.Status, c.Found = Pass, "read-write access to "+l.node
	case e == "EACCES" || e == "EPERM":
		c.Status, c.Found = Fail, "permission denied on "+l.node+" (the NPU is there; this user may not use it)"
		c.Fix = fixRender
	default:
		c.Status, c.Found = Fail, fmt.Sprintf("cannot check access to %s: %v", l.node, err)
		c.Fix = "Check `ls -l " + l.node + "`. " + fixRender
	}
	l.b.add(c)
}

// L6: open the node (this binds the process to the NPU through the IOMMU).
func (l *linuxRun) open() {
	c := Check{ID: "L6", Title: "Open the NPU", Group: GroupAccess, required: true,
		Need: "open(" + orNode(l.node) + ", O_RDWR) succeeds (it binds the process to the NPU through the IOMMU)"}
	if l.node == "" {
		c.Status, c.Found = skip(dependsOn("L4", l.npu == nil))
		l.b.add(c)
		return
	}
	if l.b.status("L5") == Fail {
		c.Status, c.Found = skip("no permission on " + l.node + " (L5)")
		l.b.add(c)
		return
	}
	dev, err := l.sys.Open(l.node)
	switch e := errnoOf(err); {
	case err == nil:
		l.dev = dev
		c.Status, c.Found = Pass, "opened "+l.node
	case e == "EACCES" || e == "EPERM":
		c.Status, c.Found = Fail, "permission denied opening "+l.node
		c.Fix = fixRender
	case e == "ENODEV" || e == "EOPNOTSUPP" || e == "EINVAL" || e == "ENOSPC":
		c.Status, c.Found = Fail, fmt.Sprintf("open failed with %v: the IOMMU could not bind this process to the NPU (SVA/PASID)", err)
		c.Fix = fixIOMMU
	case e == "EBUSY":
		c.Status, c.Found = Fail, "open failed: the NPU is busy"
		c.Fix = "Another program holds the NPU; close it (`sudo fuser -v " + l.node + "`) and run the check again."
	default:
		c.Status, c.Found = Fail, fmt.Sprintf("open %s failed: %v", l.node, err)
		c.Fix = "See `sudo dmesg | grep -i amdxdna` (L17)."
	}
	l.b.add(c)
}

// L7: IOMMU on, not in a VM.
func (l *linuxRun) iommu() {
	c := Check{ID: "L7", Title: "IOMMU", Group: GroupAccess,
		Need: "IOMMU enabled (no amd_iommu=off or iommu=off), the NPU in an IOMMU group, no hypervisor"}
	if l.npu == nil {
		c.Status, c.Found = skip(noNPU)
		l.b.add(c)
		return
	}
	var problems []string
	if b, err := l.fs.ReadFile("/proc/cmdline"); err == nil {
		for _, arg := range strings.Fields(string(b)) {
			if arg == "amd_iommu=off" || arg == "iommu=off" {
				problems = append(problems, "the kernel command line has "+arg)
			}
		}
	}
	if names, err := l.fs.ReadDir("/sys/class/iommu"); err == nil && len(names) == 0 {
		problems = append(problems, "no IOMMU is active (/sys/class/iommu is empty)")
	}
	if !l.fs.Exists(l.npu.sys("iommu_group")) {
		problems = append(problems, "the NPU has no IOMMU group")
	}
	if b, err := l.fs.ReadFile("/proc/cpuinfo"); err == nil && cpuFlag(string(b), "hypervisor") {
		problems = append(problems, "this is a virtual machine (the amdxdna driver refuses to run under a hypervisor)")
	}
	if len(problems) == 0 {
		c.Status, c.Found = Pass, "IOMMU on; the NPU is in an IOMMU group"
	} else {
		c.Status, c.Found, c.Fix = Fail, strings.Join(problems, "; "), fixIOMMU
	}
	l.b.add(c)
}

// L8: DRM driver name and ABI version.
func (l *linuxRun) drmVersion() {
	c := Check{ID: "L8", Title: "Driver interface version", Group: GroupDriver, required: true,
		Need: fmt.Sprintf("DRM driver %s, version %d.%d or newer", amdxdna.DriverName, minDRMMajor, minDRMMinor)}
	if l.dev == nil {
		c.Status, c.Found = skip(l.noDevice())
		l.b.add(c)
		return
	}
	v, err := l.dev.Version()
	switch {
	case err != nil:
		c.Status, c.Found = Fail, fmt.Sprintf("DRM_IOCTL_VERSION failed: %v", err)
		c.Fix = "See `sudo dmesg | grep -i amdxdna`."
	case v.Name != amdxdna.DriverName:
		c.Status, c.Found = Fail, fmt.Sprintf("%s is driven by %q, not amdxdna", l.node, v.Name)
		c.Fix = "This accel device is not the AMD NPU; " + lowerFirst(fixKernel)
	case !versionAtLeast(v.Major, v.Minor, minDRMMajor, minDRMMinor):
		c.Status, c.Found = Fail, fmt.Sprintf("amdxdna %d.%d is too old", v.Major, v.Minor)
		c.Fix = fixKernel
	default:
		c.Status, c.Found = Pass, fmt.Sprintf("%s %d.%d.%d", v.Name, v.Major, v.Minor, v.Patch)
	}
	l.b.add(c)
}

// L9: NPU firmware version, by ioctl or from sysfs.
func (l *linuxRun) firmware() {
	c := Check{ID: "L9", Title: "NPU firmware version", Group: GroupNPU, required: true,
		Need: fmt.Sprintf("firmware %d.%d.0.0 or newer", minFWMajor, minFWMinor)}
	var fw amdxdna.FirmwareVersion
	var err error
	source := "ioctl"
	if l.dev != nil {
		fw, err = l.dev.Firmware()
	}
	if l.dev == nil || err != nil {
		if l.npu == nil || l.b.status("L2") != Pass {
			c.Status, c.Found = skip(dependsOn("L2", l.npu == nil))
			l.b.add(c)
			return
		}
		s, serr := readString(l.fs, l.npu.sys("fw_version"))
		if serr != nil {
			c.Status, c.Found = skip("the driver reports no firmware version (no device to query, no sysfs fw_version)")
			l.b.add(c)
			return
		}
		if fw, err = parseFirmware(s); err != nil {
			c.Status, c.Found = Fail, err.Error()
			l.b.add(c)
			return
		}
		source = "sysfs"
	}
	c.Found = fmt.Sprintf("firmware %s (%s)", fw, source)
	if versionAtLeast(int(fw.Major), int(fw.Minor), minFWMajor, minFWMinor) {
		c.Status = Pass
	} else {
		c.Status, c.Found, c.Fix = Fail, fmt.Sprintf("firmware %s is too old", fw), fixFirmware
	}
	l.b.add(c)
}

func parseFirmware(s string) (amdxdna.FirmwareVersion, error) {
	parts := strings.Split(strings.TrimSpace(s), ".")
	var v [4]uint32
	if len(parts) != 4 {
		return amdxdna.FirmwareVersion{}, fmt.Errorf("cannot read firmware version %q", s)
	}
	for i, p := range parts {
		n, err := strconv.ParseUint(p, 10, 32)
		if err != nil {
			return amdxdna.FirmwareVersion{}, fmt.Errorf("cannot read firmware version %q", s)
		}
		v[i] = uint32(n)
	}
	return amdxdna.FirmwareVersion{Major: v[0], Minor: v[1], Patch: v[2], Build: v[3]}, nil
}

// L10: AIE array columns.
func (l *linuxRun) columns() {
	c := Check{ID: "L10", Title: "NPU array size", Group: GroupNPU, required: true,
		Need: fmt.Sprintf("at least %d AIE columns (a full XDNA 2 array)", minCols)}
	if l.dev == nil {
		c.Status, c.Found = skip(l.noDevice())
		l.b.add(c)
		return
	}
	md, err := l.dev.AIEMetadata()
	switch {
	case err != nil:
		c.Status, c.Found = Fail, fmt.Sprintf("QUERY_AIE_METADATA failed: %v", err)
		c.Fix = "The driver does not answer the array query; " + lowerFirst(fixKernel)
	case md.Cols < minCols:
		c.Status, c.Found = Fail, fmt.Sprintf("%d columns x %d rows: an XDNA 1 or partial NPU, not supported by FastFlowLM", md.Cols, md.Rows)
		c.Fix = "FastFlowLM needs an XDNA 2 NPU; NPU Chat runs the model on the CPU here."
	default:
		c.Status, c.Found = Pass, fmt.Sprintf("%d columns x %d rows (AIE %d.%d)", md.Cols, md.Rows, md.VersionMajor, md.VersionMinor)
	}
	l.b.add(c)
}

// closeDevice closes the accel node opened by L6, keeping whether it opened.
func (l *linuxRun) closeDevice() {
	if l.dev != nil {
		l.dev.Close()
		l.dev = nil
		l.opened = true
	}
}

// L11: firmware files on disk.
func (l *linuxRun) fwFiles() {
	c := Check{ID: "L11", Title: "Firmware files", Group: GroupNPU,
		Need: "amdnpu firmware for this NPU in /lib/firmware"}
	if l.npu == nil {
		c.Status, c.Found = skip(noNPU)
		l.b.add(c)
		return
	}
	dirs := []string{fmt.Sprintf("/lib/firmware/amdnpu/%04x_%02x", l.npu.ID.Device, l.npu.ID.Revision)}
	if l.npu.ID.Device == 0x17f0 && l.npu.ID.Revision == 0x20 {
		// Krackan: mainline names 17f0_20, the out-of-tree driver loads 17f0_10.
		dirs = append(dirs, "/lib/firmware/amdnpu/17f0_10")
	}
	c.Need = "one of npu.dev.sbin, npu_7.sbin, npu.sbin (optionally .zst/.xz) in " + strings.Join(dirs, " or ")
	for _, dir := range dirs {
		var have []string
		for _, name := range []string{"npu.dev.sbin", "npu_7.sbin", "npu.sbin"} {
			for _, ext := range []string{"", ".zst", ".xz"} {
				if l.fs.Exists(dir + "/" + name + ext) {
					have = append(have, name+ext)
				}
			}
		}
		if len(have) > 0 {
			c.Status, c.Found = Pass, dir+": "+strings.Join(have, ", ")
			l.b.add(c)
			return
		}
	}
	c.Status, c.Found = Fail, "no firmware file in "+strings.Join(dirs, " or ")
	c.Fix = "Install or update linux-firmware (it ships amdnpu/); or install amdxdna-dkms, which brings matching firmware. Then reboot."
	l.b.add(c)
}

// L12: where the driver comes from (information).
func (l *linuxRun) moduleInfo() {
	c := Check{ID: "L12", Title: "Driver source", Group: GroupDriver, Need: "information only"}
	if l.npu == nil {
		c.Status, c.Found = skip(noNPU)
		l.b.add(c)
		return
	}
	ver, _ := readString(l.fs, "/sys/module/amdxdna/version")
	switch {
	case ver != "":
		c.Status, c.Found = Pass, "amdxdna from DKMS, version "+ver
	case l.moduleSrc == "dkms":
		c.Status, c.Found = Pass, "amdxdna from DKMS (modules.dep: updates/dkms)"
	case l.moduleSrc == "in-tree":
		c.Status, c.Found = Pass, "amdxdna from the kernel (in-tree module)"
	case l.moduleSrc == "built-in":
		c.Status, c.Found = Pass, "amdxdna built into the kernel"
	default:
		c.Status, c.Found = skip("amdxdna is not installed for kernel " + orUnknown(l.release))
	}
	l.b.add(c)
}

// L13: locked-memory limit.
func (l *linuxRun) memlock() {
	need := Limit(validateMemlock)
	what := "100 MiB (what `flm validate` asks)"
	if l.modelBytes > 0 {
		need = Limit(l.modelBytes) + memlockHeadroom
		what = fmt.Sprintf("%s (model size + 512 MiB, what FastFlowLM locks)", need)
	}
	c := Check{ID: "L13", Title: "Locked-memory limit (memlock)", Group: GroupLimits, required: true,
		Need: "a hard memlock limit of unlimited or at least " + what}
	if l.npu == nil {
		c.Status, c.Found = skip(noNPU)
		l.b.add(c)
		return
	}
	rl, err := l.sys.Memlock()
	const fix = "Allow unlimited locked memory: `printf '* soft memlock unlimited\\n* hard memlock unlimited\\n' | sudo tee /etc/security/limits.d/99-amdxdna.conf`, then log out and in again (check with `ulimit -l`). " +
		"Fedora also needs `LimitMEMLOCK=infinity` in the [Service] of user@.service (`sudo systemctl edit user@.service`); " +
		"a systemd service that runs npuchat needs `LimitMEMLOCK=infinity` too. Symptoms otherwise: \"failed to allocate BO\", \"Lock limit exceeded\"."
	c.Found = fmt.Sprintf("soft %s, hard %s", rl.Cur, rl.Max)
	switch {
	case err != nil:
		c.Status, c.Found = Warn, fmt.Sprintf("cannot read RLIMIT_MEMLOCK: %v", err)
	case rl.Cur == Unlimited || rl.Cur >= need:
		c.Status = Pass
	case rl.Max == Unlimited:
		c.Status, c.Found = Pass, c.Found+" (FastFlowLM raises the soft limit itself)"
	case rl.Max >= need && rl.Cur < validateMemlock:
		// flm validate asks setrlimit for unlimited when the soft limit is
		// below 100 MiB, which a finite hard limit refuses; serve raises it
		// only to what the model needs, which works.
		c.Status, c.Found, c.Fix = Warn, c.Found+": enough for FastFlowLM to raise it for the model, but `flm validate` reports \"Memlock limit is too low\"", fix
	case rl.Max >= need:
		c.Status, c.Found = Pass, c.Found+" (FastFlowLM raises the soft limit itself)"
	default:
		c.Status, c.Found, c.Fix = Fail, c.Found+": too low to lock the model in memory", fix
	}
	l.b.add(c)
}

// xrtDirs lists where libxrt_coreutil.so.2 may be, in search order:
// $XILINX_XRT/lib, the paths /etc/ld.so.cache lists for it, XRT's default
// /opt/xilinx/xrt/lib, the /etc/ld.so.conf.d directories, then the usual
// library directories.
func (l *linuxRun) xrtDirs() []string {
	var dirs []string
	if x := l.getenv("XILINX_XRT"); x != "" {
		dirs = append(dirs, path.Join(x, "lib"))
	}
	// What the dynamic loader would load comes next, then XRT's default prefix.
	if b, err := l.fs.ReadFile("/etc/ld.so.cache"); err == nil {
		for _, p := range ldCacheLookup(b, xrt.LinuxLibrary) {
			dirs = append(dirs, path.Dir(p))
		}
	}
	dirs = append(dirs, "/opt/xilinx/xrt/lib")
	confs, _ := l.fs.Glob("/etc/ld.so.conf.d/*.conf")
	for _, conf := range confs {
		b, err := l.fs.ReadFile(conf)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			line = strings.TrimSpace(line)
			if strings.HasPrefix(line, "/") {
				dirs = append(dirs, path.Clean(line))
			}
		}
	}
	dirs = append(dirs, "/usr/lib/x86_64-linux-gnu", "/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu",
		"/usr/lib64", "/usr/lib", "/usr/local/lib")
	seen := map[string]bool{}
	out := dirs[:0]
	for _, d := range dirs {
		if !seen[d] {
			seen[d] = true
			out = append(out, d)
		}
	}
	return out
}

// L14: the XRT library.
func (l *linuxRun) xrtLibrary() {
	c := Check{ID: "L14", Title: "XRT runtime library", Group: GroupRuntime, required: true,
		Need: xrt.LinuxLibrary + " (XRT, which FastFlowLM uses to reach the NPU) that loads"}
	if l.npu == nil {
		c.Status, c.Found = skip(noNPU)
		l.b.add(c)
		return
	}
	dirs := l.xrtDirs()
	for _, d := range dirs {
		if l.fs.Exists(d + "/" + xrt.LinuxLibrary) {
			l.xrtDir, l.xrtLib = d, d+"/"+xrt.LinuxLibrary
			break
		}
	}
	if l.xrtLib == "" {
		c.Status, c.Found = Fail, xrt.LinuxLibrary+" not found (looked in "+strings.Join(dirs, ", ")+")"
		c.Fix = fixXRT
		l.b.add(c)
		return
	}
	if l.xrt == nil {
		c.Status, c.Found = Pass, l.xrtLib+" (not loaded: XRT probe not run)"
		l.b.add(c)
		return
	}
	r, err := l.xrt.Probe(l.ctx, l.xrtLib, false)
	switch {
	case err != nil:
		c.Status, c.Found = Fail, fmt.Sprintf("loading %s failed: %v", l.xrtLib, err)
		c.Fix = "Reinstall XRT; `ldd " + l.xrtLib + "` shows missing dependencies. " + fixXRT
	case !r.Loaded:
		c.Status, c.Found = Fail, fmt.Sprintf("%s does not load: %s", l.xrtLib, r.LoadError)
		c.Fix = "Reinstall XRT; `ldd " + l.xrtLib + "` shows missing dependencies. " + fixXRT
	default:
		l.xrtLoaded = true
		c.Status, c.Found = Pass, fmt.Sprintf("XRT %s at %s", r.Version, l.xrtLib)
	}
	l.b.add(c)
}

// L15: the xdna plugin next to XRT.
func (l *linuxRun) xrtPlugin() {
	c := Check{ID: "L15", Title: "XRT NPU plugin", Group: GroupRuntime, required: true,
		Need: "libxrt_driver_xdna.so.2 beside libxrt_core.so.2 (XRT loads its device plugins from there)"}
	if l.xrtDir == "" {
		c.Status, c.Found = skip(dependsOn("L14", l.npu == nil))
		l.b.add(c)
		return
	}
	plugins, _ := l.fs.Glob(l.xrtDir + "/" + xrt.LinuxPluginPattern)
	switch {
	case len(plugins) > 0:
		l.pluginOK = true
		c.Status, c.Found = Pass, plugins[0]
	default:
		c.Status, c.Found = Fail, "no libxrt_driver_xdna.so* in "+l.xrtDir+": XRT will see no NPU"
		c.Fix = fixPlugin
	}
	if !l.fs.Exists(l.xrtDir + "/libxrt_core.so.2") {
		c.Found += "; libxrt_core.so.2 is missing from " + l.xrtDir
		if c.Status == Pass {
			c.Status, c.Fix = Fail, fixXRT
		}
	}
	l.b.add(c)
}

// L16: XRT opens device 0.
func (l *linuxRun) xrtOpen() {
	c := Check{ID: "L16", Title: "XRT opens the NPU", Group: GroupRuntime,
		Need: "xrtDeviceOpen(0) returns a device (what FastFlowLM does first)"}
	switch {
	case l.xrtLib == "":
		c.Status, c.Found = skip(dependsOn("L14", l.npu == nil))
	case l.xrt == nil:
		c.Status, c.Found = skip("XRT probe not run")
	case !l.xrtLoaded:
		c.Status, c.Found = skip("XRT does not load (L14)")
	case !l.opened:
		c.Status, c.Found = skip(l.noDevice())
	}
	if c.Status == Skipped {
		l.b.add(c)
		return
	}
	c.required = true
	r, err := l.xrt.Probe(l.ctx, l.xrtLib, true)
	switch {
	case err != nil:
		c.Status, c.Found = Fail, fmt.Sprintf("XRT crashed or hung opening device 0: %v", err)
		c.Fix = "Run `xrt-smi examine` to see XRT's own error; reinstall XRT and its xdna plugin so that they match the driver. " + fixPlugin
	case r.DeviceOpened && r.DeviceError == "":
		c.Status, c.Found = Pass, "XRT opened and closed device 0"
	case r.DeviceOpened:
		c.Status, c.Found = Warn, "XRT opened device 0 but: "+r.DeviceError
	default:
		c.Status, c.Found = Fail, "XRT cannot open device 0 (\"No such device with index '0'\"): "+orUnknown(r.DeviceError)
		if !l.pluginOK {
			c.Fix = fixPlugin
		} else {
			c.Fix = "The driver works (L6–L10) but XRT does not see it: run `xrt-smi examine`; the XRT plugin may not match the driver (reinstall both from the same source)."
		}
	}
	l.b.add(c)
}

// kernelLogPatterns map known amdxdna kernel messages to what to do.
var kernelLogPatterns = []struct{ match, meaning, fix string }{
	{"request_firmware", "the firmware file is missing", "Install or update linux-firmware (L11)."},
	{"Direct firmware load", "the firmware file is missing", "Install or update linux-firmware (L11)."},
	{"Incompatible firmware protocol", "the firmware is newer than this driver understands", "Use amdxdna-dkms or kernel 7.0+ with 1.1 firmware, or go back to the firmware your kernel shipped."},
	{"firmware is not alive", "the firmware did not start (wrong or corrupt file)", "Reinstall linux-firmware; do not mix firmware from another driver version."},
	{"Invalid mbox magic", "the firmware did not start (wrong or corrupt file)", "Reinstall linux-firmware; do not mix firmware from another driver version."},
	{"SVA bind device failed", "the IOMMU could not bind a process (SVA/PASID)", fixIOMMU},
	{"PASID unavailable", "the IOMMU has no PASID support here", fixIOMMU},
	{"hypervisor", "the driver refuses to run in a virtual machine", "Run on the machine itself."},
	{"aie2_set_cmd_timeout", "an NPU command timed out (ERT_CMD_STATE_TIMEOUT)", fixTimeout + " A busy GPU (ROCm) at the same time can also cause it."},
	{"timeout", "an NPU command timed out (ERT_CMD_STATE_TIMEOUT)", fixTimeout},
}

// npuLogLine keeps the kernel log lines about the NPU.
func npuLogLine(msg string) bool {
	return strings.Contains(msg, "amdxdna") || strings.Contains(msg, "amdnpu") || strings.Contains(msg, "aie2_")
}

// L17: known errors in the kernel log.
func (l *linuxRun) kernelLog() {
	c := Check{ID: "L17", Title: "Kernel log", Group: GroupDriver,
		Need: "no amdxdna errors (firmware, protocol, IOMMU, timeouts) in this boot's kernel log"}
	if l.npu == nil {
		c.Status, c.Found = skip(noNPU)
		l.b.add(c)
		return
	}
	lines, err := l.sys.KernelLog()
	if err != nil {
		if e := errnoOf(err); e == "EPERM" || e == "EACCES" {
			c.Status, c.Found = skip("reading the kernel log needs root: run `sudo dmesg | grep -i amdxdna`, or `sudo npuchat check`")
		} else {
			c.Status, c.Found = skip(fmt.Sprintf("cannot read the kernel log: %v", err))
		}
		l.b.add(c)
		return
	}
	var found, fixes []string
	seen := map[string]bool{}
	for _, line := range lines {
		if !npuLogLine(line) {
			continue
		}
		for _, p := range kernelLogPatterns {
			if !strings.Contains(line, p.match) {
				continue
			}
			if !seen[p.meaning] {
				seen[p.meaning] = true
				found = append(found, fmt.Sprintf("%q: %s", strings.TrimSpace(line), p.meaning))
				fixes = append(fixes, p.fix)
			}
			break
		}
	}
	if len(found) == 0 {
		c.Status, c.Found = Pass, fmt.Sprintf("no known amdxdna errors (%d NPU lines read)", len(lines))
	} else {
		c.Status, c.Found, c.Fix = Warn, strings.Join(found, "; "), strings.Join(fixes, " ")
	}
	l.b.add(c)
}

// L18: the driver's command timeout.
func (l *linuxRun) cmdTimeout() {
	c := Check{ID: "L18", Title: "NPU command timeout", Group: GroupDriver,
		Need: fmt.Sprintf("amdxdna timeout_in_sec of %d s or more (or 0, no timeout) for long models", recommendedTimeout)}
	if l.npu == nil {
		c.Status, c.Found = skip(noNPU)
		l.b.add(c)
		return
	}
	if !l.fs.Exists("/sys/module/amdxdna") {
		c.Status, c.Found = skip("amdxdna is not loaded")
		l.b.add(c)
		return
	}
	s, err := readString(l.fs, "/sys/module/amdxdna/parameters/timeout_in_sec")
	if errors.Is(err, fs.ErrNotExist) {
		c.Status, c.Found = Pass, "this amdxdna has no timeout_in_sec parameter"
		l.b.add(c)
		return
	}
	n, perr := strconv.Atoi(s)
	switch {
	case err != nil || perr != nil:
		c.Status, c.Found = Warn, fmt.Sprintf("cannot read timeout_in_sec (%q, %v)", s, err)
	case n == 0:
		c.Status, c.Found = Pass, "timeout_in_sec=0 (no command timeout)"
	case n < recommendedTimeout:
		c.Status = Warn
		c.Found = fmt.Sprintf("timeout_in_sec=%d: long models (such as 42-layer MiniCPM5-2B) can fail with ERT_CMD_STATE_TIMEOUT", n)
		c.Fix = fixTimeout
	default:
		c.Status, c.Found = Pass, fmt.Sprintf("timeout_in_sec=%d", n)
	}
	l.b.add(c)
}

// noDevice says why there is no open device for an ioctl check.
func (l *linuxRun) noDevice() string {
	switch {
	case l.npu == nil:
		return noNPU
	case l.b.status("L2") != Pass:
		return "amdxdna is not bound (L2)"
	case l.node == "":
		return "no device node (L4)"
	case l.b.status("L5") == Fail:
		return "no permission on " + l.node + " (L5)"
	default:
		return "the NPU could not be opened (L6)"
	}
}

func dependsOn(id string, noDevice bool) string {
	if noDevice {
		return noNPU
	}
	names := map[string]string{"L2": "amdxdna is not bound (L2)", "L4": "no device node (L4)", "L14": "XRT not found (L14)"}
	return names[id]
}

func readHex(f FS, name string) (uint64, error) {
	s, err := readString(f, name)
	if err != nil {
		return 0, err
	}
	return strconv.ParseUint(strings.TrimPrefix(s, "0x"), 16, 32)
}

func cpuFlag(cpuinfo, flag string) bool {
	for _, line := range strings.Split(cpuinfo, "\n") {
		key, val, ok := strings.Cut(line, ":")
		if ok && strings.TrimSpace(key) == "flags" {
			for _, f := range strings.Fields(val) {
				if f == flag {
					return true
				}
			}
			return false
		}
	}
	return false
}

func lowerFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToLower(s[:1]) + s[1:]
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

func orNode(s string) string {
	if s == "" {
		return "/dev/accel/accelN"
	}
	return s
}
