package app

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/npuchat/npuchat/models"
	flmfiles "github.com/npuchat/npuchat/models/flm"
	"github.com/npuchat/npuchat/models/library"
	"github.com/npuchat/npuchat/service"
	"github.com/npuchat/npuchat/service/backend"
	"github.com/npuchat/npuchat/service/cpu"
)

// openLibrary opens the model library over the catalog, FastFlowLM's
// list, the files the user added and the settings.
func (a *App) openLibrary(ctx context.Context) *library.Library {
	return library.New(ctx, library.Options{
		Catalog:    a.cat,
		Locate:     func(name string) (*models.Installed, error) { return models.Locate(a.installConfig(), name) },
		FLMLayout:  a.flmLayout,
		Describe:   describe,
		Store:      a.settings,
		LegacyFile: filepath.Join(a.cfg.DataDir, "library.json"),
		Bus:        a.bus,
		Home:       a.home(),
		ModelsDir:  func() string { return a.cfg.ModelsDirFor(a.settings.Get()) },
		Now:        a.opts.Now,
		Log:        a.log,
	})
}

// describe reads a model's facts with the CPU engine's reader.
func describe(path string) (library.Facts, error) {
	info, err := cpu.Describe(path)
	if err != nil {
		return library.Facts{}, err
	}
	return library.Facts{Family: info.Family, ContextLength: info.ContextLength, Shape: info.Shape}, nil
}

// home is the user's home folder from the environment NPU Chat runs in.
func (a *App) home() string {
	if h := a.opts.Getenv("HOME"); h != "" {
		return h
	}
	return a.opts.Getenv("USERPROFILE")
}

// flmLayout is FastFlowLM's layout, found once (it runs flm version).
func (a *App) flmLayout(ctx context.Context) *flmfiles.Layout {
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

// ModelLibrary is the one owner of the models: which exist, where,
// what can run each and which is current.
func (a *App) ModelLibrary() *library.Library { return a.lib }

// WatchLibrary follows the library's changes (a model added, forgotten,
// installed, uninstalled; the current model switched): each arrives as
// a value on the channel; stop ends the subscription.
func (a *App) WatchLibrary() (changes <-chan library.Changed, stop func()) {
	s := a.lib.Subscribe()
	return s.Events(), s.Close
}

// LibraryRoots are the folders a model may be added from: the user's
// home, NPU Chat's models folder and FastFlowLM's.
func (a *App) LibraryRoots() library.Roots { return a.lib.Roots(context.Background()) }

// Library lists the installed models: NPU Chat's own, FastFlowLM's,
// the remote server's and those the user added, with what can run each
// and which is loaded.
func (a *App) Library(ctx context.Context) []library.Model {
	st := a.mgr.Status()
	var out []library.Model
	for _, e := range a.lib.Installed() {
		m := e.Model()
		if st.Model == m.Name && (st.State == service.StateOn || st.State == service.StateLoading) {
			m.Loaded, m.State = true, string(st.State)
		}
		out = append(out, m)
	}
	return out
}

// AddModel adds the GGUF file, Hugging Face folder or FastFlowLM folder
// at path (inside LibraryRoots) to the library, remembered across
// restarts, and returns it. The same path added twice is the same model.
func (a *App) AddModel(ctx context.Context, path string) (library.Model, error) {
	e, err := a.lib.Add(ctx, path)
	if err != nil {
		return library.Model{}, err
	}
	return a.libraryModel(ctx, e.Name)
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
	served, err := a.resolve(name)
	if err != nil {
		return err
	}
	if err := a.mgr.Start(served); err != nil {
		return err
	}
	if _, err := a.lib.SetCurrent(ctx, served); err != nil {
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
	switch {
	case m.Remove == "" && m.Source == library.SourceAdded:
		return fmt.Errorf("%s was given with --model for this run: it is not in the library, so there is nothing to remove", name)
	case m.Remove == "" && m.Source == library.SourceRemote:
		return fmt.Errorf("%s is served by the remote server: there is nothing to remove here", name)
	case m.Remove == "":
		return fmt.Errorf("%s is FastFlowLM's model (in its model list): remove it with FastFlowLM", name)
	}
	if st := a.mgr.Status(); st.Model == name && st.State != service.StateOff {
		if err := a.mgr.Stop(ctx); err != nil {
			return fmt.Errorf("unload %s first: %w", name, err)
		}
	}
	switch m.Remove {
	case "forget":
		return a.lib.Forget(ctx, name)
	case "uninstall":
		in, err := models.NewInstaller(a.cfg, models.Options{FLMRoot: a.cfg.FLMRoot, Getenv: a.opts.Getenv, GOOS: a.opts.GOOS})
		if err != nil {
			return err
		}
		_, err = in.Uninstall(ctx, name)
		a.lib.Rescan(ctx)
		if err != nil {
			return err
		}
		a.log.Info("model library: uninstalled", "model", name)
	}
	return nil
}

// Offers is the catalog as the page lists it (library.Library.Offers).
func (a *App) Offers(ctx context.Context) []library.Offer { return a.lib.Offers(ctx) }

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
	return p.a.lib.Browse(context.Background(), dir)
}
func (p pageLibrary) Offers(ctx context.Context) []library.Offer { return p.a.Offers(ctx) }

// resolve is the library's Resolve with the service's ErrUnknownModel
// (the web layer answers 404 for it).
func (a *App) resolve(name string) (string, error) {
	served, err := a.lib.Resolve(name)
	if err != nil {
		return "", unknownModel{err}
	}
	return served, nil
}

// unknownModel marks the library's unknown-name error as the service's
// ErrUnknownModel, keeping its message (which lists the models).
type unknownModel struct{ err error }

func (e unknownModel) Error() string   { return e.err.Error() }
func (e unknownModel) Unwrap() []error { return []error{e.err, service.ErrUnknownModel} }

// models lists the library's models as the service describes them
// (/v1/models, /api/tags, /api/show).
func (a *App) models() []service.ModelDesc {
	var out []service.ModelDesc
	for _, e := range a.lib.Entries() {
		if e.Source == library.SourceAdded && !e.Installed {
			continue // its file is gone: not served
		}
		d := service.ModelDesc{Name: e.Name, Description: e.Description, Family: e.Family, ParameterSize: e.ParameterSize,
			Quantization: e.Quantization, Format: e.Format, Size: e.Size, ModifiedAt: e.ModifiedAt, Installed: e.Installed,
			ContextLength: e.ContextLength, Path: e.Path}
		if e.Source == library.SourceRemote {
			d.Path = "" // the server's address, not a file
		}
		if sh, ok := e.Facts.Shape.(backend.Shape); ok {
			d.Shape = sh
		}
		out = append(out, d)
	}
	return out
}
