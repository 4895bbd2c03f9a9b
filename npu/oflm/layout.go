package oflm

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/npuchat/npuchat/jsonedit"
	"github.com/npuchat/npuchat/models/flm"
	modeloflm "github.com/npuchat/npuchat/models/oflm"
)

// The model this route serves, as NPU Chat registers it.
const (
	// Tag is the registry tag, models["minicpm5"]["2b"].
	Tag = "minicpm5:2b"
	// Folder is the model's folder under models/, and the registry's
	// "name": oflm looks for kernels under xclbins/<name>/, where its
	// packages install MiniCPM5's open kernel set (prebuilts/manifest.json
	// @5207940).
	Folder = "MiniCPM5-2B-NPU2"
	// Family is details.family: the llama3 engine runs the open kernels.
	Family = "llama3"
)

// Layout is where oflm keeps its files for NPU Chat.
type Layout struct {
	// Root is the parent of models/: what OFLM_MODEL_PATH names.
	Root string
	// Registry is the user model_list.json NPU Chat writes, passed to
	// oflm serve as OFLM_CONFIG_PATH.
	Registry string
	// Exe is the oflm executable (its packaged kernel sets are found from
	// it); may be "".
	Exe string
}

// NewLayout finds oflm's folder: $OFLM_MODEL_PATH (the parent of
// models/, research/oflm.md §2), else ~/.config/oflm on Linux or
// %USERPROFILE%\.oflm on Windows. The registry is <root>/model_list.json,
// where oflm-add writes its user registry. home is the user's home folder
// (%USERPROFILE% on Windows).
func NewLayout(goos string, getenv func(string) string, home, exe string) (Layout, error) {
	root := ""
	if getenv != nil {
		root = getenv("OFLM_MODEL_PATH")
	}
	if root == "" {
		if home == "" {
			return Layout{}, errors.New("oflm's folder: no home folder and no OFLM_MODEL_PATH")
		}
		if goos == "windows" {
			root = joinOS(goos, home, ".oflm")
		} else {
			root = joinOS(goos, home, ".config", "oflm")
		}
	}
	return Layout{Root: root, Registry: joinOS(goos, root, "model_list.json"), Exe: exe}, nil
}

// ModelDir is the folder of a model under models/.
func (l Layout) ModelDir(folder string) string { return filepath.Join(l.Root, "models", folder) }

// Manifest is what NPU Chat reads of an open kernel set's manifest.json
// (src/xclbins/MiniCPM5-2B-NPU2/open_kernels/manifest.json @5207940).
type Manifest struct {
	Family   string `json:"family"`
	SpecHash string `json:"spec_hash"`
	// MaxCtxDefault is the context the set was built and tested for.
	MaxCtxDefault int `json:"max_ctx_default"`
	// Contexts name the xclbin files, Kernels their instruction files,
	// relative to the set's folder.
	Contexts map[string]string `json:"contexts"`
	Kernels  map[string]struct {
		Insts string `json:"insts"`
	} `json:"kernels"`
	// GGUF, when present, is the nested manifest of the set's GGUF
	// route; its files count too.
	GGUF *Manifest `json:"gguf"`
}

// Files lists the files the manifest names, relative to its folder, as
// oflm's Manifest::files does: every context, every kernel's insts, and
// the nested GGUF manifest's (manifest.cpp @105d644).
func (m *Manifest) Files() []string {
	var out []string
	for _, f := range m.Contexts {
		out = append(out, f)
	}
	for _, k := range m.Kernels {
		if k.Insts != "" {
			out = append(out, k.Insts)
		}
	}
	if m.GGUF != nil {
		out = append(out, m.GGUF.Files()...)
	}
	return out
}

// KernelSet is an open kernel set: a folder with a manifest.json whose
// every named file exists.
type KernelSet struct {
	Dir string
	// Root is the xclbin root it was found under (what OFLM_XCLBIN_PATH
	// names), "" when it is the model folder's own.
	Root     string
	Manifest Manifest
}

// ReadKernelSet reads the set in dir. It counts only if manifest.json
// exists, has the shape oflm's Manifest::parse requires (checkManifest),
// and every file it names exists inside dir (engine.cpp's find_kernels);
// a name that leaves the folder is refused.
func ReadKernelSet(dir string) (*KernelSet, error) {
	b, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err != nil {
		return nil, fmt.Errorf("open kernel set %s: %w", dir, err)
	}
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("open kernel set %s: manifest.json: %w", dir, err)
	}
	if err := checkManifest(b); err != nil {
		return nil, fmt.Errorf("open kernel set %s: manifest.json: %w", dir, err)
	}
	files := m.Files()
	if len(files) == 0 {
		return nil, fmt.Errorf("open kernel set %s: manifest.json names no kernel files", dir)
	}
	for _, f := range files {
		if !filepath.IsLocal(filepath.FromSlash(f)) {
			return nil, fmt.Errorf("open kernel set %s: manifest.json names %q, outside its folder", dir, f)
		}
		if _, err := os.Stat(filepath.Join(dir, filepath.FromSlash(f))); err != nil {
			return nil, fmt.Errorf("open kernel set %s: %s is missing", dir, f)
		}
	}
	return &KernelSet{Dir: dir, Manifest: m}, nil
}

// kernelPlace is one place a kernel set may be.
type kernelPlace struct{ dir, root string }

// kernelPlaces lists where oflm looks for the open kernel set of the model
// in modelDir named folder: a set the person named ($OFLM_OPEN_KERNELS_DIR,
// else the pre-rename $FLM_OPEN_KERNELS_DIR: oflm's find_kernels looks
// there before anything else), then the packaged set: <exe>/../share/oflm
// (Linux packages; the exe's own folder on Windows; <exe> with its links
// resolved, as oflm sees itself), the model folder's
// open_kernels, then the xclbin roots ($OFLM_XCLBIN_PATH without a trailing
// xclbins, the oflm folder, the exe's folder).
func (l Layout) kernelPlaces(getenv func(string) string, modelDir, folder string) []kernelPlace {
	under := func(root string) kernelPlace {
		return kernelPlace{dir: filepath.Join(root, "xclbins", folder, "open_kernels"), root: root}
	}
	var out []kernelPlace
	if getenv != nil {
		for _, name := range []string{"OFLM_OPEN_KERNELS_DIR", "FLM_OPEN_KERNELS_DIR"} {
			if x := getenv(name); x != "" {
				out = append(out, kernelPlace{dir: x})
				break
			}
		}
	}
	exeDir := ""
	if l.Exe != "" {
		// oflm finds its packaged sets from its own resolved path
		// (readlink /proc/self/exe: utils.cpp get_executable_directory),
		// so a /usr/bin/oflm that links into /opt/openflowlm/bin finds
		// /opt/openflowlm/share/oflm, not /usr/share/oflm.
		exe := l.Exe
		if r, err := filepath.EvalSymlinks(exe); err == nil {
			exe = r
		}
		exeDir = filepath.Dir(exe)
		out = append(out, under(filepath.Join(exeDir, "..", "share", "oflm")), under(exeDir))
	}
	out = append(out, kernelPlace{dir: filepath.Join(modelDir, "open_kernels")})
	if getenv != nil {
		if x := getenv("OFLM_XCLBIN_PATH"); x != "" {
			x = filepath.Clean(x)
			if filepath.Base(x) == "xclbins" {
				x = filepath.Dir(x)
			}
			out = append(out, under(x))
		}
	}
	out = append(out, under(l.Root))
	seen := map[string]bool{}
	uniq := out[:0]
	for _, p := range out {
		p.dir = filepath.Clean(p.dir)
		if !seen[p.dir] {
			seen[p.dir] = true
			uniq = append(uniq, p)
		}
	}
	return uniq
}

// FindKernels returns the first usable open kernel set for the model in
// modelDir (see kernelPlaces for the order). The error says where it
// looked and why each place did not count.
func (l Layout) FindKernels(getenv func(string) string, modelDir, folder string) (*KernelSet, error) {
	var why []string
	for _, p := range l.kernelPlaces(getenv, modelDir, folder) {
		ks, err := ReadKernelSet(p.dir)
		if err == nil {
			if p.root != "" {
				ks.Root = filepath.Clean(p.root)
			}
			return ks, nil
		}
		if errors.Is(err, os.ErrNotExist) && !strings.Contains(err.Error(), "is missing") {
			why = append(why, p.dir+" (none)")
		} else {
			why = append(why, err.Error())
		}
	}
	return nil, fmt.Errorf("no open kernel set for %s: %s. oflm's packages install it; a source build makes it with open_kernels/export_qwen36_kernels.py --spec open_kernels/recipes/specs/minicpm5-2b.json",
		folder, strings.Join(why, "; "))
}

// requiredFiles are what oflm-add requires in a model folder, and
// optionalFiles what it registers when present (oflm_add/__init__.py
// @f3b9cda).
var (
	requiredFiles = []string{"config.json", "model.q4nx", "tokenizer.json", "tokenizer_config.json"}
	optionalFiles = []string{"chat_template.jinja"}
)

// Registration is what Register writes for a prepared model folder.
type Registration struct {
	// Tag is the registry tag (default Tag); Folder the folder under
	// models/ (default Folder).
	Tag, Folder string
	// Kernels is the open kernel set that will serve it: its manifest
	// gives the context and the config check.
	Kernels *KernelSet
	// OFLMVersion, when known, is written as oflm_min_version.
	OFLMVersion string
	// ParameterSize ("2B") and Quantization ("Q4_1") go to details.
	ParameterSize, Quantization string
}

// Registered is the entry Register wrote.
type Registered struct {
	Tag, Folder, Dir string
	Files            []string
	Size             int64
	ContextLength    int
	MaxPrefill       int
}

// Register adds the model prepared in the layout's models/<Folder> to the
// user registry (Layout.Registry): models[family][size] gets name, files,
// size, default_context_length (the kernel set's max_ctx_default) and
// max_prefill_len, with details.family llama3, written over an existing
// entry key by key; every other entry and key of the file is kept. The
// file is written atomically (a .bak keeps what was there before NPU
// Chat's first change). The folder must hold oflm's required files, a
// conversion's manifest (models/oflm.ManifestFile) there must verify,
// and it must pass models/oflm.CheckPack against the kernel set's
// manifest.json.
func (l Layout) Register(r Registration) (*Registered, error) {
	if r.Tag == "" {
		r.Tag = Tag
	}
	if r.Folder == "" {
		r.Folder = Folder
	}
	family, size, ok := strings.Cut(r.Tag, ":")
	if !ok || family == "" || size == "" {
		return nil, fmt.Errorf("register %q: a tag is family:size", r.Tag)
	}
	if !filepath.IsLocal(r.Folder) || strings.ContainsAny(r.Folder, `/\`) {
		return nil, fmt.Errorf("register %s: folder %q is not a plain folder name", r.Tag, r.Folder)
	}
	if r.Kernels == nil {
		return nil, fmt.Errorf("register %s: no open kernel set", r.Tag)
	}
	dir := l.ModelDir(r.Folder)
	reg := &Registered{Tag: r.Tag, Folder: r.Folder, Dir: dir}
	for _, f := range append(append([]string(nil), requiredFiles...), optionalFiles...) {
		fi, err := os.Stat(filepath.Join(dir, f))
		if err != nil {
			if contains(requiredFiles, f) {
				return nil, fmt.Errorf("register %s: %s is not prepared: %s is missing", r.Tag, dir, f)
			}
			continue
		}
		reg.Files = append(reg.Files, f)
		reg.Size += fi.Size()
	}
	// A folder models/oflm converted carries the conversion's manifest,
	// which must still verify: a file changed or cut short since would
	// fail in oflm or compute garbage. (This reads every file once.) A
	// pack prepared another way has no such manifest.
	if _, err := os.Stat(filepath.Join(dir, modeloflm.ManifestFile)); err == nil {
		if _, err := modeloflm.Verify(dir); err != nil {
			return nil, fmt.Errorf("register %s: the weights in %s are damaged or unfinished; prepare the weights again: %w", r.Tag, dir, err)
		}
	}
	// The one check of a pack against a kernel set, the one the
	// conversion makes (models/oflm): config.json as oflm's
	// Manifest::check_model holds it, and model.q4nx against the set's
	// packing plan when its manifest has one.
	ms, err := modeloflm.CheckPack(dir, filepath.Join(r.Kernels.Dir, "manifest.json"))
	if err != nil {
		return nil, fmt.Errorf("register %s: %w", r.Tag, err)
	}
	if len(ms) > 0 {
		return nil, fmt.Errorf("register %s: %s does not fit the open kernel set %s: %s", r.Tag, dir, r.Kernels.Dir, modeloflm.Describe(ms))
	}
	if err := checkTokenizerConfig(filepath.Join(dir, "tokenizer_config.json")); err != nil {
		return nil, fmt.Errorf("register %s: %w", r.Tag, err)
	}
	// oflm locks size + 512 MB; oflm-add takes size from the tag's
	// "2b" (2e9 bytes), which covers the ~2.4 GB MiniCPM5 locks. The
	// larger of that and the files' sum is kept.
	if n := sizeFromTag(size); n > reg.Size {
		reg.Size = n
	}
	reg.ContextLength = r.Kernels.Manifest.MaxCtxDefault
	if reg.ContextLength <= 0 {
		return nil, fmt.Errorf("register %s: the kernel set's manifest.json has no max_ctx_default", r.Tag)
	}
	reg.MaxPrefill = min(4096, reg.ContextLength) // oflm-add's default, within the context

	details := map[string]any{"format": "NPU2", "family": Family}
	if r.ParameterSize != "" {
		details["parameter_size"] = r.ParameterSize
	}
	if r.Quantization != "" {
		details["quantization_level"] = r.Quantization
	}
	value := map[string]any{
		"name": r.Folder, "url": "", "file_url": "", "ms_url": "",
		"files": reg.Files, "size": reg.Size, "vlm": false,
		"default_context_length": reg.ContextLength, "max_prefill_len": reg.MaxPrefill,
		"details": details,
	}
	if r.OFLMVersion != "" {
		value["oflm_min_version"] = r.OFLMVersion
	}
	raw, err := jsonedit.Marshal(value)
	if err != nil {
		return nil, fmt.Errorf("register %s: %w", r.Tag, err)
	}
	if err := os.MkdirAll(filepath.Dir(l.Registry), 0o755); err != nil {
		return nil, fmt.Errorf("register %s: %w", r.Tag, err)
	}
	if _, err := os.Stat(l.Registry); errors.Is(err, os.ErrNotExist) {
		if _, err := flm.WriteIfChanged(l.Registry, []byte(flm.EmptyList+"\n")); err != nil {
			return nil, fmt.Errorf("register %s: %w", r.Tag, err)
		}
	}
	if _, err := flm.EditJSONFile(l.Registry, func(o *jsonedit.Object) error {
		return flm.SetEntries(o, []flm.Entry{{Family: family, Tag: size, Value: raw}})
	}); err != nil {
		return nil, fmt.Errorf("register %s: %w", r.Tag, err)
	}
	return reg, nil
}

// checkTokenizerConfig checks what oflm's AutoModel exits on
// (automodel.cpp @0541f3c): eos_token a string, eos_token_id an array.
func checkTokenizerConfig(path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var tc struct {
		EOSToken   json.RawMessage `json:"eos_token"`
		EOSTokenID json.RawMessage `json:"eos_token_id"`
	}
	if err := json.Unmarshal(b, &tc); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	var s string
	if json.Unmarshal(tc.EOSToken, &s) != nil || s == "" {
		return fmt.Errorf("%s: eos_token must be a string (oflm exits otherwise)", path)
	}
	var ids []int
	if json.Unmarshal(tc.EOSTokenID, &ids) != nil || len(ids) == 0 {
		return fmt.Errorf("%s: eos_token_id must be a list of ids, e.g. [1, 130073] (oflm exits otherwise)", path)
	}
	return nil
}

// sizeFromTag is oflm-add's size_from_tag: "2b" is 2e9 bytes, 0 when the
// tag has no such marker.
func sizeFromTag(size string) int64 {
	s := strings.ToLower(size)
	i := strings.IndexByte(s, 'b')
	if i <= 0 {
		return 0
	}
	var f float64
	if _, err := fmt.Sscanf(s[:i], "%g", &f); err != nil || f <= 0 {
		return 0
	}
	return int64(f * 1e9)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// ServeEnv is the environment `oflm serve` runs with for a model served
// with kernels: both spellings of each variable (older oflm builds read
// only FLM_*, newer ones OFLM_* first; research/oflm.md §2), the open
// engine forced (OFLM_LLAMA_ENGINE=open, so that a missing kernel set
// fails loudly rather than falling back to the closed library), the
// kernel set named (OFLM_OPEN_KERNELS_DIR, and FLM_OPEN_KERNELS_DIR for
// builds from before the rename, whose engine.cpp reads only that), and
// the update check off.
func (l Layout) ServeEnv(kernels *KernelSet) []string {
	env := []string{
		"OFLM_MODEL_PATH=" + l.Root, "FLM_MODEL_PATH=" + l.Root,
		"OFLM_CONFIG_PATH=" + l.Registry, "FLM_CONFIG_PATH=" + l.Registry,
		"OFLM_LLAMA_ENGINE=open",
		"OFLM_DISABLE_UPDATE_CHECK=1", "FLM_DISABLE_UPDATE_CHECK=1",
	}
	if kernels != nil {
		// Newer oflm reads OFLM_OPEN_KERNELS_DIR with no fallback; builds
		// from before the rename read FLM_OPEN_KERNELS_DIR (engine.cpp
		// find_kernels: AG @f3b9cda, Cyronius @4465c53).
		env = append(env, "OFLM_OPEN_KERNELS_DIR="+kernels.Dir, "FLM_OPEN_KERNELS_DIR="+kernels.Dir)
		if kernels.Root != "" {
			env = append(env, "OFLM_XCLBIN_PATH="+kernels.Root, "FLM_XCLBIN_PATH="+kernels.Root)
		}
	}
	return env
}
