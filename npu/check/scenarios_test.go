package check

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/npuchat/npuchat/internal/golden"
	"github.com/npuchat/npuchat/npu/amdxdna"
	"github.com/npuchat/npuchat/npu/xrt"
)

var (
	regenTrees = flag.Bool("regen-trees", false, "rewrite the recorded trees in testdata/trees from the scenarios in scenarios_test.go")
)

// scenario is one machine: files, system-call answers and XRT answers.
// -regen-trees records each through Record into testdata/trees/<name>;
// the golden tests replay those trees.
type scenario struct {
	name, note string
	goos       string
	fs         *memFS
	linux      *fakeLinux
	windows    fakeWindows
	xrt        *fakeXRT
	// want is checked besides the golden file, so that a wrong golden
	// cannot pass unnoticed.
	wantReady bool
	wantFail  []string
}

const npuBDF = "0000:c4:00.1"

// strixHalo is a ready Ryzen AI Max+ 395 (Strix Halo) on kernel 7.0 with
// the in-tree driver, firmware 1.1.2.65 and XRT in /opt/xilinx/xrt.
// Values follow docs/npu.md (PCI 17f0 rev 11, 8 columns, amdxdna 0.6);
// the tree is synthetic, not recorded on real hardware.
func strixHalo() scenario {
	m := newMemFS()
	dev := "/sys/bus/pci/devices/" + npuBDF + "/"
	for k, v := range map[string]string{
		"/sys/bus/pci/devices/0000:00:00.0/vendor": "0x1022\n", "/sys/bus/pci/devices/0000:00:00.0/device": "0x1507\n",
		"/sys/bus/pci/devices/0000:00:00.0/revision": "0x00\n",
		"/sys/bus/pci/devices/0000:c3:00.0/vendor":   "0x1002\n", "/sys/bus/pci/devices/0000:c3:00.0/device": "0x1586\n",
		dev + "vendor": "0x1022\n", dev + "device": "0x17f0\n", dev + "revision": "0x11\n", dev + "class": "0x118000\n",
		dev + "vbnv": "RyzenAI-npu5\n", dev + "fw_version": "1.1.2.65\n", dev + "device_type": "0\n",
		"/sys/module/amdxdna/parameters/timeout_in_sec": "2\n",
		"/lib/modules/7.0.0-10-generic/modules.dep":     "kernel/drivers/accel/amdxdna/amdxdna.ko.zst: kernel/drivers/gpu/drm/drm_shmem_helper.ko.zst\n",
		"/lib/firmware/amdnpu/17f0_11/npu_7.sbin.zst":   "",
		"/lib/firmware/amdnpu/17f0_11/npu.sbin.zst":     "",
		"/proc/cmdline": "BOOT_IMAGE=/vmlinuz-7.0.0-10-generic root=/dev/nvme0n1p2 ro quiet splash iommu=pt\n",
		"/proc/cpuinfo": "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD RYZEN AI MAX+ 395 w/ Radeon 8060S\nflags\t\t: fpu vme de pse tsc msr pae mce cx8 apic sse sse2 avx2 avx512f\n\n",
		"/etc/ld.so.conf.d/x86_64-linux-gnu.conf":     "# Multiarch support\n/usr/local/lib/x86_64-linux-gnu\n/lib/x86_64-linux-gnu\n/usr/lib/x86_64-linux-gnu\n",
		"/opt/xilinx/xrt/lib/libxrt_coreutil.so.2":    "",
		"/opt/xilinx/xrt/lib/libxrt_core.so.2":        "",
		"/opt/xilinx/xrt/lib/libxrt_driver_xdna.so.2": "",
		"/dev/accel/accel0":                           "",
	} {
		m.files[k] = v
	}
	m.links[dev+"driver"] = "../../../../bus/pci/drivers/amdxdna"
	m.links[dev+"iommu_group"] = "../../../../kernel/iommu_groups/12"
	m.dirs[dev+"accel/accel0"] = true
	m.dirs["/sys/class/iommu/ivhd0"] = true
	return scenario{
		name: "strix-halo-ready", goos: "linux", fs: m, wantReady: true,
		note: "Synthetic: a ready Strix Halo (PCI 17f0 rev 11) on kernel 7.0, in-tree amdxdna 0.6, firmware 1.1.2.65, XRT 2.21 with the xdna plugin.",
		linux: &fakeLinux{
			uname:   Uname{Release: "7.0.0-10-generic", Machine: "x86_64"},
			memlock: Rlimit{Cur: Unlimited, Max: Unlimited},
			drm:     amdxdna.DRMVersion{Major: 0, Minor: 6, Patch: 0, Name: amdxdna.DriverName, Date: "0", Desc: "AMD XDNA"},
			fw:      amdxdna.FirmwareVersion{Major: 1, Minor: 1, Patch: 2, Build: 65},
			aie:     amdxdna.AIEMetadata{ColSize: 4194304, Cols: 8, Rows: 6, VersionMajor: 2, VersionMinor: 1},
			kmsg: []string{
				"amdxdna 0000:c4:00.1: enabling device (0000 -> 0002)",
				"[drm] Initialized amdxdna_accel_driver 0.6.0 for 0000:c4:00.1 on minor 0",
			},
		},
		xrt: &fakeXRT{
			load: xrt.Result{Loaded: true, Version: "2.21.75"},
			open: xrt.Result{Loaded: true, Version: "2.21.75", DeviceTried: true, DeviceOpened: true},
		},
	}
}

func scenarios() []scenario {
	var out []scenario
	add := func(name, note string, wantFail []string, change func(s *scenario)) {
		s := strixHalo()
		s.fs = s.fs.clone()
		l := *s.linux
		s.linux = &l
		x := *s.xrt
		s.xrt = &x
		s.name, s.note, s.wantReady, s.wantFail = name, note, len(wantFail) == 0, wantFail
		change(&s)
		out = append(out, s)
	}
	dev := "/sys/bus/pci/devices/" + npuBDF + "/"
	add("strix-halo-ready", strixHalo().note, nil, func(s *scenario) {})
	add("phoenix-xdna1", "Synthetic: an XDNA 1 laptop (Phoenix, PCI 1502 rev 00, 4 columns) on Ubuntu 25.04's kernel 6.14 with the in-tree driver.",
		[]string{"L1", "L3", "L10"}, func(s *scenario) {
			s.fs.files[dev+"device"] = "0x1502\n"
			s.fs.files[dev+"revision"] = "0x00\n"
			s.fs.files[dev+"vbnv"] = "RyzenAI-npu1\n"
			s.fs.removeAll("/lib/firmware/amdnpu/17f0_11")
			s.fs.files["/lib/firmware/amdnpu/1502_00/npu.sbin.zst"] = ""
			s.fs.removeAll("/lib/modules/7.0.0-10-generic")
			s.fs.files["/lib/modules/6.14.0-15-generic/modules.dep"] = "kernel/drivers/accel/amdxdna/amdxdna.ko.zst: kernel/drivers/gpu/drm/drm_shmem_helper.ko.zst\n"
			s.linux.uname.Release = "6.14.0-15-generic"
			s.linux.aie = amdxdna.AIEMetadata{ColSize: 4194304, Cols: 4, Rows: 6, VersionMajor: 1, VersionMinor: 1}
			s.linux.fw = amdxdna.FirmwareVersion{Major: 1, Minor: 5, Patch: 2, Build: 380}
			s.fs.files[dev+"fw_version"] = "1.5.2.380\n"
		})
	add("driver-not-bound", "Synthetic: Strix Halo on kernel 7.0 where amdxdna is installed but not loaded, so nothing is bound to the NPU.",
		[]string{"L2"}, func(s *scenario) {
			delete(s.fs.links, dev+"driver")
			delete(s.fs.files, dev+"vbnv")
			delete(s.fs.files, dev+"fw_version")
			delete(s.fs.files, dev+"device_type")
			s.fs.removeAll(dev + "accel")
			s.fs.removeAll("/sys/module/amdxdna")
			delete(s.fs.files, "/dev/accel/accel0")
			s.linux.kmsg = nil
		})
	add("kernel-too-old", "Synthetic: Strix on Ubuntu 24.04's kernel 6.8, which has no amdxdna driver, and no DKMS driver installed.",
		[]string{"L2", "L3"}, func(s *scenario) {
			s.fs.files[dev+"revision"] = "0x10\n"
			s.fs.removeAll("/lib/firmware/amdnpu/17f0_11")
			s.fs.files["/lib/firmware/amdnpu/17f0_10/npu.sbin.zst"] = ""
			delete(s.fs.links, dev+"driver")
			delete(s.fs.files, dev+"vbnv")
			delete(s.fs.files, dev+"fw_version")
			delete(s.fs.files, dev+"device_type")
			s.fs.removeAll(dev + "accel")
			s.fs.removeAll("/sys/module/amdxdna")
			delete(s.fs.files, "/dev/accel/accel0")
			s.fs.removeAll("/lib/modules/7.0.0-10-generic")
			s.fs.files["/lib/modules/6.8.0-49-generic/modules.dep"] = "kernel/drivers/gpu/drm/amd/amdgpu/amdgpu.ko.zst: kernel/drivers/gpu/drm/drm_exec.ko.zst\n"
			s.linux.uname.Release = "6.8.0-49-generic"
			s.linux.kmsg = nil
		})
	add("firmware-too-old", "Synthetic: Strix Halo on kernel 6.18 with the in-tree driver and the old firmware 1.0.0.166.",
		[]string{"L9"}, func(s *scenario) {
			s.fs.removeAll("/lib/modules/7.0.0-10-generic")
			s.fs.files["/lib/modules/6.18.0-9-generic/modules.dep"] = "kernel/drivers/accel/amdxdna/amdxdna.ko.zst: kernel/drivers/gpu/drm/drm_shmem_helper.ko.zst\n"
			s.linux.uname.Release = "6.18.0-9-generic"
			s.linux.fw = amdxdna.FirmwareVersion{Major: 1, Minor: 0, Patch: 0, Build: 166}
			s.fs.files[dev+"fw_version"] = "1.0.0.166\n"
			delete(s.fs.files, "/lib/firmware/amdnpu/17f0_11/npu_7.sbin.zst")
		})
	add("permission-denied", "Synthetic: Strix Halo, ready, but the user is not in the render group: /dev/accel/accel0 is crw-rw---- root render.",
		[]string{"L5"}, func(s *scenario) {
			s.linux.access = map[string]error{"/dev/accel/accel0": Errno("EACCES")}
			s.linux.open = map[string]error{"/dev/accel/accel0": Errno("EACCES")}
			s.linux.kmsgErr = Errno("EPERM")
		})
	add("memlock-low", "Synthetic: Strix Halo, ready, but the memlock limit is the distribution default of 8 MiB (soft and hard).",
		[]string{"L13"}, func(s *scenario) {
			s.linux.memlock = Rlimit{Cur: 8 << 20, Max: 8 << 20}
		})
	add("xrt-plugin-missing", "Synthetic: Strix Halo with XRT from distribution packages in /usr/lib/x86_64-linux-gnu but without the xdna plugin, so XRT sees no device.",
		[]string{"L15", "L16"}, func(s *scenario) {
			s.fs.removeAll("/opt/xilinx")
			s.fs.files["/usr/lib/x86_64-linux-gnu/libxrt_coreutil.so.2"] = ""
			s.fs.files["/usr/lib/x86_64-linux-gnu/libxrt_core.so.2"] = ""
			s.xrt.open = xrt.Result{Loaded: true, Version: "2.21.75", DeviceTried: true,
				DeviceError: "xrtDeviceOpen(0) returned NULL: XRT found no device with index 0"}
		})
	add("iommu-off", "Synthetic: Strix Halo booted with amd_iommu=off: no IOMMU, so opening the node fails with ENODEV (SVA bind).",
		[]string{"L6", "L7"}, func(s *scenario) {
			s.fs.files["/proc/cmdline"] = "BOOT_IMAGE=/vmlinuz-7.0.0-10-generic root=/dev/nvme0n1p2 ro quiet splash amd_iommu=off\n"
			s.fs.removeAll("/sys/class/iommu/ivhd0")
			s.fs.dirs["/sys/class/iommu"] = true
			delete(s.fs.links, dev+"iommu_group")
			s.linux.open = map[string]error{"/dev/accel/accel0": Errno("ENODEV")}
			s.linux.kmsg = append(s.linux.kmsg, "amdxdna 0000:c4:00.1: [drm] *ERROR* amdxdna_drm_open: SVA bind device failed, ret -19")
		})
	add("no-npu", "Synthetic: an AMD desktop without an NPU (or with it disabled in the BIOS), no XRT installed.",
		[]string{"L1"}, func(s *scenario) {
			s.fs.removeAll("/sys/bus/pci/devices/" + npuBDF)
			s.fs.removeAll("/sys/module/amdxdna")
			s.fs.removeAll("/opt/xilinx")
			delete(s.fs.files, "/dev/accel/accel0")
		})

	win := func(name, note string, wantFail []string, devs []WinDevice, x *fakeXRT) {
		out = append(out, scenario{name: name, note: note, goos: "windows", windows: fakeWindows{devices: devs},
			xrt: x, wantReady: len(wantFail) == 0, wantFail: wantFail})
	}
	strixWin := WinDevice{
		InstanceID:  `PCI\VEN_1022&DEV_17F0&SUBSYS_0B3D1028&REV_11\4&2D2A4A0E&0&0141`,
		HardwareIDs: []string{`PCI\VEN_1022&DEV_17F0&SUBSYS_0B3D1028&REV_11`, `PCI\VEN_1022&DEV_17F0&SUBSYS_0B3D1028`, `PCI\VEN_1022&DEV_17F0&CC_118000`},
		ClassGUID:   "{f01a9d53-3ff6-48d2-9f97-c8a7004be10c}", Class: "ComputeAccelerator",
		Description: "NPU Compute Accelerator Device", Status: 0x0180200a, DriverKey: `{f01a9d53-3ff6-48d2-9f97-c8a7004be10c}\0000`,
		DriverVersion: "32.0.203.311",
	}
	okXRT := &fakeXRT{load: xrt.Result{Loaded: true, Version: "2.19.0"}, open: xrt.Result{Loaded: true, Version: "2.19.0", DeviceTried: true, DeviceOpened: true}}
	win("windows-ready", "Synthetic: Windows 11 on Strix Halo with NPU driver 32.0.203.311.", nil, []WinDevice{strixWin}, okXRT)
	old := strixWin
	old.DriverVersion = "32.0.203.280"
	win("windows-old-driver", "Synthetic: Windows 11 on Strix with NPU driver 32.0.203.280 (Ryzen AI 1.5, older than FastFlowLM's 32.0.203.304).", []string{"W4"}, []WinDevice{old}, okXRT)
	legacy := strixWin
	legacy.ClassGUID, legacy.Class, legacy.Description, legacy.DriverVersion = "{4d36e97d-e325-11ce-bfc1-08002be10318}", "System", "AMD IPU Device", "10.1009.8.100"
	win("windows-legacy-ipu", "Synthetic: Windows 11 on Strix with the legacy IPU driver 10.1009.8.100 (Ryzen AI 1.1).", []string{"W2", "W4"}, []WinDevice{legacy}, okXRT)
	win("windows-no-npu", "Synthetic: Windows without an AMD NPU and without the NPU driver's XRT.", []string{"W1"}, nil,
		&fakeXRT{load: xrt.Result{LoadError: "LoadLibrary xrt_coreutil.dll: The specified module could not be found."}})
	return out
}

const treesDir = "testdata/trees"

// TestRegenTrees records every scenario afresh and, run with
// -regen-trees, writes the recordings into testdata/trees; otherwise it
// checks that testdata/trees holds exactly what they record (the same
// files, byte for byte), so a tree nobody regenerated after a change to
// the scenarios or to Record fails here.
func TestRegenTrees(t *testing.T) {
	root := t.TempDir()
	if *regenTrees {
		root = treesDir
	}
	for _, s := range scenarios() {
		dir := filepath.Join(root, s.name)
		if err := os.RemoveAll(dir); err != nil {
			t.Fatal(err)
		}
		opts := Options{GOOS: s.goos, XRT: s.xrt}
		if s.goos == "linux" {
			opts.FS, opts.Linux = s.fs, s.linux
		} else {
			opts.FS, opts.Windows = newMemFS(), s.windows
		}
		if _, err := Record(context.Background(), dir, opts); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		// Add the note to the recording.
		p := filepath.Join(dir, RecordingFile)
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		var rec Recording
		if err := json.Unmarshal(b, &rec); err != nil {
			t.Fatal(err)
		}
		rec.Note = s.note
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rec); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if !*regenTrees {
		for _, s := range scenarios() {
			sameTree(t, filepath.Join(root, s.name), filepath.Join(treesDir, s.name))
		}
	}
}

// sameTree fails the test where the files under got and want differ: a
// file only in one of them, other bytes, or a link to elsewhere.
func sameTree(t *testing.T, got, want string) {
	t.Helper()
	files := func(root string) map[string][]byte {
		m := map[string][]byte{}
		err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			var b []byte
			if d.Type()&os.ModeSymlink != 0 {
				var target string
				target, err = os.Readlink(p) // the recorded /sys links
				b = []byte("-> " + target)
			} else {
				b, err = os.ReadFile(p)
			}
			rel, _ := filepath.Rel(root, p)
			m[filepath.ToSlash(rel)] = b
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	g, w := files(got), files(want)
	for name, b := range g {
		if wb, ok := w[name]; !ok {
			t.Errorf("%s: %s is recorded but not in testdata (run go test -run TestRegenTrees -regen-trees)", want, name)
		} else if !bytes.Equal(b, wb) {
			t.Errorf("%s: %s differs from its recording (run go test -run TestRegenTrees -regen-trees)", want, name)
		}
	}
	for name := range w {
		if _, ok := g[name]; !ok {
			t.Errorf("%s: %s is in testdata but no longer recorded", want, name)
		}
	}
}

// TestScenarios replays every recorded tree and compares the report with
// its golden text and JSON (-update rewrites them), and with the
// scenario's expected verdict and failing checks.
func TestScenarios(t *testing.T) {
	known := map[string]scenario{}
	for _, s := range scenarios() {
		known[s.name] = s
	}
	// Every tree gets a golden report, including trees users recorded and
	// that were copied here; the scenarios also state their verdict.
	entries, err := os.ReadDir(treesDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		name := e.Name()
		t.Run(name, func(t *testing.T) {
			r, err := Run(context.Background(), Options{Root: filepath.Join(treesDir, name)})
			if err != nil {
				t.Fatal(err)
			}
			if s, ok := known[name]; ok {
				if r.Ready != s.wantReady {
					t.Errorf("ready = %v, want %v (%s)", r.Ready, s.wantReady, r.Summary)
				}
				var failed []string
				for _, c := range r.Checks {
					if c.Status == Fail {
						failed = append(failed, c.ID)
					}
				}
				if !equalStrings(failed, s.wantFail) {
					t.Errorf("failed checks %v, want %v", failed, s.wantFail)
				}
			}
			for _, c := range r.Checks {
				if c.Status == Fail && c.Fix == "" {
					t.Errorf("%s fails without a fix", c.ID)
				}
			}
			var text, js bytes.Buffer
			if err := WriteText(&text, r); err != nil {
				t.Fatal(err)
			}
			if err := WriteJSON(&js, r); err != nil {
				t.Fatal(err)
			}
			golden.Assert(t, filepath.Join("testdata/golden", name+".txt"), text.Bytes())
			golden.Assert(t, filepath.Join("testdata/golden", name+".json"), js.Bytes())
		})
	}
	for name := range known {
		if _, err := os.Stat(filepath.Join(treesDir, name)); err != nil {
			t.Errorf("scenario %s has no tree (run go test -run TestRegenTrees -regen-trees)", name)
		}
	}
}

// TestScenariosMatchFakes checks that replaying a tree gives the same
// report as running on the scenario's fakes directly, so a stale tree
// (scenario changed, trees not regenerated) fails.
func TestScenariosMatchFakes(t *testing.T) {
	for _, s := range scenarios() {
		t.Run(s.name, func(t *testing.T) {
			opts := Options{GOOS: s.goos, XRT: s.xrt}
			if s.goos == "linux" {
				opts.FS, opts.Linux = s.fs, s.linux
			} else {
				opts.FS, opts.Windows = newMemFS(), s.windows
			}
			direct, err := Run(context.Background(), opts)
			if err != nil {
				t.Fatal(err)
			}
			replayed, err := Run(context.Background(), Options{Root: filepath.Join(treesDir, s.name)})
			if err != nil {
				t.Fatal(err)
			}
			a, _ := json.Marshal(direct)
			b, _ := json.Marshal(replayed)
			if !bytes.Equal(a, b) {
				t.Errorf("tree and fakes disagree (run go test -run TestRegenTrees -regen-trees):\n fakes: %s\n tree:  %s", a, b)
			}
			if s.linux != nil && s.linux.openCount != 0 {
				t.Errorf("device left open (%d)", s.linux.openCount)
			}
		})
	}
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
