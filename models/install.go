package models

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"github.com/npuchat/npuchat/jsonedit"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/npuchat/npuchat/config"
	"github.com/npuchat/npuchat/models/catalog"
	"github.com/npuchat/npuchat/models/flm"
	"github.com/npuchat/npuchat/models/hub"
)

// Sources of a model.
const (
	SourceNPU      = "npu"      // the FastFlowLM port (model.q4nx, xclbins)
	SourceOriginal = "original" // the original Hugging Face safetensors
)

// Targets of an install.
const (
	TargetFLM     = "flm"
	TargetNPUChat = "npuchat"
)

// Event is one progress report of an install, for the CLI, tray and web.
type Event struct {
	Model   string
	Phase   string // "list", "download", "install", "register", "verify", "remove", "note"
	Message string
	// File is set during downloads.
	File *hub.Progress
	// Plan is set once, before the first download: what the install is
	// about to download, so that progress can be shown for all of it.
	Plan *Plan
	// Kept, on the list event, is what earlier, interrupted runs left in
	// the staging folder (bytes), known before the hub answers: a run
	// that fails before its plan still knows it has something to resume.
	Kept int64
}

// Plan is what an install downloads: the files, with their sizes and
// the bytes of each already downloaded by an earlier, interrupted run.
type Plan struct {
	Files []PlannedFile
}

// PlannedFile is one file of a Plan.
type PlannedFile struct {
	Path       string
	Size, Have int64
}

// Bytes are the sizes of all the plan's files, and what of them is
// already downloaded.
func (p *Plan) Bytes() (size, have int64) {
	for _, f := range p.Files {
		size, have = size+f.Size, have+f.Have
	}
	return size, have
}

// Installer installs, verifies and removes catalog models.
type Installer struct {
	Catalog *catalog.Catalog
	Config  *config.Config
	// Probe is how FastFlowLM is discovered (ProbeFor builds the real one).
	Probe flm.Probe
	Hub   *hub.Client
	// Free is the disk-space check; nil is the real one.
	Free hub.DiskFree
	// Progress receives events; may be nil.
	Progress func(Event)
	// Now is the clock; nil is time.Now.
	Now func() time.Time

	layout *flm.Layout
}

// Options are the caller's choices for NewInstaller.
type Options struct {
	// FLMRoot overrides FastFlowLM discovery (--flm-root; else the
	// flm_root setting).
	FLMRoot string
	// Getenv reads the environment for discovery (HOME, USERPROFILE,
	// PATH lookups, LEMONADE_CACHE_DIR, ProgramFiles).
	Getenv func(string) string
	GOOS   string
}

// ProbeFor builds the FastFlowLM probe for a configuration.
func ProbeFor(cfg *config.Config, opt Options) flm.Probe {
	root := opt.FLMRoot
	if root == "" {
		root = cfg.FLMRoot
	}
	goos := opt.GOOS
	if goos == "" {
		goos = runtime.GOOS
	}
	return flm.Probe{
		GOOS: goos, Getenv: opt.Getenv, Root: root, DataDir: cfg.DataDir,
		FLMModelPath: cfg.FLMModelPath, FLMConfigPath: cfg.FLMConfigPath, FLMXclbinPath: cfg.FLMXclbinPath,
	}
}

// NewInstaller returns an installer for cfg using the real network,
// file system and FastFlowLM discovery.
func NewInstaller(cfg *config.Config, opt Options) (*Installer, error) {
	cat, err := catalog.Load()
	if err != nil {
		return nil, err
	}
	return &Installer{
		Catalog: cat,
		Config:  cfg,
		Probe:   ProbeFor(cfg, opt),
		Hub:     &hub.Client{Endpoint: cfg.HFEndpoint, Token: cfg.HFToken, HTTP: hub.NewHTTPClient()},
	}, nil
}

// Layout discovers FastFlowLM once and returns what it found.
func (in *Installer) Layout(ctx context.Context) *flm.Layout {
	if in.layout == nil {
		in.layout = flm.Discover(ctx, in.Probe)
	}
	return in.layout
}

func (in *Installer) emit(e Event) {
	if in.Progress != nil {
		in.Progress(e)
	}
}

func (in *Installer) now() time.Time {
	if in.Now != nil {
		return in.Now()
	}
	return time.Now()
}

// InstallOptions are the choices of one install.
type InstallOptions struct {
	// Source is SourceNPU (default) or SourceOriginal.
	Source string
	// NoSystem leaves FastFlowLM's own model_list.json and xclbin folder
	// alone even when they are writable.
	NoSystem bool
}

// Result says what an install or uninstall did.
type Result struct {
	Model      *catalog.Model
	Manifest   *Manifest
	Downloaded []string // files fetched from the hub
	Changed    []string // files written or removed besides downloads
	Notes      []string // things a person should know (e.g. FastFlowLM missing)
}

// Install downloads a catalog model and installs it. With FastFlowLM it
// goes to FastFlowLM's models folder, its kernels to the xclbin folders,
// and it is registered in NPU Chat's model list (and FastFlowLM's own
// when writable, unless NoSystem); without FastFlowLM it goes to NPU
// Chat's models folder for the in-process engine. Running it again
// downloads and rewrites nothing; an interrupted run resumes.
//
// An install is a sequence of steps, each a method of installRun that
// returns its own errors, which Install wraps once (a *StepError names
// the model and the step):
//
//   - plan: where the model goes, what the hub has, what is in place
//     already and what must be fetched (nothing may be left to do);
//   - fetch: the missing files, downloaded into a staging folder;
//   - edit: FastFlowLM's changes to tokenizer_config.json and config.json;
//   - swap: the new files moved into place, all or none;
//   - record: the install record (the manifest) of every file;
//   - register: kernels and model lists, for FastFlowLM;
//   - save: the record written, and an earlier copy elsewhere removed.
func (in *Installer) Install(ctx context.Context, name string, opt InstallOptions) (*Result, error) {
	m, err := in.Catalog.Lookup(name)
	if err != nil {
		return nil, err
	}
	unlock, err := lockInstalls(in.Config)
	if err != nil {
		return nil, fmt.Errorf("install %s: %w", m.Name, err)
	}
	defer unlock()
	r := &installRun{in: in, m: m, opt: opt, res: &Result{Model: m}}
	steps := []struct {
		name string
		run  func(context.Context) (done bool, err error)
	}{
		{"plan", r.plan},
		{"fetch", r.fetch},
		{"edit", r.edit},
		{"swap", r.swap},
		{"record", r.record},
		{"register", r.register},
		{"save", r.save},
	}
	for _, st := range steps {
		done, err := st.run(ctx)
		if err != nil {
			return nil, &StepError{Model: m.Name, Step: st.name, Err: err}
		}
		if done {
			break
		}
	}
	return r.res, nil
}

// StepError is an install that failed at one of its steps (plan, fetch,
// edit, swap, record, register, save): the one wrapping of its error.
type StepError struct {
	Model, Step string
	Err         error
}

func (e *StepError) Error() string { return fmt.Sprintf("install %s: %s: %v", e.Model, e.Step, e.Err) }

func (e *StepError) Unwrap() error { return e.Err }

// installRun is one install as its steps go: each step reads what the
// ones before it found and adds its own.
type installRun struct {
	in  *Installer
	m   *catalog.Model
	opt InstallOptions
	res *Result

	// plan's
	source string         // SourceNPU or SourceOriginal
	src    catalog.Source // the repository, revision and files
	layout *flm.Layout
	target string    // TargetFLM or TargetNPUChat
	dir    string    // the model's folder
	prev   *Manifest // the previous install's record, if any
	commit string    // the revision's commit now
	files  []hub.File
	edited map[string]bool // files NPU Chat edits for FastFlowLM
	// need are the files to fetch; adopted, the files in place that
	// someone else put there (uninstall leaves them).
	need    []hub.File
	adopted map[string]bool

	// fetch's: the files downloaded into the staging folder
	staged map[string]bool
	// record's
	man *Manifest
}

func (r *installRun) note(msg string) {
	r.res.Notes = append(r.res.Notes, msg)
	r.in.emit(Event{Model: r.m.Name, Phase: "note", Message: msg})
}

// plan decides where the model goes and what must be fetched. It is
// done (nothing to install) when the model is installed and unchanged
// and cannot be checked against the hub, or is installed for a
// FastFlowLM that is not found now.
func (r *installRun) plan(ctx context.Context) (done bool, err error) {
	if err := r.where(ctx); err != nil {
		return false, err
	}
	if done, err := r.previous(); done || err != nil {
		return done, err
	}
	if done, err := r.list(ctx); done || err != nil {
		return done, err
	}
	return false, r.inPlace(ctx)
}

// where picks the source, the target (FastFlowLM's folder when it is
// found, else NPU Chat's) and the model's folder, and loads the previous
// install's record.
func (r *installRun) where(ctx context.Context) error {
	m := r.m
	r.source = cmp.Or(r.opt.Source, SourceNPU)
	r.src = m.Source
	switch r.source {
	case SourceNPU:
	case SourceOriginal:
		if m.Original == nil {
			return errors.New("the catalog has no original source for it")
		}
		r.src = *m.Original
	default:
		return fmt.Errorf("source %q is not %s or %s", r.source, SourceNPU, SourceOriginal)
	}
	r.layout = r.in.Layout(ctx)
	if m.Origin == catalog.OriginFastFlowLM {
		if !r.layout.Found() && m.CPUNote() != "" {
			// Nothing here could run it: download nothing.
			return &NeedsFLMError{Model: m.Name, Reason: m.NoCPU, Hint: flm.GetHint(r.in.Probe.GOOS)}
		}
		// The FastFlowLM here may list the model at another revision
		// than the embedded list: its own entry is the one it checks
		// the files against.
		if own := systemEntry(r.layout, m); own != nil {
			r.m, m = own, own
			r.res.Model = own
		}
		r.src = m.Source
	}
	r.target, r.dir = TargetNPUChat, filepath.Join(r.in.Config.ModelsDir, path.Base(r.src.Repo))
	if r.source == SourceNPU {
		r.dir = filepath.Join(r.in.Config.ModelsDir, m.FLMName())
		if r.layout.Found() {
			if r.layout.ModelsDirErr != nil {
				return r.layout.ModelsDirErr
			}
			r.target, r.dir = TargetFLM, r.layout.ModelDir(m.FLMName())
		}
	}
	prev, err := loadManifest(r.in.Config, m.Name, r.source)
	var damaged *damagedError
	if errors.As(err, &damaged) {
		// Made again from the files in place, which are verified and
		// kept: with the record lost, they count as adopted.
		r.note(fmt.Sprintf("the install record %s was damaged (%v); it is made again from the files in place, which uninstall will keep", damaged.path, damaged.err))
		prev, err = nil, nil
	}
	r.prev = prev
	return err
}

// previous checks the previous install and FastFlowLM against the
// target before anything is fetched.
func (r *installRun) previous() (done bool, err error) {
	m, prev, layout := r.m, r.prev, r.layout
	// Installed for FastFlowLM, which is not found now (another shell's
	// PATH, say): do not move the model out of FastFlowLM's folder.
	if r.target != TargetFLM && prev != nil && prev.Target == TargetFLM {
		if unchanged(prev) {
			r.note(fmt.Sprintf("FastFlowLM was not found, but %s is installed for it in %s and unchanged; nothing to do (the in-process engine uses it from there)", m.Name, prev.Dir))
			r.res.Manifest = prev
			return true, nil
		}
		return false, &FLMGoneError{Model: m.Name, Dir: prev.Dir}
	}
	if r.source == SourceNPU && r.target != TargetFLM {
		r.note(fmt.Sprintf("FastFlowLM was not found, so %s goes to NPU Chat's own folder for the in-process (CPU) engine; the NPU path needs FastFlowLM: %s", m.Name, flm.GetHint(r.in.Probe.GOOS)))
	}
	// A FastFlowLM too old for the model is refused before gigabytes are
	// moved into its folder.
	if r.target == TargetFLM && layout.Version != "" && flm.CompareVersions(layout.Version, m.FLMMinVersion()) < 0 {
		return false, fmt.Errorf("FastFlowLM %s (%s) is older than %s, the oldest that runs this model; update FastFlowLM, then run the install again; nothing was downloaded", layout.Version, layout.Exe, m.FLMMinVersion())
	}
	// A broken FastFlowLM list is refused before gigabytes are fetched.
	if r.target == TargetFLM && layout.SystemList != "" {
		if err := checkList(layout.SystemList); err != nil {
			return false, err
		}
	}
	return false, nil
}

// list asks the hub what the revision holds now and picks the source's
// files. The listing and every download use the commit the revision
// points at now, so that a push meanwhile cannot mix two versions.
func (r *installRun) list(ctx context.Context) (done bool, err error) {
	in, src := r.in, r.src
	in.emit(Event{Model: r.m.Name, Phase: "list", Message: fmt.Sprintf("listing %s@%s on %s", src.Repo, src.Revision, in.Hub.Endpoint),
		Kept: dirBytes(stagingDir(r.dir))})
	r.commit, err = in.Hub.Commit(ctx, src.Repo, src.Revision)
	var tree []hub.File
	if err == nil {
		tree, err = in.Hub.Tree(ctx, src.Repo, r.commit)
	}
	if err != nil {
		// Offline, an install that is still as it was is fine as it is.
		if ctx.Err() == nil && r.prev != nil && r.prev.Dir == r.dir && unchanged(r.prev) {
			r.note(fmt.Sprintf("could not check for updates (%v); %s is installed and unchanged since it was verified", err, r.m.Name))
			r.res.Manifest = r.prev
			return true, nil
		}
		return false, err
	}
	if r.files, err = selectFiles(tree, src, r.target == TargetFLM); err != nil {
		return false, err
	}
	r.edited = map[string]bool{}
	if r.source == SourceNPU {
		// FastFlowLM's own models carry no tokenizer facts: their
		// tokenizer_config.json is left as FastFlowLM made it.
		r.edited["tokenizer_config.json"] = r.m.HasTokenizerFacts()
		if r.target == TargetFLM {
			r.edited["config.json"] = true
		}
	}
	return false, nil
}

// inPlace finds which files are in place already and which must be
// fetched. A file already in place on the first install into the folder
// was put there by someone else (the model card's git clone, `flm
// pull`): it is adopted, and uninstall will leave it.
func (r *installRun) inPlace(ctx context.Context) error {
	r.adopted = map[string]bool{}
	for _, f := range r.files {
		ok, err := r.in.inPlace(ctx, r.m.Name, r.dir, f, r.prev, r.edited[f.Path])
		if err != nil {
			return err
		}
		if !ok {
			r.need = append(r.need, f)
			continue
		}
		if r.prev == nil || r.prev.Dir != r.dir {
			r.adopted[f.Path] = true
		} else if i := slices.IndexFunc(r.prev.Files, func(pf ManifestFile) bool { return pf.Path == f.Path }); i >= 0 {
			r.adopted[f.Path] = r.prev.Files[i].Adopted
		}
	}
	return nil
}

// dirBytes is the size of the files under dir (0 when there is none).
func dirBytes(dir string) int64 {
	var n int64
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if info, err := d.Info(); err == nil {
				n += info.Size()
			}
		}
		return nil
	})
	return n
}

// downloadPlan is what fetch downloads into staging, with what an
// earlier, interrupted run left of each file.
func downloadPlan(need []hub.File, staging string) *Plan {
	plan := &Plan{}
	for _, f := range need {
		pf := PlannedFile{Path: f.Path, Size: f.Size}
		if p, err := hub.Join(staging, f.Path); err == nil {
			if st, err := os.Stat(p); err == nil {
				pf.Have = st.Size()
			} else if st, err := os.Stat(hub.PartialName(p)); err == nil {
				pf.Have = st.Size()
			}
		}
		pf.Have = min(pf.Have, pf.Size)
		plan.Files = append(plan.Files, pf)
	}
	return plan
}

// fetch downloads the missing files into the staging folder, after
// checking that they fit on the disk.
func (r *installRun) fetch(ctx context.Context) (bool, error) {
	r.staged = map[string]bool{}
	if len(r.need) == 0 {
		return false, nil
	}
	in, staging := r.in, stagingDir(r.dir)
	plan := downloadPlan(r.need, staging)
	size, have := plan.Bytes()
	if err := os.MkdirAll(staging, 0o755); err != nil {
		return false, err
	}
	if err := hub.CheckSpace(in.Free, staging, size-have); err != nil {
		return false, err
	}
	msg := fmt.Sprintf("%d files, %s to download", len(plan.Files), hub.HumanBytes(size))
	if have > 0 {
		msg += fmt.Sprintf(" (%s of it downloaded before)", hub.HumanBytes(have))
	}
	in.emit(Event{Model: r.m.Name, Phase: "download", Plan: plan, Message: msg})
	for _, f := range r.need {
		seed(ctx, r.prev, staging, r.dir, f)
		err := in.Hub.Download(ctx, r.src.Repo, r.commit, f, staging, func(p hub.Progress) {
			in.emit(Event{Model: r.m.Name, Phase: "download", File: &p})
		})
		if err != nil {
			return false, err
		}
		r.staged[f.Path] = true
	}
	return false, nil
}

// edit makes FastFlowLM's changes to tokenizer_config.json and
// config.json. A new download is edited in the staging folder, before
// anything is moved into place, so that a failed edit leaves the
// working install alone.
func (r *installRun) edit(context.Context) (bool, error) {
	if r.source != SourceNPU {
		return false, nil
	}
	m := r.m
	tf := flm.TokenizerFacts{EOSToken: m.Tokenizer.EOSToken, EOSTokenIDs: m.Tokenizer.EOSTokenIDs, BOSTokenID: m.Tokenizer.BOSTokenID, PadTokenID: m.Tokenizer.PadTokenID}
	fixes := []struct {
		name string
		fix  func(*jsonedit.Object) error
	}{
		{"tokenizer_config.json", func(o *jsonedit.Object) error { return flm.FixTokenizerConfig(o, tf) }},
		{"config.json", func(o *jsonedit.Object) error { return flm.FixFLMVersion(o, m.FLMMinVersion(), r.layout.Version) }},
	}
	for _, fx := range fixes {
		if !r.edited[fx.name] {
			continue
		}
		p := filepath.Join(r.dir, fx.name)
		if r.staged[fx.name] {
			p = filepath.Join(stagingDir(r.dir), fx.name)
			// The .bak must be this download's original.
			os.Remove(p + ".bak")
		}
		changed, err := flm.EditJSONFile(p, fx.fix)
		if err != nil {
			return false, err
		}
		if changed && !r.staged[fx.name] {
			r.res.Changed = append(r.res.Changed, p)
		}
	}
	return false, nil
}

// swap moves the new files into place, all or none: the files they
// replace are moved aside first and put back if any move fails.
func (r *installRun) swap(context.Context) (bool, error) {
	if len(r.need) == 0 {
		return false, nil
	}
	var paths []string
	for _, f := range r.need {
		paths = append(paths, f.Path)
		if r.edited[f.Path] {
			// The download's original (or none, when the edit changed
			// nothing) replaces the earlier version's.
			paths = append(paths, f.Path+".bak")
		}
	}
	staging := stagingDir(r.dir)
	if err := swapIn(staging, oldDir(r.dir), r.dir, paths, os.Rename); err != nil {
		hint := ""
		if fileInUse(err) {
			// Windows refuses to move a file another program has open:
			// FastFlowLM or the CPU engine serving the model.
			hint = "; a program has the file open: if NPU Chat or FastFlowLM is serving the model, stop serving, then install again (the download is kept)"
		}
		var ue *undoError
		if errors.As(err, &ue) {
			return false, fmt.Errorf("%w%s", err, hint)
		}
		return false, fmt.Errorf("%w; the previous files were put back%s", err, hint)
	}
	for _, f := range r.need {
		r.res.Downloaded = append(r.res.Downloaded, f.Path)
	}
	removeEmptyDirs(staging, filepath.Dir(filepath.Dir(staging)))
	r.in.emit(Event{Model: r.m.Name, Phase: "install", Message: fmt.Sprintf("%d files in %s", len(r.need), r.dir)})
	return false, nil
}

// record describes every installed file for the install record.
func (r *installRun) record(ctx context.Context) (bool, error) {
	src := r.src
	r.man = &Manifest{Model: r.m.Name, Source: r.source, Repo: src.Repo, Revision: src.Revision, Commit: r.commit,
		Target: r.target, Dir: r.dir, InstalledAt: r.in.now().UTC()}
	if r.prev != nil && len(r.res.Downloaded) == 0 && len(r.res.Changed) == 0 {
		r.man.InstalledAt = r.prev.InstalledAt
	}
	for _, f := range r.files {
		mf, err := recordFile(ctx, r.dir, f, r.edited[f.Path])
		if err != nil {
			return false, err
		}
		mf.Adopted = r.adopted[f.Path]
		r.man.Files = append(r.man.Files, mf)
	}
	return false, nil
}

// register puts the kernels in FastFlowLM's xclbin folders and the
// model in the model lists (FastFlowLM's target only).
func (r *installRun) register(ctx context.Context) (bool, error) {
	if r.target != TargetFLM {
		return false, nil
	}
	r.man.FLMVersion = r.layout.Version
	if err := r.in.installXclbins(r.m, r.src, r.dir, r.layout, r.opt.NoSystem, r.prev, r.man, r.res); err != nil {
		return false, err
	}
	return false, r.in.register(ctx, r.m, r.layout, r.opt.NoSystem, r.prev, r.man, r.res)
}

// save writes the install record, then removes an earlier install
// elsewhere (NPU Chat's folder, before FastFlowLM was installed), whose
// files were reused.
func (r *installRun) save(ctx context.Context) (bool, error) {
	if _, err := saveManifest(r.in.Config, r.man); err != nil {
		return false, fmt.Errorf("write the install record: %w", err)
	}
	r.res.Manifest = r.man
	if prev := r.prev; prev != nil && prev.Dir != r.dir {
		old := *prev
		old.Lists = slices.DeleteFunc(slices.Clone(old.Lists), func(l string) bool { return slices.Contains(r.man.Lists, l) })
		old.XclbinDirs = slices.DeleteFunc(slices.Clone(old.XclbinDirs), func(d string) bool { return slices.Contains(r.man.XclbinDirs, d) })
		if err := r.in.uninstall(ctx, r.m, &old, r.res); err != nil {
			r.res.Manifest = nil
			return false, fmt.Errorf("remove the earlier copy in %s: %w", prev.Dir, err)
		}
		r.note(fmt.Sprintf("moved from %s to %s", prev.Dir, r.dir))
	}
	return false, nil
}

// NeedsFLMError is an install refused before any download: the model
// runs on the NPU only (Reason says why the CPU cannot), and FastFlowLM
// is not found.
type NeedsFLMError struct {
	Model, Reason, Hint string
}

func (e *NeedsFLMError) Error() string {
	return fmt.Sprintf("%s runs on the NPU only (%s), and FastFlowLM was not found: %s; nothing was downloaded", e.Model, e.Reason, e.Hint)
}

// FLMGoneError is an install refused because the model is installed for
// a FastFlowLM that is not found now: moving it out of FastFlowLM's
// folder would break that FastFlowLM.
type FLMGoneError struct {
	Model, Dir string
}

func (e *FLMGoneError) Error() string {
	return fmt.Sprintf("%s is installed for FastFlowLM in %s, but FastFlowLM was not found now; "+
		"tell NPU Chat where FastFlowLM is (the flm_root setting, or --flm-root DIR), or remove the model first to install it for the in-process engine only", e.Model, e.Dir)
}

// systemEntry is the model as FastFlowLM's own model_list.json lists it
// under the same tag, or nil when it does not (or its entry cannot be
// read as a model: the embedded one is used then).
func systemEntry(layout *flm.Layout, m *catalog.Model) *catalog.Model {
	if layout.SystemList == "" {
		return nil
	}
	b, err := flm.ReadList(layout.SystemList)
	if err != nil {
		return nil
	}
	o, err := jsonedit.ParseObject(b)
	if err != nil {
		return nil
	}
	raw, ok := flm.GetEntry(o, m.FLM.Family, m.FLM.Tag)
	if !ok {
		return nil
	}
	own, err := catalog.FromFLMEntry(m.FLM.Family, m.FLM.Tag, raw)
	if err != nil || flm.CheckModelPath(own.FLMName()) != nil {
		return nil
	}
	return own
}

// checkList fails when a model list cannot be read or is not valid JSON.
func checkList(path string) error {
	b, err := flm.ReadList(path)
	if err != nil {
		return fmt.Errorf("read FastFlowLM's model list: %w", err)
	}
	if _, err := jsonedit.ParseObject(b); err != nil {
		return fmt.Errorf("FastFlowLM's model list %s is not valid JSON (%v); fix it or reinstall FastFlowLM; nothing was changed", path, err)
	}
	return nil
}

// unchanged reports whether every file of an install still has the size
// and time it had when it was verified.
func unchanged(man *Manifest) bool {
	for _, f := range man.Files {
		p, err := hub.Join(man.Dir, f.Path)
		if err != nil {
			return false
		}
		st, err := os.Stat(p)
		size := f.Size
		if f.Edited {
			size = f.LocalSize
		}
		if err != nil || st.Size() != size || st.ModTime().UnixNano() != f.ModTime {
			return false
		}
	}
	return true
}

// selectFiles picks the source's files from the tree. Every literal name
// must be there; patterns may match nothing. Kernels are skipped when
// there is no FastFlowLM to use them.
func selectFiles(tree []hub.File, src catalog.Source, withXclbins bool) ([]hub.File, error) {
	var out []hub.File
	for _, want := range src.Files {
		if !withXclbins && slices.Contains(src.XCLBins, want) {
			continue
		}
		found := false
		for _, f := range tree {
			if ok, _ := path.Match(want, f.Path); ok || f.Path == want {
				if !slices.ContainsFunc(out, func(o hub.File) bool { return o.Path == f.Path }) {
					out = append(out, f)
				}
				found = true
			}
		}
		if !found && !strings.ContainsAny(want, "*?[") {
			return nil, fmt.Errorf("%s@%s has no file %s", src.Repo, src.Revision, want)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s@%s has none of the files %v", src.Repo, src.Revision, src.Files)
	}
	return out, nil
}

// inPlace reports whether dir already holds f as installed: the hub's
// content, or (for a file NPU Chat edits) the edited version of that
// same hub content recorded in the previous manifest.
func (in *Installer) inPlace(ctx context.Context, model, dir string, f hub.File, prev *Manifest, edited bool) (bool, error) {
	p, err := hub.Join(dir, f.Path)
	if err != nil {
		return false, err
	}
	st, err := os.Stat(p)
	if err != nil {
		return false, nil
	}
	var rec *ManifestFile
	if prev != nil && prev.Dir == dir {
		for i := range prev.Files {
			if prev.Files[i].Path == f.Path && prev.Files[i].BlobID == f.BlobID && prev.Files[i].SHA256 == f.SHA256 {
				rec = &prev.Files[i]
			}
		}
	}
	// Unchanged since the last install (same size and time): trust the
	// hashes taken then rather than re-reading gigabytes.
	if rec != nil && rec.ModTime == st.ModTime().UnixNano() && ((rec.Edited && rec.LocalSize == st.Size()) || (!rec.Edited && rec.Size == st.Size())) {
		return true, nil
	}
	in.emit(Event{Model: model, Phase: "verify", Message: fmt.Sprintf("checking %s already in %s", f.Path, dir)})
	if err := hub.Verify(ctx, p, f); err == nil {
		return true, nil
	} else if ctx.Err() != nil {
		return false, ctx.Err()
	}
	if edited && rec != nil && rec.Edited {
		sum, err := hub.HashFile(ctx, p)
		if err != nil {
			return false, err
		}
		return sum == rec.LocalSHA256, nil
	}
	return false, nil
}

// recordFile describes an installed file for the manifest.
func recordFile(ctx context.Context, dir string, f hub.File, edited bool) (ManifestFile, error) {
	p, _ := hub.Join(dir, f.Path)
	st, err := os.Stat(p)
	if err != nil {
		return ManifestFile{}, err
	}
	mf := ManifestFile{Path: f.Path, Size: f.Size, BlobID: f.BlobID, SHA256: f.SHA256, ModTime: st.ModTime().UnixNano()}
	if edited {
		if err := hub.Verify(ctx, p, f); err != nil {
			if ctx.Err() != nil {
				return mf, ctx.Err()
			}
			sum, err := hub.HashFile(ctx, p)
			if err != nil {
				return mf, err
			}
			mf.Edited, mf.LocalSHA256, mf.LocalSize = true, sum, st.Size()
		}
	}
	return mf, nil
}

// stagingDir is where a model folder's downloads wait until complete:
// beside it, on the same file system, so moving them in is a rename.
func stagingDir(dir string) string {
	return filepath.Join(filepath.Dir(dir), ".npuchat-staging", filepath.Base(dir))
}

// oldDir is where the files an update replaces wait until every new
// file is in place: beside the staging folder, on the same file system.
func oldDir(dir string) string { return stagingDir(dir) + ".old" }

// swapIn moves the files paths (relative, "/"-separated) from staging
// into dir, with rename (os.Rename; tests inject failures). A file of
// dir it replaces is first moved into old; a path missing from staging
// only moves dir's file aside. On any error every move is undone, so
// dir is as it was; on success old is removed. When a move cannot be
// undone either, the error says which file is where, so that nothing
// is claimed put back that was not.
func swapIn(staging, old, dir string, paths []string, rename func(from, to string) error) (err error) {
	type move struct{ from, to string }
	var done []move
	mv := func(from, to string) error {
		if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
			return err
		}
		if err := rename(from, to); err != nil {
			return err
		}
		done = append(done, move{from, to})
		return nil
	}
	undo := func() {
		var stuck []string
		for i := len(done) - 1; i >= 0; i-- {
			if uerr := rename(done[i].to, done[i].from); uerr != nil {
				stuck = append(stuck, fmt.Sprintf("%s is in %s (%v)", done[i].from, done[i].to, uerr))
			}
		}
		removeEmptyDirs(old, filepath.Dir(old))
		if len(stuck) > 0 {
			err = &undoError{err: err, stuck: stuck}
		}
	}
	for _, p := range paths {
		from, err1 := hub.Join(staging, p)
		to, err2 := hub.Join(dir, p)
		aside, err3 := hub.Join(old, p)
		if err = errors.Join(err1, err2, err3); err != nil {
			undo()
			return err
		}
		if _, err := os.Lstat(aside); err == nil {
			// Left over from an interrupted run: the file in dir (if
			// any) is the one to keep.
			os.Remove(aside)
		}
		if _, lerr := os.Lstat(to); lerr == nil {
			if merr := mv(to, aside); merr != nil {
				err = fmt.Errorf("move %s aside: %w", p, merr)
				undo()
				return err
			}
		}
		if _, lerr := os.Lstat(from); errors.Is(lerr, os.ErrNotExist) {
			continue
		}
		if merr := mv(from, to); merr != nil {
			err = fmt.Errorf("move %s into place: %w", p, merr)
			undo()
			return err
		}
	}
	os.RemoveAll(old)
	return nil
}

// undoError is a failed swap some of whose moves could not be undone.
type undoError struct {
	err   error
	stuck []string // "file is in place (why)"
}

func (e *undoError) Error() string {
	return fmt.Sprintf("%v; and some files could not be put back: %s; move them back by hand", e.err, strings.Join(e.stuck, "; "))
}

func (e *undoError) Unwrap() error { return e.err }

// seed puts a verified copy of f from the model's other install (the one
// in NPU Chat's folder made before FastFlowLM was installed, or the
// reverse) into staging, so that it is not downloaded twice.
func seed(ctx context.Context, other *Manifest, staging, dir string, f hub.File) {
	dst, err := hub.Join(staging, f.Path)
	if err != nil {
		return
	}
	if _, err := os.Stat(dst); err == nil {
		return
	}
	if other == nil || other.Dir == dir {
		return
	}
	src, err := hub.Join(other.Dir, f.Path)
	if err != nil || hub.Verify(ctx, src, f) != nil {
		return
	}
	os.MkdirAll(filepath.Dir(dst), 0o755)
	tmp := hub.PartialName(dst)
	if err := copyFile(src, tmp); err != nil {
		os.Remove(tmp)
		return
	}
	os.Rename(tmp, dst)
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, in)
	if err == nil {
		err = out.Sync()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return err
}

// copyIfDifferent copies src to dst (via a temporary file) unless dst
// already has the same content. It reports whether it wrote.
func copyIfDifferent(ctx context.Context, src, dst string) (bool, error) {
	if a, err := hub.HashFile(ctx, src); err == nil {
		if b, err := hub.HashFile(ctx, dst); err == nil && a == b {
			return false, nil
		}
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return false, err
	}
	tmp := dst + ".tmp-npuchat"
	if err := copyFile(src, tmp); err != nil {
		os.Remove(tmp)
		return false, err
	}
	if err := os.Rename(tmp, dst); err != nil {
		os.Remove(tmp)
		return false, err
	}
	return true, nil
}

// removeEmptyDirs removes dir and its empty parents up to (not
// including) stop.
func removeEmptyDirs(dir, stop string) {
	var dirs []string
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	for i := len(dirs) - 1; i >= 0; i-- {
		os.Remove(dirs[i]) // fails, harmlessly, when not empty
	}
	for d := filepath.Dir(dir); d != stop && strings.HasPrefix(d, stop); d = filepath.Dir(d) {
		if os.Remove(d) != nil {
			break
		}
	}
}

// IsFileInUse reports whether err is the system refusing to move a file
// another program has open (Windows; never on Unix, which moves open
// files), so that callers can say to stop serving the model first.
func IsFileInUse(err error) bool { return fileInUse(err) }

// isPermission reports whether err means "not allowed to write here".
func isPermission(err error) bool {
	return errors.Is(err, fs.ErrPermission) || errors.Is(err, syscall.EROFS)
}
