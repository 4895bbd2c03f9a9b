package check

import (
	"context"
	"strings"
	"testing"

	"github.com/npuchat/npuchat/npu/xrt"
)

// TestLinuxBranches covers the outcomes the recorded scenarios do not,
// each as a change to the ready Strix Halo.
func TestLinuxBranches(t *testing.T) {
	dev := "/sys/bus/pci/devices/" + npuBDF + "/"
	tests := []struct {
		name       string
		change     func(s *scenario)
		modelBytes int64
		id         string
		status     Status
		found      string
	}{
		{"bound to vfio", func(s *scenario) { s.fs.links[dev+"driver"] = "../../../../bus/pci/drivers/vfio-pci" },
			0, "L2", Fail, "bound to driver vfio-pci"},
		{"loaded, probe failed", func(s *scenario) { delete(s.fs.links, dev+"driver") }, 0, "L2", Fail, "did not bind"},
		{"not installed", func(s *scenario) {
			delete(s.fs.links, dev+"driver")
			s.fs.removeAll("/sys/module/amdxdna")
			s.fs.removeAll("/lib/modules")
		}, 0, "L2", Fail, "not installed for this kernel"},
		{"bound, no accel", func(s *scenario) { s.fs.removeAll(dev + "accel") }, 0, "L4", Fail, "created no accel device"},
		{"accel, no node", func(s *scenario) { delete(s.fs.files, "/dev/accel/accel0") }, 0, "L4", Fail, "does not exist"},
		{"busy", func(s *scenario) { s.linux.open = map[string]error{"/dev/accel/accel0": Errno("EBUSY")} }, 0, "L6", Fail, "busy"},
		{"open EACCES despite access", func(s *scenario) { s.linux.open = map[string]error{"/dev/accel/accel0": Errno("EACCES")} },
			0, "L6", Fail, "permission denied"},
		{"not amdxdna", func(s *scenario) { s.linux.drm.Name = "intel_vpu" }, 0, "L8", Fail, `"intel_vpu", not amdxdna`},
		{"abi too old", func(s *scenario) { s.linux.drm.Minor = 5 }, 0, "L8", Fail, "amdxdna 0.5 is too old"},
		{"fw ioctl fails, sysfs used", func(s *scenario) { s.linux.fwErr = Errno("EINVAL") }, 0, "L9", Pass, "1.1.2.65 (sysfs)"},
		{"krackan firmware in 17f0_10", func(s *scenario) {
			s.fs.files[dev+"revision"] = "0x20\n"
			s.fs.removeAll("/lib/firmware")
			s.fs.files["/lib/firmware/amdnpu/17f0_10/npu.sbin.zst"] = ""
		}, 0, "L11", Pass, "17f0_10: npu.sbin.zst"},
		{"no firmware files", func(s *scenario) { s.fs.removeAll("/lib/firmware") }, 0, "L11", Fail, "no firmware file"},
		{"dkms module", func(s *scenario) {
			s.fs.files["/sys/module/amdxdna/version"] = "2.21.0_20251110, 0ab3c4d\n"
			s.linux.uname.Release = "6.11.0-29-generic"
		}, 0, "L3", Pass, "with amdxdna from DKMS"},
		{"dkms version shown", func(s *scenario) { s.fs.files["/sys/module/amdxdna/version"] = "2.21.0_20251110, 0ab3c4d\n" },
			0, "L12", Pass, "DKMS, version 2.21.0_20251110"},
		{"dkms from modules.dep", func(s *scenario) {
			s.fs.files["/lib/modules/7.0.0-10-generic/modules.dep"] = "updates/dkms/amdxdna.ko.zst: kernel/drivers/gpu/drm/drm_shmem_helper.ko.zst\n"
		}, 0, "L12", Pass, "DKMS (modules.dep"},
		{"kernel 6.14 in-tree", func(s *scenario) {
			s.linux.uname.Release = "6.14.0-15-generic"
			s.fs.files["/lib/modules/6.14.0-15-generic/modules.dep"] = "kernel/drivers/accel/amdxdna/amdxdna.ko.zst:\n"
		}, 0, "L3", Fail, "wants 6.17+"},
		{"kernel unparsable", func(s *scenario) { s.linux.uname.Release = "custom" }, 0, "L3", Warn, "cannot parse"},
		{"memlock soft low, hard ok", func(s *scenario) { s.linux.memlock = Rlimit{Cur: 8 << 20, Max: Unlimited} },
			0, "L13", Pass, "raises the soft limit itself"},
		{"memlock soft low, hard finite", func(s *scenario) { s.linux.memlock = Rlimit{Cur: 8 << 20, Max: 4 << 30} },
			0, "L13", Warn, "`flm validate` reports"},
		{"memlock soft ok, hard finite", func(s *scenario) { s.linux.memlock = Rlimit{Cur: 128 << 20, Max: 4 << 30} },
			2 << 30, "L13", Pass, "raises the soft limit itself"},
		{"memlock for a model", func(s *scenario) { s.linux.memlock = Rlimit{Cur: 2 << 30, Max: 2 << 30} },
			2 << 30, "L13", Fail, "hard 2048 MiB"},
		{"memlock enough for model", func(s *scenario) { s.linux.memlock = Rlimit{Cur: 3 << 30, Max: 3 << 30} },
			2 << 30, "L13", Pass, "hard 3072 MiB"},
		{"xrt outside the search path", func(s *scenario) {
			s.fs.removeAll("/opt/xilinx")
			s.fs.files["/home/u/xrt/lib/libxrt_coreutil.so.2"] = ""
		}, 0, "L14", Fail, "not found"},
		{"xrt found through ld.so.cache", func(s *scenario) {
			s.fs.removeAll("/opt/xilinx")
			s.fs.files["/etc/ld.so.cache"] = string(buildLDCache(false, [][2]string{{"libxrt_coreutil.so.2", "/srv/xrt/lib64/libxrt_coreutil.so.2"}}))
			for _, f := range []string{"libxrt_coreutil.so.2", "libxrt_core.so.2", "libxrt_driver_xdna.so.2"} {
				s.fs.files["/srv/xrt/lib64/"+f] = ""
			}
		}, 0, "L14", Pass, "at /srv/xrt/lib64/libxrt_coreutil.so.2"},
		{"xrt does not load", func(s *scenario) {
			s.xrt.load = xrt.Result{LoadError: "libboost_filesystem.so.1.83.0: cannot open shared object file"}
		},
			0, "L14", Fail, "does not load: libboost"},
		{"xrt crashes on open", func(s *scenario) { s.xrt.err = Errno("EIO") }, 0, "L16", Fail, "crashed or hung"},
		{"no xrt probe", func(s *scenario) { s.xrt = nil }, 0, "L16", Skipped, "XRT probe not run"},
		{"libxrt_core missing", func(s *scenario) { delete(s.fs.files, "/opt/xilinx/xrt/lib/libxrt_core.so.2") },
			0, "L15", Fail, "libxrt_core.so.2 is missing"},
		{"vm", func(s *scenario) { s.fs.files["/proc/cpuinfo"] = "flags\t\t: fpu sse2 hypervisor\n" }, 0, "L7", Fail, "virtual machine"},
		{"protocol mismatch in log", func(s *scenario) {
			s.linux.kmsg = append(s.linux.kmsg, "amdxdna 0000:c4:00.1: aie2_check_protocol: Incompatible firmware protocol major 7 minor 3")
		}, 0, "L17", Warn, "newer than this driver understands"},
		{"cmd timeout in log", func(s *scenario) {
			s.linux.kmsg = append(s.linux.kmsg, "amdxdna 0000:c4:00.1: aie2_set_cmd_timeout: ctx 3 timed out")
		}, 0, "L17", Warn, "ERT_CMD_STATE_TIMEOUT"},
		{"kernel log unreadable", func(s *scenario) { s.linux.kmsgErr = Errno("EPERM") }, 0, "L17", Skipped, "needs root"},
		{"timeout raised", func(s *scenario) { s.fs.files["/sys/module/amdxdna/parameters/timeout_in_sec"] = "20\n" }, 0, "L18", Pass, "timeout_in_sec=20"},
		{"timeout off", func(s *scenario) { s.fs.files["/sys/module/amdxdna/parameters/timeout_in_sec"] = "0\n" }, 0, "L18", Pass, "no command timeout"},
		{"no timeout parameter", func(s *scenario) {
			delete(s.fs.files, "/sys/module/amdxdna/parameters/timeout_in_sec")
			s.fs.dirs["/sys/module/amdxdna"] = true
		},
			0, "L18", Pass, "no timeout_in_sec parameter"},
		{"aie4", func(s *scenario) { s.fs.files[dev+"device"] = "0x17f2\n"; s.fs.files[dev+"revision"] = "0x10\n" },
			0, "L1", Warn, "newer NPU generation"},
		{"xdna1 and xdna2 both", func(s *scenario) {
			o := "/sys/bus/pci/devices/0000:c5:00.1/"
			s.fs.files[o+"vendor"], s.fs.files[o+"device"], s.fs.files[o+"revision"] = "0x1022\n", "0x1502\n", "0x00\n"
		}, 0, "L1", Pass, "at 0000:c4:00.1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := strixHalo()
			l := *s.linux
			s.linux = &l
			x := *s.xrt
			s.xrt = &x
			tt.change(&s)
			opts := Options{GOOS: "linux", FS: s.fs, Linux: s.linux, ModelBytes: tt.modelBytes}
			if s.xrt != nil {
				opts.XRT = s.xrt
			}
			r, err := Run(context.Background(), opts)
			if err != nil {
				t.Fatal(err)
			}
			c := r.Check(tt.id)
			if c == nil {
				t.Fatalf("no check %s", tt.id)
			}
			if c.Status != tt.status || !strings.Contains(c.Found, tt.found) {
				t.Errorf("%s = %s %q, want %s containing %q", tt.id, c.Status, c.Found, tt.status, tt.found)
			}
			if (c.Status == Fail) && c.Fix == "" {
				t.Errorf("%s fails without a fix", tt.id)
			}
			if r.Ready == (r.count(Fail) > 0) && tt.status == Fail {
				t.Errorf("ready %v with a failing check", r.Ready)
			}
			if s.linux.openCount != 0 {
				t.Errorf("device left open")
			}
		})
	}
}

func TestXILINXXRT(t *testing.T) {
	s := strixHalo()
	s.fs.removeAll("/opt/xilinx")
	for _, f := range []string{"libxrt_coreutil.so.2", "libxrt_core.so.2", "libxrt_driver_xdna.so.2.21.0"} {
		s.fs.files["/home/u/xrt/lib/"+f] = ""
	}
	r, err := Run(context.Background(), Options{GOOS: "linux", FS: s.fs, Linux: s.linux, XRT: s.xrt,
		Getenv: func(k string) string { return map[string]string{"XILINX_XRT": "/home/u/xrt"}[k] }})
	if err != nil {
		t.Fatal(err)
	}
	if !r.Ready || !strings.Contains(r.Check("L14").Found, "/home/u/xrt/lib/libxrt_coreutil.so.2") {
		t.Errorf("XILINX_XRT not used: %s; %+v", r.Summary, r.Check("L14"))
	}
}

func TestWindowsBranches(t *testing.T) {
	base := WinDevice{
		HardwareIDs: []string{`PCI\VEN_1022&DEV_17F0&REV_10`}, ClassGUID: classComputeAccelerator, Class: "ComputeAccelerator",
		Description: "NPU Compute Accelerator Device", Status: dnStarted, DriverVersion: "32.0.203.311",
	}
	ok := &fakeXRT{load: xrt.Result{Loaded: true, Version: "2.19.0"}, open: xrt.Result{Loaded: true, DeviceTried: true, DeviceOpened: true}}
	tests := []struct {
		name   string
		change func(d *WinDevice)
		prober xrt.Prober
		id     string
		status Status
		found  string
	}{
		{"ready", func(d *WinDevice) {}, ok, "W5", Pass, "opened and closed device 0"},
		{"problem 43", func(d *WinDevice) { d.Status |= dnHasProblem; d.Problem = 43 }, ok, "W3", Fail, "problem code 43 (the driver reported a failure)"},
		{"disabled", func(d *WinDevice) { d.Status = dnHasProblem; d.Problem = 22 }, ok, "W3", Fail, "disabled"},
		{"not started", func(d *WinDevice) { d.Status = 0 }, ok, "W3", Fail, "not started"},
		{"no driver", func(d *WinDevice) { d.ClassGUID, d.Class, d.DriverVersion = "", "", "" }, ok, "W2", Fail, "no driver installed"},
		{"no version", func(d *WinDevice) { d.DriverVersion, d.DriverVersionError = "", "registry: access denied" }, ok, "W4", Fail, "access denied"},
		{"xdna1", func(d *WinDevice) { d.HardwareIDs = []string{`PCI\VEN_1022&DEV_1502&REV_00`} }, ok, "W1", Fail, "XDNA 1 is not supported"},
		{"no probe", func(d *WinDevice) {}, nil, "W5", Skipped, "not run"},
		{"open fails", func(d *WinDevice) {}, &fakeXRT{load: ok.load, open: xrt.Result{Loaded: true, DeviceTried: true, DeviceError: "xrtDeviceOpen(0) returned NULL"}},
			"W5", Fail, "cannot open device 0"},
		{"device not started: no open", func(d *WinDevice) { d.Status = 0 }, ok, "W5", Pass, "device not opened"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := base
			d.HardwareIDs = append([]string(nil), base.HardwareIDs...)
			tt.change(&d)
			r, err := Run(context.Background(), Options{GOOS: "windows", Windows: fakeWindows{devices: []WinDevice{d}}, XRT: tt.prober})
			if err != nil {
				t.Fatal(err)
			}
			c := r.Check(tt.id)
			if c.Status != tt.status || !strings.Contains(c.Found, tt.found) {
				t.Errorf("%s = %s %q, want %s containing %q", tt.id, c.Status, c.Found, tt.status, tt.found)
			}
		})
	}
}

func TestUnsupportedOS(t *testing.T) {
	r, err := Run(context.Background(), Options{GOOS: "darwin", FS: newMemFS()})
	if err != nil {
		t.Fatal(err)
	}
	if r.Ready || len(r.Checks) != 1 || r.Checks[0].Status != Fail {
		t.Errorf("darwin: %+v", r)
	}
}
