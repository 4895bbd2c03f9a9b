// Package flm knows FastFlowLM's folders and files: where the flm
// executable, its models, its xclbin kernels and the model_list.json it
// reads are on Linux and Windows (following FastFlowLM's own resolution
// order, src/common/utils.cpp), which version it is, and how to edit
// model_list.json, tokenizer_config.json and config.json without losing
// anything NPU Chat does not set (key order and unknown keys are kept;
// writes go to a temporary file renamed into place, after a .bak copy).
package flm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/npuchat/npuchat/config"
	"github.com/npuchat/npuchat/jsonedit"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

// Layout is where FastFlowLM lives on this machine and where NPU Chat
// keeps what it adds for it.
type Layout struct {
	// Exe is the flm command to run ("" when FastFlowLM was not found);
	// in the portable tarball it is the wrapper script next to flm-real.
	Exe string
	// ExeDir is the folder of the real executable, which FastFlowLM
	// searches for model_list.json and xclbins.
	ExeDir string
	// Version is `flm version --json`'s version ("" when unknown).
	Version string
	// ModelsHome is $FLM_MODEL_PATH or the per-user default
	// (~/.config/flm, %USERPROFILE%\.flm); the list's "model_path" is
	// relative to it.
	ModelsHome string
	// ModelsDir is ModelsHome joined with the list's model_path: model
	// folders are ModelsDir/<name>. It is "" when the list's model_path
	// is refused (ModelsDirErr).
	ModelsDir string
	// ModelsDirErr says why the model list's model_path was refused
	// (absolute, or leading out of ModelsHome with ".."): no model
	// folder is used until it is fixed.
	ModelsDirErr error
	// XclbinRoot is the folder FastFlowLM takes kernels from by itself;
	// kernels are XclbinRoot/xclbins/<name>/ ("" when none was found).
	XclbinRoot string
	// SystemList is the model_list.json FastFlowLM reads by itself (""
	// when none was found).
	SystemList string
	// OwnList and OwnXclbinRoot are NPU Chat's own model list and kernel
	// root (under its data folder), used through ServeEnv.
	OwnList, OwnXclbinRoot string
	// Notes explains what was found where, for `npuchat models` and logs.
	Notes []string
	goos  string
}

// Found reports whether a FastFlowLM executable was found.
func (l *Layout) Found() bool { return l.Exe != "" }

// XclbinDir is the system kernel folder of a model ("" when unknown).
func (l *Layout) XclbinDir(name string) string {
	if l.XclbinRoot == "" {
		return ""
	}
	return l.join(l.XclbinRoot, "xclbins", name)
}

// OwnXclbinDir is NPU Chat's kernel folder of a model.
func (l *Layout) OwnXclbinDir(name string) string {
	return l.join(l.OwnXclbinRoot, "xclbins", name)
}

// ModelDir is the FastFlowLM model folder of a model, "" when the
// models folder is unknown (ModelsDirErr).
func (l *Layout) ModelDir(name string) string {
	if l.ModelsDir == "" {
		return ""
	}
	return l.join(l.ModelsDir, name)
}

// ServeEnv is the environment to start `flm serve` with so that it reads
// NPU Chat's model list and kernel root, and the models folder in use.
func (l *Layout) ServeEnv() []string {
	return []string{
		"FLM_CONFIG_PATH=" + l.OwnList,
		"FLM_XCLBIN_PATH=" + l.OwnXclbinRoot,
		"FLM_MODEL_PATH=" + l.ModelsHome,
		"FLM_DISABLE_UPDATE_CHECK=1",
	}
}

func (l *Layout) join(elem ...string) string { return config.JoinOS(l.goos, elem...) }

// Probe is what Discover looks at; every field can be faked in tests.
type Probe struct {
	GOOS   string
	Getenv func(string) string
	// Root is --flm-root: a folder holding flm (or bin/flm),
	// model_list.json and xclbins/; models go to Root/models. It
	// overrides every other source.
	Root string
	// DataDir is NPU Chat's data folder (config.DataDir).
	DataDir string
	// FLMModelPath, FLMConfigPath, FLMXclbinPath are the FLM_* variables
	// (from config).
	FLMModelPath, FLMConfigPath, FLMXclbinPath string
	// LookPath, EvalSymlinks and Stat default to the os/exec, filepath
	// and os ones.
	LookPath     func(string) (string, error)
	EvalSymlinks func(string) (string, error)
	Stat         func(string) (fs.FileInfo, error)
	// Run runs a command and returns its standard output; the default
	// uses os/exec. Discover gives it a 10 s deadline.
	Run func(ctx context.Context, name string, args ...string) ([]byte, error)
}

func (p *Probe) defaults() {
	if p.GOOS == "" {
		p.GOOS = "linux"
	}
	if p.Getenv == nil {
		p.Getenv = func(string) string { return "" }
	}
	if p.LookPath == nil {
		p.LookPath = exec.LookPath
	}
	if p.EvalSymlinks == nil {
		p.EvalSymlinks = filepath.EvalSymlinks
	}
	if p.Stat == nil {
		p.Stat = os.Stat
	}
	if p.Run == nil {
		p.Run = RunCommand
	}
}

// RunCommand runs name with args and returns its standard output, with
// FLM_DISABLE_UPDATE_CHECK=1 so that flm does not go online.
func RunCommand(ctx context.Context, name string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), "FLM_DISABLE_UPDATE_CHECK=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

// InstallHint tells a person at the command line how to get FastFlowLM
// (or point NPU Chat at a portable copy).
func InstallHint(goos string) string {
	if goos == "windows" {
		return GetHint(goos) + ", then run the install again"
	}
	return GetHint(goos) + ", or pass --flm-root DIR for a portable copy, then run the install again"
}

// GetHint tells a person how to get FastFlowLM, in words that hold no
// command line (for the page and the tray as much as the terminal).
func GetHint(goos string) string {
	if goos == "windows" {
		return "install FastFlowLM for Windows (flm-setup.exe from https://github.com/FastFlowLM/FastFlowLM/releases)"
	}
	return "install FastFlowLM (the fastflowlm .deb from https://github.com/FastFlowLM/FastFlowLM/releases, or Lemonade's FLM backend)"
}

// Discover finds FastFlowLM. Not finding it is not an error: the Layout
// then has no Exe and its Notes say where it looked.
func Discover(ctx context.Context, p Probe) *Layout {
	p.defaults()
	l := &Layout{goos: p.GOOS}
	j := l.join
	l.OwnList = j(p.DataDir, "flm", "model_list.json")
	l.OwnXclbinRoot = j(p.DataDir, "flm")
	exists := func(path string) bool { _, err := p.Stat(path); return err == nil }
	exeName := "flm"
	if p.GOOS == "windows" {
		exeName = "flm.exe"
	}

	// 1. The executable.
	if p.Root != "" {
		for _, c := range []string{j(p.Root, exeName), j(p.Root, "bin", exeName)} {
			if exists(c) {
				l.Exe = c
				break
			}
		}
		if l.Exe == "" {
			l.Notes = append(l.Notes, fmt.Sprintf("no %s in --flm-root %s", exeName, p.Root))
		}
	} else {
		l.Exe = findExe(p, l, exeName, exists)
	}
	if l.Exe != "" {
		real := l.Exe
		if r, err := p.EvalSymlinks(l.Exe); err == nil && p.GOOS != "windows" {
			real = r
		}
		l.ExeDir = parentOS(p.GOOS, real)
		// The portable tarball: flm is a wrapper, the binary is flm-real.
		if p.GOOS != "windows" && exists(j(l.ExeDir, "flm-real")) {
			l.Notes = append(l.Notes, "portable FastFlowLM: "+l.Exe+" wraps flm-real")
		}
		l.Notes = append(l.Notes, "flm: "+l.Exe)
	}

	// 2. The models folder.
	switch {
	case p.Root != "":
		l.ModelsHome = p.Root
	case p.FLMModelPath != "":
		l.ModelsHome = p.FLMModelPath
	case p.GOOS == "windows":
		home := p.Getenv("USERPROFILE")
		l.ModelsHome = j(home, ".flm")
	default:
		l.ModelsHome = j(p.Getenv("HOME"), ".config", "flm")
	}

	// 3. The model list FastFlowLM reads, in its order.
	var lists, roots []string
	if p.Root != "" {
		lists = []string{j(p.Root, "model_list.json"), j(p.Root, "share", "flm", "model_list.json")}
		roots = []string{p.Root, j(p.Root, "share", "flm")}
	} else {
		if p.FLMConfigPath != "" {
			lists = append(lists, p.FLMConfigPath)
		}
		if p.FLMXclbinPath != "" {
			roots = append(roots, stripXclbins(p.FLMXclbinPath))
		}
		if l.ExeDir != "" {
			lists = append(lists, j(l.ExeDir, "model_list.json"), j(parentOS(p.GOOS, l.ExeDir), "share", "flm", "model_list.json"))
			roots = append(roots, l.ExeDir, j(parentOS(p.GOOS, l.ExeDir), "share", "flm"))
		}
		if p.GOOS != "windows" {
			lists = append(lists, "/opt/fastflowlm/share/flm/model_list.json")
			roots = append(roots, "/opt/fastflowlm/share/flm")
		}
	}
	for _, c := range lists {
		if exists(c) {
			l.SystemList = c
			break
		}
	}
	for _, c := range roots {
		if exists(j(c, "xclbins")) {
			l.XclbinRoot = c
			break
		}
	}
	if l.SystemList == "" && l.Exe != "" {
		l.Notes = append(l.Notes, "FastFlowLM's model_list.json was not found (looked in "+strings.Join(lists, ", ")+")")
	}

	// 4. The version, and the models subfolder from the list.
	if l.Exe != "" {
		l.Version = flmVersion(ctx, p, l.Exe)
	}
	modelPath := "models"
	if l.SystemList != "" {
		if b, err := ReadList(l.SystemList); err != nil && !errors.Is(err, fs.ErrNotExist) {
			l.Notes = append(l.Notes, fmt.Sprintf("FastFlowLM's model list could not be read: %v", err))
		} else if err == nil {
			if o, err := jsonedit.ParseObject(b); err == nil {
				if modelPath, err = ModelPath(o); err != nil {
					l.ModelsDirErr = fmt.Errorf("FastFlowLM's model list %s: %w; NPU Chat refuses it and uses no FastFlowLM models folder until it is fixed (the default is \"models\")", l.SystemList, err)
					l.Notes = append(l.Notes, l.ModelsDirErr.Error())
					return l
				}
			}
		}
	}
	l.ModelsDir = j(l.ModelsHome, modelPath)
	return l
}

func findExe(p Probe, l *Layout, exeName string, exists func(string) bool) string {
	j := l.join
	if path, err := p.LookPath(exeName); err == nil {
		return path
	}
	var candidates []string
	if p.GOOS == "windows" {
		pf := p.Getenv("ProgramFiles")
		if pf == "" {
			pf = `C:\Program Files`
		}
		candidates = append(candidates, j(pf, "flm", exeName))
	} else {
		candidates = append(candidates, "/opt/fastflowlm/bin/flm")
	}
	var lemonade []string
	if c := p.Getenv("LEMONADE_CACHE_DIR"); c != "" {
		lemonade = append(lemonade, j(c, "bin", "flm", "npu"))
	}
	if p.GOOS == "windows" {
		if home := p.Getenv("USERPROFILE"); home != "" {
			lemonade = append(lemonade, j(home, ".cache", "lemonade", "bin", "flm", "npu"))
		}
	} else {
		if home := p.Getenv("HOME"); home != "" {
			lemonade = append(lemonade, j(home, ".cache", "lemonade", "bin", "flm", "npu"))
		}
		lemonade = append(lemonade, "/var/lib/lemonade/.cache/lemonade/bin/flm/npu", "/var/cache/lemonade/bin/flm/npu")
	}
	// Lemonade unpacks the release archive under npu/, sometimes one or
	// two folders deep; it searches recursively, so look a few levels.
	for _, dir := range lemonade {
		candidates = append(candidates, j(dir, exeName))
		for _, sub := range listDirs(dir, 2) {
			candidates = append(candidates, j(sub, exeName))
		}
	}
	for _, c := range candidates {
		if exists(c) {
			return c
		}
	}
	l.Notes = append(l.Notes, "FastFlowLM not found on PATH or in "+strings.Join(candidates, ", "))
	return ""
}

// listDirs returns the folders under dir up to depth levels, sorted.
func listDirs(dir string, depth int) []string {
	if depth == 0 {
		return nil
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range entries {
		if e.IsDir() {
			sub := filepath.Join(dir, e.Name())
			out = append(out, sub)
			out = append(out, listDirs(sub, depth-1)...)
		}
	}
	return out
}

var versionRe = regexp.MustCompile(`\d+\.\d+(\.\d+)?`)

// flmVersion runs `flm version --json` ({"version": "0.9.45"}), falling
// back to the first dotted number of its output.
func flmVersion(ctx context.Context, p Probe, exe string) string {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, err := p.Run(ctx, exe, "version", "--json")
	if err != nil && len(out) == 0 {
		return ""
	}
	return ParseVersion(out)
}

// ParseVersion reads the output of `flm version --json` or `flm version`.
func ParseVersion(out []byte) string {
	var v struct {
		Version string `json:"version"`
	}
	if i := bytes.IndexByte(out, '{'); i >= 0 {
		if json.Unmarshal(out[i:], &v) == nil && v.Version != "" {
			return strings.TrimPrefix(v.Version, "v")
		}
	}
	return versionRe.FindString(string(out))
}

// stripXclbins removes a trailing "xclbins" folder, as FastFlowLM does
// with FLM_XCLBIN_PATH.
func stripXclbins(p string) string {
	t := strings.TrimRight(p, `/\`)
	if base := t[strings.LastIndexAny(t, `/\`)+1:]; base == "xclbins" {
		return strings.TrimRight(t[:len(t)-len(base)], `/\`)
	}
	return p
}

// parentOS is the folder of a path with goos's separator.
func parentOS(goos, p string) string {
	if goos != "windows" {
		return filepath.Dir(p)
	}
	p = strings.TrimRight(p, `\`)
	i := strings.LastIndex(p, `\`)
	if i < 0 {
		return "."
	}
	if i == 2 && p[1] == ':' {
		return p[:3]
	}
	return p[:i]
}

// ErrNoFLM means FastFlowLM was not found.
var ErrNoFLM = errors.New("FastFlowLM (flm) was not found")
