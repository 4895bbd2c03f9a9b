package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/npuchat/npuchat/config"
	"github.com/npuchat/npuchat/models"
	"github.com/npuchat/npuchat/models/catalog"
	flmfiles "github.com/npuchat/npuchat/models/flm"
	"github.com/npuchat/npuchat/models/library"
	npuflm "github.com/npuchat/npuchat/npu/flm"
	"github.com/npuchat/npuchat/service"
	"github.com/npuchat/npuchat/service/backend"
	"github.com/npuchat/npuchat/service/cpu"
)

// localModels maps the names served from files on disk (a --model path,
// a model added on the page or in the tray) to those paths. It is read
// by the service's goroutines while the page adds and forgets models.
type localModels struct {
	mu sync.RWMutex
	m  map[string]string
}

func (l *localModels) path(name string) (string, bool) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	p, ok := l.m[name]
	return p, ok
}

func (l *localModels) set(name, path string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.m == nil {
		l.m = map[string]string{}
	}
	l.m[name] = path
}

func (l *localModels) remove(name string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.m, name)
}

// fastflowLayout is where FastFlowLM's folders are.
type fastflowLayout = flmfiles.Layout

// flmModel is a model registered in FastFlowLM's own model_list.json
// whose folder is installed.
type flmModel struct {
	Name   string // served name: FastFlowLM's tag, family:tag
	Folder string // FastFlowLM's folder name
	Dir    string
	Family string // details.family
	Params string
	Quant  string
	// Context is its default_context_length, the context FastFlowLM
	// serves it with (0: the list gives none).
	Context int
}

// libraryFile is the file of the models the user added, in the data
// folder.
func libraryFile(cfg *config.Config) string { return filepath.Join(cfg.DataDir, "library.json") }

// home is the user's home folder from the environment NPU Chat runs in.
func (a *App) home() string {
	if h := a.opts.Getenv("HOME"); h != "" {
		return h
	}
	return a.opts.Getenv("USERPROFILE")
}

// LibraryRoots are the folders a model may be added from: the user's
// home, NPU Chat's models folder and FastFlowLM's.
func (a *App) LibraryRoots() library.Roots {
	r := library.Roots{a.home(), a.cfg.ModelsDir}
	if l := a.flmLayout(context.Background()); l != nil && l.ModelsDir != "" {
		r = append(r, l.ModelsDir)
	}
	return r
}

// flmLayout is FastFlowLM's layout, found once (it runs flm version).
func (a *App) flmLayout(ctx context.Context) *fastflowLayout {
	a.layoutOnce.Do(func() {
		in, err := models.NewInstaller(a.cfg, models.Options{FLMRoot: a.cfg.FLMRoot, Getenv: a.opts.Getenv, GOOS: a.opts.GOOS})
		if err != nil {
			return
		}
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		a.layout = in.Layout(ctx)
	})
	return a.layout
}

// loadLibrary registers the models the user added earlier and the
// models FastFlowLM has installed. A remembered file that is gone is
// kept in the file (it may be on a drive not mounted now) and listed
// with a note.
func (a *App) loadLibrary(ctx context.Context) error {
	lib, err := library.Open(libraryFile(a.cfg))
	if err != nil {
		return err
	}
	a.lib = lib
	for _, e := range lib.Entries() {
		if _, err := os.Stat(e.Path); err != nil {
			a.log.Warn("model library: a model's file is gone", "model", e.Name, "path", e.Path, "err", err)
			continue
		}
		a.registerLocal(e.Name, e.Path)
	}
	for _, m := range a.flmInstalled(ctx) {
		if _, err := a.reg.Resolve(m.Name); err == nil && !a.flmCatalogOnly(m.Name) {
			continue // NPU Chat's own (its catalog, installed by it) or a name in use
		}
		a.flmMu.Lock()
		a.flmModels[m.Name] = m
		a.flmMu.Unlock()
		a.reg.Add(service.Entry{Desc: service.ModelDesc{Name: m.Name, Installed: true, Path: m.Dir, Format: "q4nx",
			Family: m.Family, ParameterSize: m.Params, Quantization: m.Quant, Size: library.Size(m.Dir)},
			Aliases: []string{m.Folder}})
	}
	return nil
}

// flmCatalogOnly reports whether name is one of FastFlowLM's own models
// in the catalog that NPU Chat has not installed itself: FastFlowLM's
// install of it (flm pull) is served as FastFlowLM's.
func (a *App) flmCatalogOnly(name string) bool {
	for _, m := range a.cat.FLM {
		if strings.EqualFold(m.Name, name) {
			return !a.describe(m).Installed
		}
	}
	return false
}

// flmInstalled reads FastFlowLM's own model_list.json and returns the
// entries whose folder holds a model.q4nx.
func (a *App) flmInstalled(ctx context.Context) []flmModel {
	l := a.flmLayout(ctx)
	if l == nil || l.SystemList == "" || l.ModelsDir == "" {
		return nil
	}
	b, err := flmfiles.ReadList(l.SystemList)
	if err != nil {
		return nil
	}
	var list struct {
		Models map[string]map[string]struct {
			Name    string `json:"name"`
			Context int    `json:"default_context_length"`
			Details struct {
				Family string `json:"family"`
				Params string `json:"parameter_size"`
				Quant  string `json:"quantization_level"`
			} `json:"details"`
		} `json:"models"`
	}
	if err := json.Unmarshal(b, &list); err != nil {
		a.log.Warn("FastFlowLM's model list", "path", l.SystemList, "err", err)
		return nil
	}
	var out []flmModel
	for fam, tags := range list.Models {
		for tag, e := range tags {
			if e.Name == "" || flmfiles.CheckModelPath(e.Name) != nil {
				continue
			}
			dir := l.ModelDir(e.Name)
			if _, err := os.Stat(filepath.Join(dir, "model.q4nx")); err != nil {
				continue
			}
			out = append(out, flmModel{Name: fam + ":" + tag, Folder: e.Name, Dir: dir, Family: e.Details.Family,
				Params: e.Details.Params, Quant: e.Details.Quant, Context: e.Context})
		}
	}
	slices.SortFunc(out, func(x, y flmModel) int { return strings.Compare(x.Name, y.Name) })
	return out
}

func (a *App) flmModel(name string) (flmModel, bool) {
	a.flmMu.Lock()
	defer a.flmMu.Unlock()
	m, ok := a.flmModels[name]
	return m, ok
}

// registerLocal serves the file or folder at path as name.
func (a *App) registerLocal(name, path string) {
	desc := service.ModelDesc{Name: name, Installed: true, Path: path}
	if fi, err := os.Stat(path); err == nil {
		desc.Size, desc.ModifiedAt, desc.Format = library.Size(path), fi.ModTime(), formatOf(path, fi)
	}
	if info, err := cpu.Describe(path); err == nil {
		desc.Family, desc.ContextLength = info.Family, info.ContextLength
	}
	a.reg.Add(service.Entry{Desc: desc})
	a.local.set(name, path)
}

// Library lists the installed models: NPU Chat's own, FastFlowLM's and
// those the user added, with what can run each and which is loaded.
func (a *App) Library(ctx context.Context) []library.Model {
	st := a.mgr.Status()
	loaded := func(m *library.Model) {
		if st.Model == m.Name && (st.State == service.StateOn || st.State == service.StateLoading) {
			m.Loaded, m.State = true, string(st.State)
		}
	}
	var out []library.Model
	listed := map[string]bool{}
	for _, c := range a.cat.All() {
		d := a.describe(c)
		if !d.Installed {
			continue
		}
		m := library.Model{Name: c.Name, Source: library.SourceNPUChat, Format: d.Format, Size: d.Size, Path: d.Path,
			Remove: "uninstall", Engines: []string{"cpu"}}
		if d.Format == "q4nx" {
			m.Engines = c.Engines()
			if note := c.CPUNote(); note != "" {
				m.Note = note
			}
		}
		loaded(&m)
		out = append(out, m)
		listed[strings.ToLower(c.Name)] = true
	}
	a.flmMu.Lock()
	var fl []flmModel
	for _, f := range a.flmModels {
		if !listed[strings.ToLower(f.Name)] {
			fl = append(fl, f)
		}
	}
	a.flmMu.Unlock()
	slices.SortFunc(fl, func(x, y flmModel) int { return strings.Compare(x.Name, y.Name) })
	for _, f := range fl {
		m := library.Model{Name: f.Name, Source: library.SourceFastFlowLM, Format: "q4nx", Size: library.Size(f.Dir), Path: f.Dir,
			Engines: []string{"npu"}}
		if _, why := catalog.FLMFamilyCPU(f.Family); why == "" {
			m.Engines = append(m.Engines, "cpu")
		} else {
			m.Note = "The CPU cannot run it: " + why + "."
		}
		loaded(&m)
		out = append(out, m)
	}
	// What a remote server serves (the remote engine): listed as such,
	// so that the view never says nothing is installed while one answers.
	for _, d := range a.reg.Models() {
		if d.Format != "remote" || listed[strings.ToLower(d.Name)] {
			continue
		}
		m := library.Model{Name: d.Name, Source: library.SourceRemote, Format: "remote", Engines: []string{"remote"},
			Path: a.cfg.RemoteURL}
		loaded(&m)
		out = append(out, m)
	}
	if a.lib != nil {
		for _, e := range a.lib.Entries() {
			m := library.Model{Name: e.Name, Source: library.SourceAdded, Format: e.Format, Path: e.Path, Remove: "forget",
				Engines: []string{"cpu"}, Size: library.Size(e.Path)}
			if _, err := os.Stat(e.Path); err != nil {
				m.Note = "its file is gone from " + e.Path
			}
			loaded(&m)
			out = append(out, m)
		}
	}
	// A --model path given for this run only.
	a.local.mu.RLock()
	for name, p := range a.local.m {
		if a.lib != nil {
			if _, ok := a.lib.Lookup(name); ok {
				continue
			}
		}
		m := library.Model{Name: name, Source: library.SourceAdded, Path: p, Engines: []string{"cpu"}, Size: library.Size(p),
			Note: "given with --model for this run"}
		if f, err := library.Detect(p); err == nil {
			m.Format = f
		}
		loaded(&m)
		out = append(out, m)
	}
	a.local.mu.RUnlock()
	return out
}

// AddModel adds the GGUF file, Hugging Face folder or FastFlowLM folder
// at path (inside LibraryRoots) to the library, remembered across
// restarts, and returns it. The same path added twice is the same model.
func (a *App) AddModel(ctx context.Context, path string) (library.Model, error) {
	if a.lib == nil {
		return library.Model{}, errors.New("the model library is not open")
	}
	real, err := a.LibraryRoots().Resolve(path, a.home())
	if err != nil {
		return library.Model{}, err
	}
	format, err := library.Detect(real)
	if err != nil {
		return library.Model{}, err
	}
	if format != library.FormatGGUF {
		if _, err := cpu.Describe(real); err != nil {
			return library.Model{}, fmt.Errorf("the CPU engine cannot read %s: %w", real, err)
		}
	}
	for _, e := range a.lib.Entries() {
		if e.Path == real {
			return a.libraryModel(ctx, e.Name)
		}
	}
	name, err := library.NameFor(real, func(n string) bool { _, err := a.reg.Resolve(n); return err == nil })
	if err != nil {
		return library.Model{}, err
	}
	if err := a.lib.Add(library.Entry{Name: name, Path: real, Format: format, Added: a.opts.Now()}); err != nil {
		return library.Model{}, err
	}
	a.registerLocal(name, real)
	a.log.Info("model library: added", "model", name, "path", real, "format", format)
	return a.libraryModel(ctx, name)
}

func (a *App) libraryModel(ctx context.Context, name string) (library.Model, error) {
	for _, m := range a.Library(ctx) {
		if m.Name == name {
			return m, nil
		}
	}
	return library.Model{}, fmt.Errorf("model %q is not in the library", name)
}

// UseModel switches to the model named name (loading it in the
// background, the one loaded before is unloaded) and remembers it as
// the model served by default.
func (a *App) UseModel(ctx context.Context, name string) error {
	served, err := a.reg.Resolve(name)
	if err != nil {
		return err
	}
	if err := a.mgr.Start(served); err != nil {
		return err
	}
	a.mu.Lock()
	a.current = served
	a.mu.Unlock()
	if _, err := a.settings.Update(ctx, func(s *config.Settings) error { s.Model = served; return nil }); err != nil {
		a.log.Warn("remember the model", "model", served, "err", err)
	}
	return nil
}

// RemoveModel removes a model from the library: a model the user added
// is forgotten (its files stay where they are), NPU Chat's own model is
// uninstalled. FastFlowLM's own models are FastFlowLM's to remove. The
// model is unloaded first when it is loaded.
func (a *App) RemoveModel(ctx context.Context, name string) error {
	m, err := a.libraryModel(ctx, name)
	if err != nil {
		return err
	}
	if m.Remove == "" {
		return fmt.Errorf("%s is FastFlowLM's model (in its model list): remove it with FastFlowLM", name)
	}
	if st := a.mgr.Status(); st.Model == name && st.State != service.StateOff {
		if err := a.mgr.Stop(ctx); err != nil {
			return fmt.Errorf("unload %s first: %w", name, err)
		}
	}
	switch m.Remove {
	case "forget":
		if _, err := a.lib.Forget(name); err != nil {
			return err
		}
		a.local.remove(name)
		a.reg.Remove(name)
		a.log.Info("model library: forgot (its files stay)", "model", name, "path", m.Path)
	case "uninstall":
		in, err := models.NewInstaller(a.cfg, models.Options{FLMRoot: a.cfg.FLMRoot, Getenv: a.opts.Getenv, GOOS: a.opts.GOOS})
		if err != nil {
			return err
		}
		if _, err := in.Uninstall(ctx, name); err != nil {
			return err
		}
		a.log.Info("model library: uninstalled", "model", name)
	}
	return nil
}

// flmBackendKinds are the engines of a FastFlowLM model: the NPU, and
// the CPU when the engine knows its architecture.
func flmBackendKinds(m flmModel, eng backend.Kind) []backend.Kind {
	_, why := catalog.FLMFamilyCPU(m.Family)
	cpuOK := why == ""
	switch eng {
	case backend.NPU:
		return []backend.Kind{backend.NPU}
	case backend.CPU:
		if cpuOK {
			return []backend.Kind{backend.CPU}
		}
		return []backend.Kind{backend.NPU}
	}
	if cpuOK {
		return []backend.Kind{backend.NPU, backend.CPU}
	}
	return []backend.Kind{backend.NPU}
}

// newFLMOwnBackend serves one of FastFlowLM's own installed models on
// the NPU, under its own tag and with FastFlowLM's own model list.
func (a *App) newFLMOwnBackend(ctx context.Context, m flmModel) (backend.Backend, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	rep, err := a.checkNPU(ctx, library.Size(m.Dir))
	if err != nil {
		return nil, fmt.Errorf("NPU check: %w", err)
	}
	if !rep.Ready {
		return nil, fmt.Errorf("the NPU is not ready (%s); the NPU check view says how to fix it", strings.TrimSuffix(rep.Summary, "."))
	}
	l := a.flmLayout(ctx)
	if l == nil || l.Exe == "" {
		return nil, errors.New("FastFlowLM is not installed")
	}
	exe := l.Exe
	if a.opts.FLMExecutable != "" {
		exe = a.opts.FLMExecutable
	}
	return npuflm.New(npuflm.Options{
		Executable: exe,
		Model:      m.Name,
		Log:        a.flmLog,
		Info: backend.ModelInfo{Name: m.Name, Family: m.Family, ParameterSize: m.Params, Quantization: m.Quant,
			Format: "q4nx", Path: m.Dir, ContextLength: m.Context},
		Count: a.flmCounter(m.Dir),
		OnState: func(ev npuflm.Event) {
			a.log.Info("FastFlowLM", "state", ev.State, "pid", ev.PID, "attempt", ev.Attempt, "err", ev.Err)
		},
	})
}

// pageLibrary is the app's library as the web server uses it
// (web.Library).
type pageLibrary struct{ a *App }

func (p pageLibrary) List(ctx context.Context) []library.Model { return p.a.Library(ctx) }
func (p pageLibrary) Add(ctx context.Context, path string) (library.Model, error) {
	return p.a.AddModel(ctx, path)
}
func (p pageLibrary) Use(ctx context.Context, name string) error { return p.a.UseModel(ctx, name) }
func (p pageLibrary) Remove(ctx context.Context, name string) error {
	return p.a.RemoveModel(ctx, name)
}
func (p pageLibrary) Browse(dir string) (*library.Listing, error) {
	return p.a.LibraryRoots().List(dir, p.a.home())
}

// Offers is the catalog as the page lists it: NPU Chat's models and
// FastFlowLM's own list, each with what can run it; a model the
// in-process engine cannot compute says so before any download, and
// one that nothing here can run (the NPU only, FastFlowLM not found)
// is not offered for install.
func (a *App) Offers(ctx context.Context) []library.Offer {
	flmFound := false
	if l := a.flmLayout(ctx); l != nil && l.Found() {
		flmFound = true
	}
	var out []library.Offer
	for _, m := range a.cat.All() {
		of := library.Offer{Name: m.Name, Source: library.SourceNPUChat, Description: m.Description, Size: flmSize(m),
			Engines: m.Engines(), CPUNote: m.CPUNote(), Installable: true}
		if m.Origin == catalog.OriginFastFlowLM {
			of.Source = library.SourceFastFlowLM
		}
		_, byFLM := a.flmModel(m.Name)
		of.Installed = byFLM || a.describe(m).Installed
		if of.CPUNote != "" && !flmFound {
			of.Installable = false
			of.CPUNote += " FastFlowLM is not installed on this computer, so nothing here can run it."
		}
		out = append(out, of)
	}
	return out
}

func (p pageLibrary) Offers(ctx context.Context) []library.Offer { return p.a.Offers(ctx) }
