package gui

import (
	"context"
	"reflect"
	"strings"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/dialog"
	"fyne.io/fyne/v2/storage"

	"github.com/npuchat/npuchat/enginekind"
	"github.com/npuchat/npuchat/models/library"
	"github.com/npuchat/npuchat/service"
)

// ModelLibrary is what the tray's model section needs of the app: the
// installed models, switching (loaded without a restart) and adding a
// model file the user already has. The assembled app has it; an App
// without it shows no model section.
type ModelLibrary interface {
	Library(ctx context.Context) []library.Model
	UseModel(ctx context.Context, name string) error
	AddModel(ctx context.Context, path string) (library.Model, error)
	LibraryRoots() library.Roots
	// WatchLibrary delivers a value each time the library changes (a
	// model added, forgotten, installed or uninstalled, the current
	// model switched), on the page, in the tray or anywhere else.
	WatchLibrary() (changes <-chan library.Changed, stop func())
}

// modelLine is one model as the menu shows it, for menuState (the menu
// is rebuilt when one changes).
type modelLine struct {
	Name, Engines string
	// Source is where the model comes from (library.SourceAdded, …) and
	// Path its file or folder.
	Source, Path string
	Loaded       bool
}

// labelModels is the model submenu; labelAddFile and labelAddFolder add
// a model the user already has.
const (
	labelModels    = "Model"
	labelAddFile   = "Add a GGUF file…"
	labelAddFolder = "Add a model folder…"
)

// followLibrary reads the library now and after each change it
// announces (WatchLibrary), in its own goroutine (reading it stats the
// models' files: never on fyne's goroutine), and shows what it read in
// the menu. It ends with the controller's context or when stop is
// closed.
func (c *controller) followLibrary(stop <-chan struct{}) {
	lib, ok := c.app.(ModelLibrary)
	if !ok {
		return
	}
	// Subscribed before the first read: a change while reading is read
	// again.
	changes, unwatch := lib.WatchLibrary()
	defer unwatch()
	for {
		lines := readModelLines(c.ctx, lib)
		c.do(func() { c.setModels(lines) })
		select {
		case _, ok := <-changes:
			if !ok {
				return
			}
		case <-stop:
			return
		case <-c.ctx.Done():
			return
		}
	}
}

// readModelLines reads the library for the menu.
func readModelLines(ctx context.Context, lib ModelLibrary) []modelLine {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out := []modelLine{}
	for _, m := range lib.Library(ctx) {
		out = append(out, modelLine{Name: m.Name, Engines: enginesWords(m.Engines), Source: m.Source, Path: m.Path})
	}
	return out
}

// setModels takes in the library as read (on fyne's goroutine); the
// menu is rebuilt only when what it lists changed.
func (c *controller) setModels(lines []modelLine) {
	c.libraryReads++
	if reflect.DeepEqual(lines, c.models) {
		return
	}
	c.models = lines
	c.refreshMenu()
	if c.setup != nil {
		c.setup.update(c.snap, c.view)
	}
}

// modelLines are the library's models for the menu, the loaded one
// marked from the snapshot (the state the status line shows), so the
// mark moves with the service's events, not a library read later.
func (c *controller) modelLines() []modelLine {
	if c.models == nil {
		return nil
	}
	st := c.snap.Service
	out := make([]modelLine, len(c.models))
	for i, l := range c.models {
		l.Loaded = st.Model == l.Name && (st.State == service.StateOn || st.State == service.StateLoading)
		out[i] = l
	}
	return out
}

// notInstallable says why Install cannot act on the model served (""
// when it can): a model the user added, FastFlowLM's own or a remote
// server's is not NPU Chat's to install or update; NPU Chat's own, or
// one the library does not list (not installed yet), is.
func (c *controller) notInstallable() string {
	name := c.app.Model()
	for _, l := range c.models {
		if !strings.EqualFold(l.Name, name) {
			continue
		}
		switch l.Source {
		case library.SourceAdded:
			return name + " is a model you added (" + l.Path + "): there is nothing to install or update."
		case library.SourceFastFlowLM:
			return name + " is FastFlowLM's own model: FastFlowLM installs and updates it."
		case library.SourceRemote:
			return name + " is served by the remote server: there is nothing to install here."
		}
	}
	return ""
}

// enginesWords says what can run a model, as the page does ("NPU and
// CPU", "CPU only").
func enginesWords(e []string) string {
	var names []string
	for _, k := range e {
		names = append(names, enginekind.Kind(k).Name())
	}
	switch len(names) {
	case 0:
		return "nothing here runs it"
	case 1:
		return names[0] + " only"
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}

// modelsSection is the tray menu's model submenu: each installed model
// (the loaded one marked; choosing another loads it) and the two ways
// to add a model the user already has.
func (c *controller) modelsSection(lines []modelLine) []*fyne.MenuItem {
	lib, ok := c.app.(ModelLibrary)
	if !ok {
		return nil
	}
	var items []*fyne.MenuItem
	if lines == nil {
		items = append(items, infoItem("Reading the models…"))
	}
	for _, l := range lines {
		name := l.Name
		it := fyne.NewMenuItem(radioLabel(l.Name+" ("+l.Engines+")", l.Loaded), func() { c.useModel(lib, name) })
		items = append(items, it)
	}
	if lines != nil && len(lines) == 0 {
		items = append(items, infoItem("No model installed"))
	}
	items = append(items, fyne.NewMenuItemSeparator(),
		fyne.NewMenuItem(labelAddFile, func() { c.addModel(lib, false) }),
		fyne.NewMenuItem(labelAddFolder, func() { c.addModel(lib, true) }))
	m := fyne.NewMenuItem(labelModels, nil)
	m.ChildMenu = fyne.NewMenu(labelModels, items...)
	return []*fyne.MenuItem{m}
}

// useModel switches to a model; its loading shows in the status line.
func (c *controller) useModel(lib ModelLibrary, name string) {
	go func() {
		ctx, cancel := context.WithTimeout(c.ctx, time.Minute)
		defer cancel()
		if err := lib.UseModel(ctx, name); err != nil {
			c.fail("Could not switch to "+name, err)
		}
		c.do(c.redraw)
	}()
}

// addModel opens fyne's file (or folder) dialog at the home folder;
// the chosen GGUF file or model folder is added (the app refuses one
// outside the home and models folders) and switched to.
func (c *controller) addModel(lib ModelLibrary, folder bool) {
	w := c.fy.NewWindow("Add a model")
	w.SetIcon(AppIcon())
	w.Resize(addSize)
	c.addWin = w
	done := func(path string) {
		w.Close()
		if c.addWin == w {
			c.addWin = nil
		}
		if path == "" {
			return
		}
		go func() {
			ctx, cancel := context.WithTimeout(c.ctx, time.Minute)
			defer cancel()
			m, err := lib.AddModel(ctx, path)
			if err != nil {
				c.fail("Could not add the model", err)
				return
			}
			c.useModel(lib, m.Name)
		}()
	}
	// A list, not fyne's default grid: whole names (the grid cuts the
	// extension, and a model folder's files are told by theirs).
	var d interface {
		SetLocation(fyne.ListableURI)
		SetView(dialog.ViewLayout)
		SetTitleText(string)
		SetConfirmText(string)
		Resize(fyne.Size)
		Show()
	}
	if folder {
		fd := dialog.NewFolderOpen(func(u fyne.ListableURI, err error) {
			if err != nil || u == nil {
				done("")
				return
			}
			done(u.Path())
		}, w)
		d = fd
	} else {
		fd := dialog.NewFileOpen(func(r fyne.URIReadCloser, err error) {
			if err != nil || r == nil {
				done("")
				return
			}
			r.Close()
			done(r.URI().Path())
		}, w)
		fd.SetFilter(storage.NewExtensionFileFilter([]string{".gguf", ".GGUF"}))
		d = fd
	}
	if roots := lib.LibraryRoots(); len(roots) > 0 && strings.TrimSpace(roots[0]) != "" {
		if l, err := storage.ListerForURI(storage.NewFileURI(roots[0])); err == nil {
			d.SetLocation(l)
		}
	}
	d.SetView(dialog.ListView)
	d.SetConfirmText("Add")
	if folder {
		d.SetTitleText("Add a model folder: Hugging Face (config.json) or FastFlowLM (model.q4nx)")
	} else {
		d.SetTitleText("Add a GGUF file")
	}
	w.Show()
	d.Show()
	d.Resize(addSize)
}

// addSize is the size of the window of the add dialogs, and of the
// dialog in it.
var addSize = fyne.NewSize(760, 520)
