package app

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"

	"github.com/npuchat/npuchat/enginekind"
	"github.com/npuchat/npuchat/models"
)

// besideHeadroom is the memory kept free above a model's weights when a
// second backend loads beside the first: the KV cache, the engine's
// buffers, and the rest of the desktop.
const besideHeadroom = 1 << 30

// beside is service.Options.Beside: the CPU engine may load beside
// FastFlowLM (for a request FastFlowLM cannot do) when the memory free
// now holds its weights and a headroom. Where free memory cannot be read
// (neither Linux nor Windows), it is allowed, and the engine's own load
// errors say the rest.
func (a *App) beside(model string, kind enginekind.Kind) error {
	if kind != enginekind.CPU {
		return nil
	}
	need := int64(besideHeadroom)
	if inst, err := models.Locate(a.cfg, model); err == nil {
		need += weightBytes(inst.Dir, inst.Weights)
	}
	avail, err := a.memAvailable()
	if err != nil {
		a.log.Debug("free memory unknown; loading the CPU engine beside FastFlowLM", "err", err)
		return nil
	}
	if avail < need {
		return fmt.Errorf("it needs about %s of memory and %s is free", gigabytes(need), gigabytes(avail))
	}
	return nil
}

// memAvailable is the memory free for a new program now, in bytes.
func (a *App) memAvailable() (int64, error) {
	if a.opts.MemAvailable != nil {
		return a.opts.MemAvailable()
	}
	switch runtime.GOOS {
	case "linux":
	case "windows":
		return windowsMemAvailable()
	default:
		return 0, errors.New("free memory is read on Linux and Windows only")
	}
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0, err
	}
	return parseMemAvailable(b)
}

// parseMemAvailable reads MemAvailable from /proc/meminfo's text.
func parseMemAvailable(meminfo []byte) (int64, error) {
	sc := bufio.NewScanner(bytes.NewReader(meminfo))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) >= 2 && f[0] == "MemAvailable:" {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				return 0, fmt.Errorf("/proc/meminfo: MemAvailable %q: %w", f[1], err)
			}
			return kb << 10, nil
		}
	}
	return 0, errors.New("/proc/meminfo has no MemAvailable")
}

// weightBytes is the size of a model's weight files (in dir).
func weightBytes(dir string, files []string) int64 {
	var n int64
	for _, f := range files {
		if fi, err := os.Stat(filepath.Join(dir, f)); err == nil {
			n += fi.Size()
		}
	}
	return n
}

// gigabytes writes n bytes for a person ("2.1 GB").
func gigabytes(n int64) string { return fmt.Sprintf("%.1f GB", float64(n)/1e9) }
