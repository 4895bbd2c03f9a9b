package engine

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
)

// physicalCores is the number of CPU cores, not counting SMT siblings
// (hyper-threads): matrix products are bound by the cores' arithmetic
// units, which two threads of one core share, so the default thread
// count is one per core. On Linux it counts distinct (package, core)
// pairs in /sys/devices/system/cpu, limited to the CPUs this process
// may use; elsewhere, or when that cannot be read, runtime.NumCPU().
func physicalCores() int {
	n := runtime.NumCPU()
	if runtime.GOOS != "linux" {
		return n
	}
	cpus, _ := filepath.Glob("/sys/devices/system/cpu/cpu[0-9]*/topology/core_id")
	cores := map[string]bool{}
	for _, p := range cpus {
		core, err1 := os.ReadFile(p)
		pkg, err2 := os.ReadFile(filepath.Join(filepath.Dir(p), "physical_package_id"))
		if err1 != nil || err2 != nil {
			return n
		}
		cores[strings.TrimSpace(string(pkg))+"/"+strings.TrimSpace(string(core))] = true
	}
	if len(cores) == 0 {
		return n
	}
	// threads per core as the system lists them, applied to the CPUs
	// this process may run on (an affinity mask or container limit)
	perCore := max(1, (len(cpus)+len(cores)-1)/len(cores))
	return max(1, min(len(cores), n/perCore))
}
