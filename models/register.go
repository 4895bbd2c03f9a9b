package models

import (
	"context"
	"errors"
	"fmt"
	"github.com/npuchat/npuchat/jsonedit"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/npuchat/npuchat/models/catalog"
	"github.com/npuchat/npuchat/models/flm"
	"github.com/npuchat/npuchat/models/hub"
)

// installXclbins copies the model's kernels from its folder to NPU
// Chat's xclbin root (always) and to FastFlowLM's own (when writable and
// allowed), and links FastFlowLM's other kernel folders into NPU Chat's
// root, because FastFlowLM reads kernels from one root only.
func (in *Installer) installXclbins(m *catalog.Model, src catalog.Source, dir string, layout *flm.Layout, noSystem bool, prev, man *Manifest, res *Result) error {
	if len(src.XCLBins) == 0 {
		// FastFlowLM's own models: their kernels came with FastFlowLM,
		// in its xclbin folder, and NPU Chat's root links to them.
		linked, err := LinkSystemXclbins(layout, in.installedFLMNames())
		res.Changed = append(res.Changed, linked...)
		return err
	}
	ctx := context.Background()
	name := m.FLMName()
	dirs := []string{layout.OwnXclbinDir(name)}
	if !noSystem && layout.XclbinRoot != "" {
		dirs = append(dirs, layout.XclbinDir(name))
	}
	var prevDirs, prevFound []string
	if prev != nil {
		prevDirs, prevFound = prev.XclbinDirs, prev.XclbinFound
	}
	for i, d := range dirs {
		if i == 0 {
			// NPU Chat's own folder may be a link to FastFlowLM's folder
			// of the same name (made by LinkSystemXclbins before the
			// model was installed, when someone had copied its kernels
			// there by hand): never write through it.
			if err := unlinkOwnFolder(d); err != nil {
				return err
			}
		} else if st, err := os.Lstat(d); err == nil {
			// FastFlowLM's own folder of the model existed before NPU
			// Chat first installed into it (the model card's hand copy,
			// or another tool): uninstall leaves it.
			ours := slices.Contains(prevDirs, d) && !slices.Contains(prevFound, d)
			if !ours || st.Mode()&os.ModeSymlink != 0 {
				man.XclbinFound = append(man.XclbinFound, d)
			}
		}
		var werr error
		for _, x := range src.XCLBins {
			from, err := hub.Join(dir, x)
			if err != nil {
				return err
			}
			to, err := hub.Join(d, x)
			if err != nil {
				return err
			}
			changed, err := copyIfDifferent(ctx, from, to)
			if err != nil {
				werr = err
				break
			}
			if changed {
				res.Changed = append(res.Changed, to)
			}
		}
		if werr != nil {
			if i > 0 {
				man.XclbinFound = slices.DeleteFunc(man.XclbinFound, func(x string) bool { return x == d })
			}
			if i > 0 && isPermission(werr) {
				note := fmt.Sprintf("FastFlowLM's kernel folder %s is not writable; NPU Chat starts flm with its own (%s). Run the install as root (or with --no-system to silence this) to have plain `flm serve %s` work too", layout.XclbinDir(name), layout.OwnXclbinRoot, m.FLMTag())
				res.Notes = append(res.Notes, note)
				in.emit(Event{Model: m.Name, Phase: "note", Message: note})
				continue
			}
			return fmt.Errorf("copy kernels to %s: %w", d, werr)
		}
		man.XclbinDirs = append(man.XclbinDirs, d)
	}
	linked, err := LinkSystemXclbins(layout, in.installedFLMNames(m))
	if err != nil {
		return err
	}
	res.Changed = append(res.Changed, linked...)
	return nil
}

// installedFLMNames are the FastFlowLM folder names of the catalog models
// with their own kernels that NPU Chat has installed for FastFlowLM
// (plus extra): their kernel folders in NPU Chat's root are NPU Chat's
// own, never links or copies of FastFlowLM's.
func (in *Installer) installedFLMNames(extra ...*catalog.Model) []string {
	var names []string
	for _, m := range in.Catalog.All() {
		if len(m.Source.XCLBins) == 0 {
			continue
		}
		if man, err := loadManifest(in.Config, m.Name, SourceNPU); err == nil && man != nil && man.Target == TargetFLM {
			names = append(names, m.FLMName())
		}
	}
	for _, m := range extra {
		names = append(names, m.FLMName())
	}
	return names
}

// LinkSystemXclbins makes every kernel folder of FastFlowLM's own xclbin
// root visible in NPU Chat's root (symbolic links; copies where links are
// not allowed, as on Windows without developer mode), so that flm started
// with FLM_XCLBIN_PATH pointing at NPU Chat's root still finds the
// kernels of its built-in models. The folders named in own (models NPU
// Chat installed itself) are skipped. Existing links are left alone; a
// copy that no longer matches FastFlowLM's folder (FastFlowLM was
// upgraded) is made again. It returns what it created or refreshed.
func LinkSystemXclbins(layout *flm.Layout, own []string) ([]string, error) {
	if layout.XclbinRoot == "" {
		return nil, nil
	}
	sys := filepath.Join(layout.XclbinRoot, "xclbins")
	ownRoot := filepath.Join(layout.OwnXclbinRoot, "xclbins")
	if same(sys, ownRoot) {
		return nil, nil
	}
	entries, err := os.ReadDir(sys)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil
		}
		return nil, fmt.Errorf("read FastFlowLM's kernels: %w", err)
	}
	if err := os.MkdirAll(ownRoot, 0o755); err != nil {
		return nil, err
	}
	var made []string
	for _, e := range entries {
		if !e.IsDir() || slices.ContainsFunc(own, func(n string) bool { return strings.EqualFold(n, e.Name()) }) {
			continue
		}
		to := filepath.Join(ownRoot, e.Name())
		from, _ := filepath.Abs(filepath.Join(sys, e.Name()))
		if st, err := os.Lstat(to); err == nil {
			if !st.IsDir() || sameTree(from, to) {
				continue // a link, or an up-to-date copy
			}
			// A copy of an older FastFlowLM's kernels: copy again.
			if err := copyDir(from, to); err != nil {
				return made, fmt.Errorf("refresh the copy of FastFlowLM's kernels %s: %w", from, err)
			}
			made = append(made, to)
			continue
		}
		if err := os.Symlink(from, to); err != nil {
			if err := copyDir(from, to); err != nil {
				return made, fmt.Errorf("link FastFlowLM's kernels %s: %w", from, err)
			}
		}
		made = append(made, to)
	}
	return made, nil
}

// unlinkOwnFolder makes sure d, a kernel folder in NPU Chat's root, is
// not a symbolic link (or Windows junction) before kernels are copied
// into it: a link is removed (only the link; what it points to stays).
func unlinkOwnFolder(d string) error {
	st, err := os.Lstat(d)
	if err != nil || st.Mode()&(os.ModeSymlink|os.ModeIrregular) == 0 {
		return nil
	}
	if err := os.Remove(d); err != nil {
		return fmt.Errorf("replace the link %s to FastFlowLM's kernels by NPU Chat's own folder: %w", d, err)
	}
	return nil
}

func same(a, b string) bool {
	x, err1 := os.Stat(a)
	y, err2 := os.Stat(b)
	return err1 == nil && err2 == nil && os.SameFile(x, y)
}

// copyDir copies the folder from to to (files keep their modification
// times, for sameTree), replacing an earlier copy only once the new one
// is complete.
func copyDir(from, to string) error {
	tmp := to + ".tmp-npuchat"
	os.RemoveAll(tmp)
	err := filepath.WalkDir(from, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, p)
		dst := filepath.Join(tmp, rel)
		if d.IsDir() {
			return os.MkdirAll(dst, 0o755)
		}
		if err := copyFile(p, dst); err != nil {
			return err
		}
		st, err := os.Stat(p)
		if err != nil {
			return err
		}
		return os.Chtimes(dst, st.ModTime(), st.ModTime())
	})
	if err == nil {
		old := to + ".old-npuchat"
		os.RemoveAll(old)
		if _, serr := os.Lstat(to); serr == nil {
			err = os.Rename(to, old)
		}
		if err == nil {
			if err = os.Rename(tmp, to); err != nil {
				os.Rename(old, to)
			}
		}
		os.RemoveAll(old)
	}
	if err != nil {
		os.RemoveAll(tmp)
	}
	return err
}

// sameTree reports whether the folder b holds the same files as a, with
// the same sizes and modification times.
func sameTree(a, b string) bool {
	type info struct {
		size int64
		mod  int64
	}
	list := func(root string) (map[string]info, error) {
		out := map[string]info{}
		err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			st, err := d.Info()
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(root, p)
			out[rel] = info{st.Size(), st.ModTime().UnixNano()}
			return nil
		})
		return out, err
	}
	x, err1 := list(a)
	y, err2 := list(b)
	return err1 == nil && err2 == nil && maps.Equal(x, y)
}

// register puts the model in NPU Chat's model list and, when allowed and
// writable, in FastFlowLM's own.
func (in *Installer) register(ctx context.Context, m *catalog.Model, layout *flm.Layout, noSystem bool, prev, man *Manifest, res *Result) error {
	e := flm.Entry{Family: m.FLM.Family, Tag: m.FLM.Tag, Value: m.FLM.Entry}
	// Remember what each list held under the model's tag before NPU
	// Chat first registered it there, for uninstall to put back.
	remember := func(list string, from ...string) {
		if prev != nil && slices.Contains(prev.Lists, list) {
			if v, ok := prev.ListsBefore[list]; ok {
				man.setListBefore(list, v)
			}
			return
		}
		for _, p := range append([]string{list}, from...) {
			b, err := flm.ReadList(p)
			if err != nil {
				continue
			}
			if o, err := jsonedit.ParseObject(b); err == nil {
				if v, ok := flm.GetEntry(o, m.FLM.Family, m.FLM.Tag); ok {
					man.setListBefore(list, v)
				}
			}
			return
		}
	}
	remember(layout.OwnList, layout.SystemList)
	if !noSystem && layout.SystemList != "" {
		remember(layout.SystemList)
	}
	changed, err := in.writeOwnList(layout, []flm.Entry{e})
	if err != nil {
		return err
	}
	if changed {
		res.Changed = append(res.Changed, layout.OwnList)
	}
	man.Lists = append(man.Lists, layout.OwnList)
	if noSystem || layout.SystemList == "" {
		delete(man.ListsBefore, layout.SystemList)
		return nil
	}
	changed, err = flm.EditJSONFile(layout.SystemList, func(o *jsonedit.Object) error { return flm.SetEntries(o, []flm.Entry{e}) })
	if err != nil {
		if isPermission(err) {
			delete(man.ListsBefore, layout.SystemList)
			note := fmt.Sprintf("FastFlowLM's model list %s is not writable; %s is registered in NPU Chat's list %s, which NPU Chat passes to flm as FLM_CONFIG_PATH. Run the install as root (or use --no-system) to register it for plain `flm` too", layout.SystemList, m.FLMTag(), layout.OwnList)
			res.Notes = append(res.Notes, note)
			in.emit(Event{Model: m.Name, Phase: "note", Message: note})
			return nil
		}
		return err
	}
	if changed {
		res.Changed = append(res.Changed, layout.SystemList)
	}
	man.Lists = append(man.Lists, layout.SystemList)
	in.emit(Event{Model: m.Name, Phase: "register", Message: "registered " + m.FLMTag() + " in " + layout.SystemList})
	return nil
}

// writeOwnList rebuilds NPU Chat's model list: FastFlowLM's own list
// (or, when there is none, NPU Chat's previous list) with every model
// installed for FastFlowLM, plus extra.
func (in *Installer) writeOwnList(layout *flm.Layout, extra []flm.Entry) (bool, error) {
	var base []byte
	if layout.SystemList != "" {
		b, err := flm.ReadList(layout.SystemList)
		if err != nil {
			return false, fmt.Errorf("read FastFlowLM's model list: %w", err)
		}
		if _, err := jsonedit.ParseObject(b); err != nil {
			return false, fmt.Errorf("FastFlowLM's model list %s is not valid JSON (%v); fix it or reinstall FastFlowLM; nothing was changed", layout.SystemList, err)
		}
		base = b
	} else if b, err := flm.ReadList(layout.OwnList); err == nil {
		if _, err := jsonedit.ParseObject(b); err == nil {
			base = b
		}
	}
	var entries []flm.Entry
	for _, m := range in.Catalog.All() {
		man, err := loadManifest(in.Config, m.Name, SourceNPU)
		if err != nil || man == nil || man.Target != TargetFLM {
			continue
		}
		if m.Origin == catalog.OriginFastFlowLM && base != nil {
			// FastFlowLM's own entry (in base, from its list) is the
			// one it checks the files against; the embedded one fills
			// in only for a FastFlowLM whose list lacks the model.
			if o, err := jsonedit.ParseObject(base); err == nil {
				if _, ok := flm.GetEntry(o, m.FLM.Family, m.FLM.Tag); ok {
					continue
				}
			}
		}
		entries = append(entries, flm.Entry{Family: m.FLM.Family, Tag: m.FLM.Tag, Value: m.FLM.Entry})
	}
	entries = append(entries, extra...)
	out, err := flm.MergeList(base, entries)
	if err != nil {
		return false, fmt.Errorf("build %s: %w", layout.OwnList, err)
	}
	return flm.WriteIfChanged(layout.OwnList, out)
}

// PrepareFLM is what the FastFlowLM backend calls before `flm serve`:
// it finds FastFlowLM, refreshes NPU Chat's model list from
// FastFlowLM's (a FastFlowLM upgrade may have changed it) and the links
// to its kernels, and returns the layout whose Exe and ServeEnv start
// flm. Without FastFlowLM it returns flm.ErrNoFLM with the install hint.
func (in *Installer) PrepareFLM(ctx context.Context) (*flm.Layout, error) {
	layout := in.Layout(ctx)
	if !layout.Found() {
		return layout, fmt.Errorf("%w: %s", flm.ErrNoFLM, flm.GetHint(in.Probe.GOOS))
	}
	if layout.ModelsDirErr != nil {
		return layout, fmt.Errorf("prepare FastFlowLM: %w", layout.ModelsDirErr)
	}
	// The list and links are NPU Chat's install state: rebuild them only
	// under the install lock. While an install or uninstall holds it, the
	// existing list is used as it is (the install rewrites it anyway).
	unlock, err := lockInstalls(in.Config)
	if err != nil {
		if _, serr := os.Stat(layout.OwnList); serr != nil {
			return layout, fmt.Errorf("prepare FastFlowLM: %w; NPU Chat's model list %s is not there yet", err, layout.OwnList)
		}
		if errors.Is(err, errInstallRunning) {
			layout.Notes = append(layout.Notes, fmt.Sprintf("an install is running; using NPU Chat's model list %s as it is", layout.OwnList))
		} else {
			layout.Notes = append(layout.Notes, fmt.Sprintf("%v; using NPU Chat's model list %s as it is", err, layout.OwnList))
		}
		return layout, nil
	}
	defer unlock()
	if _, err := in.writeOwnList(layout, nil); err != nil {
		return layout, err
	}
	if _, err := LinkSystemXclbins(layout, in.installedFLMNames()); err != nil {
		return layout, err
	}
	return layout, nil
}
