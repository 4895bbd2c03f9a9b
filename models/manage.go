package models

import (
	"context"
	"errors"
	"fmt"
	"github.com/npuchat/npuchat/jsonedit"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/npuchat/npuchat/config"
	"github.com/npuchat/npuchat/models/catalog"
	"github.com/npuchat/npuchat/models/flm"
	"github.com/npuchat/npuchat/models/hub"
)

// ErrNotInstalled is wrapped by Locate and Verify when a model has no
// complete install.
var ErrNotInstalled = errors.New("model not installed")

// Uninstall removes what Install put in place for a model, from every
// source: its files (and their .bak and .partial companions), its kernel
// copies, its model_list.json entries and its install record. Folders
// are removed only when they end up empty; nothing else is touched.
func (in *Installer) Uninstall(ctx context.Context, name string) (*Result, error) {
	m, err := in.Catalog.Lookup(name)
	if err != nil {
		return nil, err
	}
	res := &Result{Model: m}
	unlock, err := lockInstalls(in.Config)
	if err != nil {
		return nil, fmt.Errorf("uninstall %s: %w", m.Name, err)
	}
	defer unlock()
	found := false
	for _, source := range []string{SourceNPU, SourceOriginal} {
		man, err := loadManifest(in.Config, m.Name, source)
		if err != nil {
			return nil, err
		}
		if man == nil {
			continue
		}
		found = true
		if err := in.uninstall(ctx, m, man, res); err != nil {
			return res, fmt.Errorf("uninstall %s: %w", m.Name, err)
		}
		if err := os.Remove(manifestPath(in.Config, m.Name, source)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return res, fmt.Errorf("uninstall %s: %w", m.Name, err)
		}
	}
	if !found {
		res.Notes = append(res.Notes, fmt.Sprintf("%s is not installed by NPU Chat; nothing was removed", m.Name))
	}
	return res, nil
}

func (in *Installer) uninstall(ctx context.Context, m *catalog.Model, man *Manifest, res *Result) error {
	remove := func(p string) error {
		err := os.Remove(p)
		if err == nil {
			res.Changed = append(res.Changed, p)
			return nil
		}
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return err
	}
	// Registration first: a list entry pointing at missing files would
	// make FastFlowLM try to download them.
	for _, list := range man.Lists {
		changed, err := flm.EditJSONFile(list, func(o *jsonedit.Object) error {
			_, err := flm.RestoreEntry(o, m.FLM.Family, m.FLM.Tag, m.FLMName(), man.ListsBefore[list])
			return err
		})
		switch {
		case errors.Is(err, os.ErrNotExist):
		case err != nil && isPermission(err):
			res.Notes = append(res.Notes, fmt.Sprintf("could not remove %s from %s (not writable); run the uninstall as root", m.FLMTag(), list))
		case err != nil:
			return err
		case changed:
			res.Changed = append(res.Changed, list)
		}
	}
	for _, d := range man.XclbinDirs {
		// Never delete through a link (NPU Chat's folder pointing at
		// FastFlowLM's), nor from a folder NPU Chat did not create.
		if st, err := os.Lstat(d); err != nil || st.Mode()&(os.ModeSymlink|os.ModeIrregular) != 0 {
			continue
		}
		if slices.Contains(man.XclbinFound, d) {
			res.Notes = append(res.Notes, fmt.Sprintf("kept the kernels in %s: they were there before NPU Chat installed %s", d, m.Name))
			continue
		}
		for _, x := range m.Source.XCLBins {
			if p, err := hub.Join(d, x); err == nil {
				if err := remove(p); err != nil {
					if isPermission(err) {
						res.Notes = append(res.Notes, fmt.Sprintf("could not remove %s (not writable)", p))
						continue
					}
					return err
				}
			}
		}
		os.Remove(d)
	}
	var kept []string
	for _, f := range man.Files {
		p, err := hub.Join(man.Dir, f.Path)
		if err != nil {
			continue
		}
		if f.Adopted {
			// Someone else's file: keep it, as it was before NPU Chat
			// edited it when it did.
			if _, err := os.Stat(p + ".bak"); err == nil && f.Edited {
				if err := os.Rename(p+".bak", p); err != nil {
					return err
				}
				res.Changed = append(res.Changed, p)
			}
			kept = append(kept, f.Path)
			continue
		}
		for _, q := range []string{p, p + ".bak", hub.PartialName(p)} {
			if err := remove(q); err != nil {
				return err
			}
		}
		if sp, err := hub.Join(stagingDir(man.Dir), f.Path); err == nil {
			remove(sp)
			remove(sp + ".bak")
			remove(hub.PartialName(sp))
		}
		if op, err := hub.Join(oldDir(man.Dir), f.Path); err == nil {
			remove(op)
			remove(op + ".bak")
		}
	}
	staging := stagingDir(man.Dir)
	removeEmptyDirs(oldDir(man.Dir), filepath.Dir(filepath.Dir(staging)))
	removeEmptyDirs(staging, filepath.Dir(filepath.Dir(staging)))
	removeEmptyDirs(man.Dir, filepath.Dir(man.Dir))
	if len(kept) > 0 {
		res.Notes = append(res.Notes, fmt.Sprintf("kept %s in %s: they were there before NPU Chat installed %s (delete them yourself if you no longer want them)", strings.Join(kept, ", "), man.Dir, m.Name))
	} else if _, err := os.Stat(man.Dir); err == nil {
		res.Notes = append(res.Notes, fmt.Sprintf("kept %s: it holds files NPU Chat did not put there", man.Dir))
	}
	return nil
}

// FileCheck is the verification of one file.
type FileCheck struct {
	Path    string `json:"path"`
	OK      bool   `json:"ok"`
	Problem string `json:"problem,omitempty"`
}

// VerifyReport is the result of Verify.
type VerifyReport struct {
	Model    string      `json:"model"`
	Source   string      `json:"source"`
	Dir      string      `json:"dir"`
	OK       bool        `json:"ok"`
	Files    []FileCheck `json:"files"`
	Manifest *Manifest   `json:"-"`
}

// Verify re-hashes every installed file of a model (and its kernel
// copies) against the hashes recorded at install: the hub's for files as
// downloaded, NPU Chat's for the files it edited. It needs no network.
func (in *Installer) Verify(ctx context.Context, name string) ([]*VerifyReport, error) {
	m, err := in.Catalog.Lookup(name)
	if err != nil {
		return nil, err
	}
	var reports []*VerifyReport
	for _, source := range []string{SourceNPU, SourceOriginal} {
		man, err := loadManifest(in.Config, m.Name, source)
		if err != nil {
			return nil, err
		}
		if man == nil {
			continue
		}
		r := &VerifyReport{Model: m.Name, Source: source, Dir: man.Dir, OK: true, Manifest: man}
		check := func(label, p string, f ManifestFile) {
			in.emit(Event{Model: m.Name, Phase: "verify", Message: label})
			c := FileCheck{Path: label, OK: true}
			var err error
			if f.Edited {
				var sum string
				sum, err = hub.HashFile(ctx, p)
				if err == nil && sum != f.LocalSHA256 {
					err = fmt.Errorf("changed since install (sha256 %s, recorded %s)", sum, f.LocalSHA256)
				}
			} else {
				err = hub.Verify(ctx, p, hub.File{Path: f.Path, Size: f.Size, BlobID: f.BlobID, SHA256: f.SHA256})
			}
			if err != nil {
				c.OK, c.Problem, r.OK = false, err.Error(), false
				if errors.Is(err, os.ErrNotExist) {
					c.Problem = "missing"
				}
			}
			r.Files = append(r.Files, c)
		}
		for _, f := range man.Files {
			p, err := hub.Join(man.Dir, f.Path)
			if err != nil {
				return nil, err
			}
			check(f.Path, p, f)
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
		}
		for _, d := range man.XclbinDirs {
			for _, f := range man.Files {
				if slices.Contains(m.Source.XCLBins, f.Path) {
					p, _ := hub.Join(d, f.Path)
					check(p, p, f)
				}
			}
		}
		reports = append(reports, r)
	}
	if len(reports) == 0 {
		return nil, fmt.Errorf("%s: %w; run npuchat install %s", m.Name, ErrNotInstalled, m.Name)
	}
	return reports, nil
}

// Status describes one catalog model for `npuchat models`.
type Status struct {
	Model       string          `json:"model"`
	Description string          `json:"description"`
	FLMTag      string          `json:"flm_tag"`
	Installed   bool            `json:"installed"`
	Installs    []InstallStatus `json:"installs,omitempty"`
}

// InstallStatus is one install (source) of a model.
type InstallStatus struct {
	Source string `json:"source"`
	Target string `json:"target"`
	Dir    string `json:"dir"`
	Size   int64  `json:"size"`
	// Verified is "yes" when every file still has the size and time it
	// had when its hash was checked at install, "changed" otherwise (run
	// install --verify to re-hash), "missing" when files are gone.
	Verified   string   `json:"verified"`
	Changed    []string `json:"changed,omitempty"`
	Registered []string `json:"registered,omitempty"`
	XclbinDirs []string `json:"xclbin_dirs,omitempty"`
}

// Status lists every catalog model with what is installed where. It
// reads only install records and file metadata (no hashing, no
// network).
func (in *Installer) Status(ctx context.Context) ([]Status, error) {
	var out []Status
	layout := in.Layout(ctx)
	for _, m := range in.Catalog.All() {
		s := Status{Model: m.Name, Description: m.Description, FLMTag: m.FLMTag()}
		for _, source := range []string{SourceNPU, SourceOriginal} {
			man, err := loadManifest(in.Config, m.Name, source)
			if err != nil {
				return nil, err
			}
			if man == nil {
				continue
			}
			is := InstallStatus{Source: source, Target: man.Target, Dir: man.Dir, Size: man.TotalSize(), Verified: "yes", XclbinDirs: man.XclbinDirs}
			for _, f := range man.Files {
				p, _ := hub.Join(man.Dir, f.Path)
				st, err := os.Stat(p)
				switch {
				case err != nil:
					is.Verified = "missing"
					is.Changed = append(is.Changed, f.Path)
				case st.ModTime().UnixNano() != f.ModTime:
					if is.Verified == "yes" {
						is.Verified = "changed"
					}
					is.Changed = append(is.Changed, f.Path)
				}
			}
			lists := slices.Clone(man.Lists)
			for _, l := range []string{layout.OwnList, layout.SystemList} {
				if l != "" && !slices.Contains(lists, l) {
					lists = append(lists, l)
				}
			}
			for _, l := range lists {
				b, err := flm.ReadList(l)
				if err != nil {
					continue
				}
				if o, err := jsonedit.ParseObject(b); err == nil && flm.HasEntry(o, m.FLM.Family, m.FLM.Tag, m.FLMName()) {
					is.Registered = append(is.Registered, l)
				}
			}
			s.Installs = append(s.Installs, is)
			s.Installed = s.Installed || is.Verified != "missing"
		}
		if m.Origin == catalog.OriginFastFlowLM && len(s.Installs) == 0 {
			continue // FastFlowLM's models are listed once NPU Chat installed them
		}
		out = append(out, s)
	}
	return out, nil
}

// Installed is an installed model as the in-process engine needs it.
type Installed struct {
	Model *catalog.Model
	// Dir holds config.json, the tokenizer files and the weights.
	Dir string
	// Format is "flm-q4nx" (model.q4nx, the NPU port: see Model.Port for
	// what to undo) or "hf-safetensors" (the original model).
	Format string
	Source string
	// Weights lists the weight files in Dir (model.q4nx, or the
	// *.safetensors shards), as names relative to Dir.
	Weights []string
}

// Locate finds an installed model for the in-process engine: the NPU
// port's folder (FastFlowLM's or NPU Chat's own) when installed, else the
// original safetensors. A model that is not installed gives an error
// wrapping ErrNotInstalled that says which command installs it.
func Locate(cfg *config.Config, name string) (*Installed, error) {
	cat, err := catalog.Load()
	if err != nil {
		return nil, err
	}
	m, err := cat.Lookup(name)
	if err != nil {
		return nil, err
	}
	var problems []string
	for _, source := range []string{SourceNPU, SourceOriginal} {
		man, err := loadManifest(cfg, m.Name, source)
		if err != nil {
			problems = append(problems, err.Error())
			continue
		}
		if man == nil {
			continue
		}
		inst := &Installed{Model: m, Dir: man.Dir, Source: source, Format: "flm-q4nx"}
		if source == SourceOriginal {
			inst.Format = "hf-safetensors"
		}
		missing := []string{}
		for _, f := range man.Files {
			p, _ := hub.Join(man.Dir, f.Path)
			if _, err := os.Stat(p); err != nil {
				missing = append(missing, f.Path)
				continue
			}
			if f.Path == "model.q4nx" || strings.HasSuffix(f.Path, ".safetensors") {
				inst.Weights = append(inst.Weights, filepath.FromSlash(f.Path))
			}
		}
		if len(missing) > 0 || len(inst.Weights) == 0 {
			problems = append(problems, fmt.Sprintf("%s is missing %s", man.Dir, strings.Join(missing, ", ")))
			continue
		}
		return inst, nil
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("%s: %w (%s); run npuchat install %s", m.Name, ErrNotInstalled, strings.Join(problems, "; "), m.Name)
	}
	return nil, fmt.Errorf("%s: %w; run npuchat install %s", m.Name, ErrNotInstalled, m.Name)
}
