package models

import (
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
func (in *Installer) Install(ctx context.Context, name string, opt InstallOptions) (*Result, error) {
	m, err := in.Catalog.Lookup(name)
	if err != nil {
		return nil, err
	}
	source := opt.Source
	if source == "" {
		source = SourceNPU
	}
	src := m.Source
	if source == SourceOriginal {
		if m.Original == nil {
			return nil, fmt.Errorf("install %s: the catalog has no original source for it", m.Name)
		}
		src = *m.Original
	} else if source != SourceNPU {
		return nil, fmt.Errorf("install %s: source %q is not %s or %s", m.Name, source, SourceNPU, SourceOriginal)
	}
	res := &Result{Model: m}
	unlock, err := lockInstalls(in.Config)
	if err != nil {
		return nil, fmt.Errorf("install %s: %w", m.Name, err)
	}
	defer unlock()
	layout := in.Layout(ctx)

	target, dir := TargetNPUChat, filepath.Join(in.Config.ModelsDir, path.Base(src.Repo))
	if source == SourceNPU {
		dir = filepath.Join(in.Config.ModelsDir, m.FLMName())
		if layout.Found() {
			if layout.ModelsDirErr != nil {
				return nil, fmt.Errorf("install %s: %w", m.Name, layout.ModelsDirErr)
			}
			target, dir = TargetFLM, layout.ModelDir(m.FLMName())
		}
	}
	prev, err := loadManifest(in.Config, m.Name, source)
	var damaged *damagedError
	if errors.As(err, &damaged) {
		// Made again below from the files in place, which are verified
		// and kept: with the record lost, they count as adopted.
		note := fmt.Sprintf("the install record %s was damaged (%v); it is made again from the files in place, which uninstall will keep", damaged.path, damaged.err)
		res.Notes = append(res.Notes, note)
		in.emit(Event{Model: m.Name, Phase: "note", Message: note})
		prev, err = nil, nil
	}
	if err != nil {
		return nil, err
	}
	// Installed for FastFlowLM, which is not found now (another shell's
	// PATH, say): do not move the model out of FastFlowLM's folder.
	if target != TargetFLM && prev != nil && prev.Target == TargetFLM {
		if unchanged(prev) {
			note := fmt.Sprintf("FastFlowLM was not found, but %s is installed for it in %s and unchanged; nothing to do (the in-process engine uses it from there)", m.Name, prev.Dir)
			res.Notes = append(res.Notes, note)
			in.emit(Event{Model: m.Name, Phase: "note", Message: note})
			res.Manifest = prev
			return res, nil
		}
		return nil, fmt.Errorf("install %s: it is installed for FastFlowLM in %s, but FastFlowLM was not found; run again with --flm-root DIR (the FastFlowLM folder), or uninstall it first to install it for the in-process engine only", m.Name, prev.Dir)
	}
	if source == SourceNPU && target != TargetFLM {
		note := fmt.Sprintf("FastFlowLM was not found, so %s goes to NPU Chat's own folder for the in-process (CPU) engine; the NPU path needs FastFlowLM: %s", m.Name, flm.InstallHint(in.Probe.GOOS))
		res.Notes = append(res.Notes, note)
		in.emit(Event{Model: m.Name, Phase: "note", Message: note})
	}
	// A FastFlowLM too old for the model is refused before gigabytes are
	// moved into its folder.
	if target == TargetFLM && layout.Version != "" && flm.CompareVersions(layout.Version, m.FLMMinVersion()) < 0 {
		return nil, fmt.Errorf("install %s: FastFlowLM %s (%s) is older than %s, the oldest that runs this model; update FastFlowLM, then run the install again; nothing was downloaded", m.Name, layout.Version, layout.Exe, m.FLMMinVersion())
	}
	// A broken FastFlowLM list is refused before gigabytes are fetched.
	if target == TargetFLM && layout.SystemList != "" {
		if err := checkList(layout.SystemList); err != nil {
			return nil, fmt.Errorf("install %s: %w", m.Name, err)
		}
	}

	// 1. What the hub has.
	// The listing and every download use the commit the revision points
	// at now, so that a push meanwhile cannot mix two versions.
	in.emit(Event{Model: m.Name, Phase: "list", Message: fmt.Sprintf("listing %s@%s on %s", src.Repo, src.Revision, in.Hub.Endpoint)})
	commit, err := in.Hub.Commit(ctx, src.Repo, src.Revision)
	var tree []hub.File
	if err == nil {
		tree, err = in.Hub.Tree(ctx, src.Repo, commit)
	}
	if err != nil {
		// Offline, an install that is still as it was is fine as it is.
		if ctx.Err() == nil && prev != nil && prev.Dir == dir && unchanged(prev) {
			note := fmt.Sprintf("could not check for updates (%v); %s is installed and unchanged since it was verified", err, m.Name)
			res.Notes = append(res.Notes, note)
			in.emit(Event{Model: m.Name, Phase: "note", Message: note})
			res.Manifest = prev
			return res, nil
		}
		return nil, fmt.Errorf("install %s: %w", m.Name, err)
	}
	files, err := selectFiles(tree, src, target == TargetFLM)
	if err != nil {
		return nil, fmt.Errorf("install %s: %w", m.Name, err)
	}
	edited := map[string]bool{}
	if source == SourceNPU {
		edited["tokenizer_config.json"] = true
		if target == TargetFLM {
			edited["config.json"] = true
		}
	}

	// 2. What is already in place.
	// A file already in place on the first install into dir was put
	// there by someone else (the model card's git clone, `flm pull`):
	// it is adopted, and uninstall will leave it.
	var need []hub.File
	var needBytes int64
	adopted := map[string]bool{}
	for _, f := range files {
		ok, err := in.inPlace(ctx, m.Name, dir, f, prev, edited[f.Path])
		if err != nil {
			return nil, fmt.Errorf("install %s: %w", m.Name, err)
		}
		if !ok {
			need = append(need, f)
			needBytes += f.Size
			continue
		}
		if prev == nil || prev.Dir != dir {
			adopted[f.Path] = true
		} else if i := slices.IndexFunc(prev.Files, func(pf ManifestFile) bool { return pf.Path == f.Path }); i >= 0 {
			adopted[f.Path] = prev.Files[i].Adopted
		}
	}

	// 3. Download what is missing into the staging folder.
	staging := stagingDir(dir)
	staged := map[string]bool{}
	if len(need) > 0 {
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
			needBytes -= pf.Have
			plan.Files = append(plan.Files, pf)
		}
		if err := os.MkdirAll(staging, 0o755); err != nil {
			return nil, fmt.Errorf("install %s: %w", m.Name, err)
		}
		if err := hub.CheckSpace(in.Free, staging, needBytes); err != nil {
			return nil, fmt.Errorf("install %s: %w", m.Name, err)
		}
		size, have := plan.Bytes()
		msg := fmt.Sprintf("%d files, %s to download", len(plan.Files), hub.HumanBytes(size))
		if have > 0 {
			msg += fmt.Sprintf(" (%s of it downloaded before)", hub.HumanBytes(have))
		}
		in.emit(Event{Model: m.Name, Phase: "download", Plan: plan, Message: msg})
		for _, f := range need {
			seed(ctx, prev, staging, dir, f)
			err := in.Hub.Download(ctx, src.Repo, commit, f, staging, func(p hub.Progress) {
				in.emit(Event{Model: m.Name, Phase: "download", File: &p})
			})
			if err != nil {
				return nil, fmt.Errorf("install %s: %w", m.Name, err)
			}
			staged[f.Path] = true
		}
	}

	// 4. FastFlowLM's needs: tokenizer_config.json, config.json. A new
	// download is edited in the staging folder, before anything is moved
	// into place, so that a failed edit leaves the working install alone.
	if source == SourceNPU {
		tf := flm.TokenizerFacts{EOSToken: m.Tokenizer.EOSToken, EOSTokenIDs: m.Tokenizer.EOSTokenIDs, BOSTokenID: m.Tokenizer.BOSTokenID, PadTokenID: m.Tokenizer.PadTokenID}
		fixes := []struct {
			name string
			fix  func(*jsonedit.Object) error
		}{
			{"tokenizer_config.json", func(o *jsonedit.Object) error { return flm.FixTokenizerConfig(o, tf) }},
			{"config.json", func(o *jsonedit.Object) error { return flm.FixFLMVersion(o, m.FLMMinVersion(), layout.Version) }},
		}
		for _, fx := range fixes {
			if !edited[fx.name] {
				continue
			}
			p := filepath.Join(dir, fx.name)
			if staged[fx.name] {
				p = filepath.Join(staging, fx.name)
				// The .bak must be this download's original.
				os.Remove(p + ".bak")
			}
			changed, err := flm.EditJSONFile(p, fx.fix)
			if err != nil {
				return nil, fmt.Errorf("install %s: %w", m.Name, err)
			}
			if changed && !staged[fx.name] {
				res.Changed = append(res.Changed, p)
			}
		}
	}

	// 5. Move the new files into place, all or none: the files they
	// replace are moved aside first and put back if any move fails.
	if len(need) > 0 {
		var paths []string
		for _, f := range need {
			paths = append(paths, f.Path)
			if edited[f.Path] {
				// The download's original (or none, when the edit changed
				// nothing) replaces the earlier version's.
				paths = append(paths, f.Path+".bak")
			}
		}
		if err := swapIn(staging, oldDir(dir), dir, paths, os.Rename); err != nil {
			hint := ""
			if fileInUse(err) {
				// Windows refuses to move a file another program has
				// open: FastFlowLM or the CPU engine serving the model.
				hint = "; a program has the file open: if NPU Chat or FastFlowLM is serving the model, stop serving, then install again (the download is kept)"
			}
			var ue *undoError
			if errors.As(err, &ue) {
				return nil, fmt.Errorf("install %s: %w%s", m.Name, err, hint)
			}
			return nil, fmt.Errorf("install %s: %w; the previous files were put back%s", m.Name, err, hint)
		}
		for _, f := range need {
			res.Downloaded = append(res.Downloaded, f.Path)
		}
		removeEmptyDirs(staging, filepath.Dir(filepath.Dir(staging)))
		in.emit(Event{Model: m.Name, Phase: "install", Message: fmt.Sprintf("%d files in %s", len(need), dir)})
	}

	man := &Manifest{Model: m.Name, Source: source, Repo: src.Repo, Revision: src.Revision, Commit: commit, Target: target, Dir: dir, InstalledAt: in.now().UTC()}
	if prev != nil && len(res.Downloaded) == 0 && len(res.Changed) == 0 {
		man.InstalledAt = prev.InstalledAt
	}
	for _, f := range files {
		mf, err := recordFile(ctx, dir, f, edited[f.Path])
		if err != nil {
			return nil, fmt.Errorf("install %s: %w", m.Name, err)
		}
		mf.Adopted = adopted[f.Path]
		man.Files = append(man.Files, mf)
	}

	// 6. Kernels and registration.
	if target == TargetFLM {
		man.FLMVersion = layout.Version
		if err := in.installXclbins(m, src, dir, layout, opt.NoSystem, prev, man, res); err != nil {
			return nil, fmt.Errorf("install %s: %w", m.Name, err)
		}
		if err := in.register(ctx, m, layout, opt.NoSystem, prev, man, res); err != nil {
			return nil, fmt.Errorf("install %s: %w", m.Name, err)
		}
	}
	if _, err := saveManifest(in.Config, man); err != nil {
		return nil, fmt.Errorf("install %s: save install record: %w", m.Name, err)
	}
	// An earlier install elsewhere (NPU Chat's folder, before FastFlowLM
	// was installed) is superseded: its files were reused, remove them.
	if prev != nil && prev.Dir != dir {
		old := *prev
		old.Lists = slices.DeleteFunc(slices.Clone(old.Lists), func(l string) bool { return slices.Contains(man.Lists, l) })
		old.XclbinDirs = slices.DeleteFunc(slices.Clone(old.XclbinDirs), func(d string) bool { return slices.Contains(man.XclbinDirs, d) })
		if err := in.uninstall(ctx, m, &old, res); err != nil {
			return nil, fmt.Errorf("install %s: remove the earlier copy in %s: %w", m.Name, prev.Dir, err)
		}
		note := fmt.Sprintf("moved from %s to %s", prev.Dir, dir)
		res.Notes = append(res.Notes, note)
		in.emit(Event{Model: m.Name, Phase: "note", Message: note})
	}
	res.Manifest = man
	return res, nil
}

// checkList fails when a model list cannot be read or is not valid JSON.
func checkList(path string) error {
	b, err := os.ReadFile(path)
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
