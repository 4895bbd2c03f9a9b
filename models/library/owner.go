package library

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/npuchat/npuchat/config"
	"github.com/npuchat/npuchat/enginekind"
	"github.com/npuchat/npuchat/eventbus"
	"github.com/npuchat/npuchat/models"
	"github.com/npuchat/npuchat/models/catalog"
	"github.com/npuchat/npuchat/models/flm"
)

// ErrUnknownModel is wrapped by Resolve for a name the library does not
// know.
var ErrUnknownModel = errors.New("model not found")

// Entry is one model the library knows, resolved once (when the library
// is scanned, or the model added): where it comes from, where its files
// are, what can run it and the facts an engine needs to run it.
type Entry struct {
	// Name is the served name ("minicpm5:2b"); Aliases are other names
	// clients may use (FastFlowLM's folder name).
	Name    string
	Aliases []string
	// Source is SourceNPUChat (the catalog), SourceFastFlowLM (its own
	// model list), SourceAdded (a file or folder the user added or gave
	// with --model) or SourceRemote (what the remote server serves).
	Source string
	// Installed is true when its files are here (a remote model: the
	// server names it). Missing says why not (how to install it, or
	// where its file was).
	Installed bool
	Missing   error
	// Path is its file or folder (the remote server's address for a
	// remote model); Format is FormatGGUF, FormatHF, FormatFLM or
	// "remote".
	Path, Format string
	Size         int64
	ModifiedAt   time.Time
	// Engines are what can run it, best first.
	Engines []enginekind.Kind
	// Note says why something is missing (the CPU cannot run it, its
	// file is gone, it was given for this run only).
	Note string
	// Remove is what removing it does: "forget" (the entry only),
	// "uninstall" (NPU Chat's own files) or "" (not removable here).
	Remove string
	// What the catalog, the model list or the files say of it.
	Description, Family, ParameterSize, Quantization string
	ContextLength                                    int
	// Port is what the NPU port changed (injected q/k norms, KV heads
	// replicated, RoPE layout): the CPU engine undoes it. Zero for a
	// model that is not NPU Chat's port.
	Port catalog.Port
	// FLM is how FastFlowLM serves it; nil when FastFlowLM cannot.
	FLM *FLMRoute
	// OFLM is how oflm serves it (Options.OFLM); nil when oflm is not
	// found or no prepared folder verifies.
	OFLM *OFLMRoute
	// Catalog is its catalog entry (nil for other sources).
	Catalog *catalog.Model
	// Facts are what the engine read from its files (Options.Describe).
	Facts Facts
	// ForRun marks a model given with --model: served this run, not
	// remembered.
	ForRun bool
}

// FLMRoute is how FastFlowLM serves a model.
type FLMRoute struct {
	// Tag is the name FastFlowLM serves it under (family:tag); Folder
	// its folder under FastFlowLM's models folder.
	Tag, Folder string
	// OwnList is true for a model in FastFlowLM's own model_list.json
	// (served with FastFlowLM's list), false for NPU Chat's (served with
	// the list NPU Chat registers it in).
	OwnList bool
	// Bytes is its size for the NPU check's memory limit (0: unknown).
	Bytes int64
}

// OFLMRoute is how oflm (OpenFlowLM-Next) serves a model: the folder
// its weights were prepared in (models/oflm.Convert).
type OFLMRoute struct {
	// Exe is the oflm found; Dir the prepared folder.
	Exe, Dir string
}

// Facts are what the engine reads from a model's files without loading
// it.
type Facts struct {
	Family        string
	ContextLength int
	// Shape is the engine's reading of the model's size (carried for
	// /api/show; the library does not look inside).
	Shape any
}

// EnginesFor are the engines to try for the model under an engine
// setting, best first: what can run it (Auto), the setting's routes
// that can (enginekind.Kind.Routes: npu is every NPU route, oflm first),
// else what can (a local file on the CPU whatever the setting).
func (e Entry) EnginesFor(setting enginekind.Kind) []enginekind.Kind {
	var out []enginekind.Kind
	for _, k := range setting.Routes() {
		if slices.Contains(e.Engines, k) {
			out = append(out, k)
		}
	}
	if len(out) > 0 {
		return out
	}
	return slices.Clone(e.Engines)
}

// Model is the entry as the page and the tray list it (Loaded and State
// are the caller's to set).
func (e Entry) Model() Model {
	m := Model{Name: e.Name, Source: e.Source, Format: e.Format, Size: e.Size, Path: e.Path, Remove: e.Remove, Note: e.Note}
	for _, k := range e.Engines {
		m.Engines = append(m.Engines, string(k))
	}
	return m
}

// Changed is published on the bus when the library's models or the
// current model change.
type Changed struct {
	// Current is the current model after the change.
	Current string
}

// Options are what the library reads and whom it tells.
type Options struct {
	// Catalog is NPU Chat's catalog (with FastFlowLM's embedded list).
	Catalog *catalog.Catalog
	// Locate finds a catalog model's installed files (models.Locate
	// with the settings in effect).
	Locate func(name string) (*models.Installed, error)
	// FLMLayout is FastFlowLM's layout, nil when FastFlowLM is not
	// found (its own models are then not listed).
	FLMLayout func(ctx context.Context) *flm.Layout
	// OFLM is the oflm route of a catalog model, nil when there is none
	// (oflm not found, or no prepared folder that verifies); nil: never.
	OFLM func(name string) *OFLMRoute
	// Describe reads a model's facts from its files (the CPU engine's
	// reader); an error means the CPU engine cannot read it.
	Describe func(path string) (Facts, error)
	// Store holds the current model (the model setting) and the models
	// the user added (added_models).
	Store *config.Store
	// LegacyFile is the library.json of earlier versions: its models
	// move into the store once, and it is renamed to LegacyFile+".moved".
	LegacyFile string
	// Bus receives Changed.
	Bus *eventbus.Bus
	// Home and ModelsDir are the user's home and NPU Chat's models
	// folder: with FastFlowLM's, the folders models may be added from.
	Home      string
	ModelsDir func() string
	Now       func() time.Time
	Log       *slog.Logger
}

// Library is the one owner of which models exist, where their files
// are, what can run each and which is current. Its methods are safe for
// concurrent use.
type Library struct {
	opts Options

	// edit orders the changes (Rescan, Add, Forget, ...): each builds
	// the next set from the last.
	edit sync.Mutex

	mu      sync.RWMutex // guards the fields below
	entries []Entry
	// extra are the entries no scan finds: --model paths and what the
	// remote server serves.
	extra   []Entry
	current string
}

// New moves the models of a legacy library file into the settings and
// scans the sources. A legacy file that cannot be read or moved is
// logged and left alone for a person to fix.
func New(ctx context.Context, opts Options) *Library {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	if opts.Describe == nil {
		opts.Describe = func(string) (Facts, error) { return Facts{}, errors.New("no reader") }
	}
	if opts.Bus == nil {
		opts.Bus = eventbus.New()
	}
	if opts.ModelsDir == nil {
		opts.ModelsDir = func() string { return "" }
	}
	l := &Library{opts: opts}
	if opts.Store != nil {
		l.current = opts.Store.Get().Model
	}
	if err := l.migrate(ctx); err != nil {
		opts.Log.Warn("model library: moving the models added earlier into the settings", "err", err)
	}
	l.Rescan(ctx)
	return l
}

// Rescan reads every source again (an install, an uninstall, a changed
// models folder, FastFlowLM's list edited) and publishes Changed when
// what it lists changed.
func (l *Library) Rescan(ctx context.Context) {
	l.edit.Lock()
	defer l.edit.Unlock()
	l.rebuild(ctx)
}

// rebuild scans the sources and swaps the set in; l.edit is held.
func (l *Library) rebuild(ctx context.Context) {
	var next []Entry
	put := func(e Entry) {
		for i, o := range next {
			if strings.EqualFold(o.Name, e.Name) {
				next[i] = e
				return
			}
		}
		next = append(next, e)
	}
	if l.opts.Catalog != nil {
		for _, m := range l.opts.Catalog.All() {
			put(l.fromCatalog(m))
		}
	}
	for _, e := range l.fromFLMList(ctx) {
		if i := slices.IndexFunc(next, func(o Entry) bool { return o.matches(e.Name) }); i >= 0 {
			o := next[i]
			if o.Catalog == nil || o.Catalog.Origin != catalog.OriginFastFlowLM || o.Installed {
				continue // NPU Chat's own (its catalog, installed by it) or a name in use
			}
		}
		put(e)
	}
	l.mu.RLock()
	extra := slices.Clone(l.extra)
	l.mu.RUnlock()
	for _, e := range extra {
		if e.Source == SourceRemote && slices.ContainsFunc(next, func(o Entry) bool { return o.matches(e.Name) }) {
			continue // the library's own model of that name
		}
		put(e)
	}
	for _, r := range l.records() {
		if slices.ContainsFunc(extra, func(o Entry) bool { return strings.EqualFold(o.Name, r.Name) }) {
			continue // also given with --model: served from there
		}
		put(l.fromFile(r))
	}
	l.mu.Lock()
	changed := !sameSet(l.entries, next)
	l.entries = next
	cur := l.current
	l.mu.Unlock()
	if changed {
		l.publish(cur)
	}
}

// fromCatalog resolves a catalog model: installed or not, and where;
// oflm, when it serves the model, first among its engines.
func (l *Library) fromCatalog(m *catalog.Model) Entry {
	e := l.fromCatalogFiles(m)
	if l.opts.OFLM != nil {
		if r := l.opts.OFLM(m.Name); r != nil {
			e.OFLM = r
			e.Engines = append([]enginekind.Kind{enginekind.OFLM}, slices.DeleteFunc(e.Engines, func(k enginekind.Kind) bool { return k == enginekind.OFLM })...)
		}
	}
	return e
}

// fromCatalogFiles resolves a catalog model's own files.
func (l *Library) fromCatalogFiles(m *catalog.Model) Entry {
	e := Entry{Name: m.Name, Aliases: []string{m.FLMName()}, Source: SourceNPUChat, Catalog: m, Description: m.Description,
		Family: m.Family, ParameterSize: strings.ToUpper(m.Size), ContextLength: m.FLMContext(),
		FLM: &FLMRoute{Tag: m.FLMTag(), Folder: m.FLMName(), Bytes: m.FLMBytes()}, Remove: "uninstall"}
	for _, k := range m.Engines() {
		e.Engines = append(e.Engines, enginekind.Kind(k))
	}
	e.Note = m.CPUNote()
	if l.opts.Locate == nil {
		e.Missing = fmt.Errorf("%s is not installed", m.Name)
		return e
	}
	inst, err := l.opts.Locate(m.Name)
	if err != nil {
		e.Missing = err
		return e
	}
	e.Installed, e.Path = true, inst.Dir
	switch inst.Format {
	case "flm-q4nx":
		e.Format, e.Quantization, e.Port = FormatFLM, "Q4_1", m.Port
	default:
		// The original model: the CPU engine reads it, FastFlowLM does not.
		e.Format, e.Engines, e.Note = FormatHF, []enginekind.Kind{enginekind.CPU}, ""
	}
	for _, w := range inst.Weights {
		if fi, err := os.Stat(filepath.Join(inst.Dir, w)); err == nil {
			e.Size += fi.Size()
			if fi.ModTime().After(e.ModifiedAt) {
				e.ModifiedAt = fi.ModTime()
			}
		}
	}
	return e
}

// fromFLMList lists the models FastFlowLM's own model_list.json
// registers whose folder holds a model.q4nx.
func (l *Library) fromFLMList(ctx context.Context) []Entry {
	if l.opts.FLMLayout == nil {
		return nil
	}
	lay := l.opts.FLMLayout(ctx)
	if lay == nil || lay.SystemList == "" || lay.ModelsDir == "" {
		return nil
	}
	b, err := readFile(lay.SystemList)
	if err != nil {
		l.opts.Log.Warn("FastFlowLM's model list", "path", lay.SystemList, "err", err)
		return nil
	}
	list, err := flm.ParseList(b)
	if err != nil {
		l.opts.Log.Warn("FastFlowLM's model list", "path", lay.SystemList, "err", err)
		return nil
	}
	var out []Entry
	for _, f := range list {
		if f.Name == "" || flm.CheckModelPath(f.Name) != nil {
			continue
		}
		dir := lay.ModelDir(f.Name)
		fi, err := os.Stat(filepath.Join(dir, "model.q4nx"))
		if err != nil {
			continue
		}
		e := Entry{Name: f.Served(), Aliases: []string{f.Name}, Source: SourceFastFlowLM, Installed: true, Path: dir,
			Format: FormatFLM, Size: Size(dir), ModifiedAt: fi.ModTime(), Engines: []enginekind.Kind{enginekind.NPU},
			Family: f.ArchFamily, ParameterSize: f.ParameterSize, Quantization: f.Quantization, ContextLength: f.Context,
			FLM: &FLMRoute{Tag: f.Served(), Folder: f.Name, OwnList: true, Bytes: Size(dir)}}
		if _, why := catalog.FLMFamilyCPU(f.ArchFamily); why == "" {
			e.Engines = append(e.Engines, enginekind.CPU)
		} else {
			e.Note = "The CPU cannot run it: " + why + "."
		}
		out = append(out, e)
	}
	return out
}

// records are the models the user added, as the settings keep them.
func (l *Library) records() []config.AddedModel {
	if l.opts.Store == nil {
		return nil
	}
	return l.opts.Store.Get().AddedModels
}

// editRecords changes the models the user added in the settings.
func (l *Library) editRecords(ctx context.Context, change func([]config.AddedModel) []config.AddedModel) error {
	if l.opts.Store == nil {
		return errors.New("the model library keeps no settings here")
	}
	_, err := l.opts.Store.Update(ctx, func(s *config.Settings) error {
		s.AddedModels = change(slices.Clone(s.AddedModels))
		return nil
	})
	return err
}

// migrate moves the models of the legacy library.json into the
// settings, once: the file is renamed after, so a model forgotten later
// never comes back from it.
func (l *Library) migrate(ctx context.Context) error {
	if l.opts.LegacyFile == "" || l.opts.Store == nil {
		return nil
	}
	old, err := readLegacy(l.opts.LegacyFile)
	if err != nil || old == nil {
		return err
	}
	err = l.editRecords(ctx, func(ms []config.AddedModel) []config.AddedModel {
		taken := func(n string) bool {
			return slices.ContainsFunc(ms, func(o config.AddedModel) bool { return strings.EqualFold(o.Name, n) })
		}
		for _, m := range old {
			if slices.ContainsFunc(ms, func(o config.AddedModel) bool { return o.Path == m.Path }) {
				continue // moved already
			}
			if taken(m.Name) {
				// Another file has its name (library.json written again by
				// an earlier version): moved under a name of its own.
				base := m.Name
				for i := 2; taken(m.Name); i++ {
					m.Name = fmt.Sprintf("%s-%d", base, i)
				}
			}
			ms = append(ms, m)
		}
		return ms
	})
	if err != nil {
		return fmt.Errorf("the models added earlier stay in %s: move them into the settings: %w", l.opts.LegacyFile, err)
	}
	if err := os.Rename(l.opts.LegacyFile, l.opts.LegacyFile+".moved"); err != nil {
		// The settings hold its models now: a file left here would bring
		// back at the next start a model forgotten meanwhile.
		if rmErr := os.Remove(l.opts.LegacyFile); rmErr != nil {
			return fmt.Errorf("the models of %s are in the settings now, but it could not be renamed (%v) nor removed: remove it, or a model forgotten will come back from it: %w", l.opts.LegacyFile, err, rmErr)
		}
		l.opts.Log.Warn("model library: the old file was removed, not renamed; its models are in the settings", "file", l.opts.LegacyFile, "err", err)
	}
	return nil
}

// fromFile resolves a model the user added earlier. One whose file is
// gone stays listed with a note (it may be on a drive not mounted now)
// and cannot be served.
func (l *Library) fromFile(r config.AddedModel) Entry {
	e := Entry{Name: r.Name, Source: SourceAdded, Path: r.Path, Format: r.Format, Remove: "forget",
		Engines: []enginekind.Kind{enginekind.CPU}}
	fi, err := os.Stat(r.Path)
	if err != nil {
		e.Missing = fmt.Errorf("the file of %s is gone from %s: %w", r.Name, r.Path, err)
		e.Note = "its file is gone from " + r.Path
		return e
	}
	l.describe(&e, fi)
	return e
}

// describe fills a local model's size, time and facts from its files.
func (l *Library) describe(e *Entry, fi os.FileInfo) {
	e.Installed, e.Size, e.ModifiedAt = true, Size(e.Path), fi.ModTime()
	if e.Format == "" {
		e.Format, _ = Detect(e.Path)
	}
	if f, err := l.opts.Describe(e.Path); err == nil {
		e.Facts, e.Family, e.ContextLength = f, f.Family, f.ContextLength
	}
}

// matches reports whether name is the entry's name or an alias.
func (e Entry) matches(name string) bool {
	if strings.EqualFold(e.Name, name) {
		return true
	}
	return slices.ContainsFunc(e.Aliases, func(a string) bool { return a != "" && strings.EqualFold(a, name) })
}

// servable reports whether clients may name the entry (a remembered
// model whose file is gone may not).
func (e Entry) servable() bool { return e.Source != SourceAdded || e.Installed }

// sameSet reports whether two sets list the same models the same way.
func sameSet(a, b []Entry) bool {
	key := func(es []Entry) []string {
		out := make([]string, len(es))
		for i, e := range es {
			out[i] = fmt.Sprint(e.Name, "|", e.Source, "|", e.Installed, "|", e.Path, "|", e.Format, "|", e.Engines, "|", e.Note)
		}
		return out
	}
	return reflect.DeepEqual(key(a), key(b))
}

// publish tells the bus the library changed.
func (l *Library) publish(current string) {
	if l.opts.Bus != nil {
		eventbus.Publish(l.opts.Bus, Changed{Current: current})
	}
}

// Subscribe follows the library's changes (each Changed; a change seen
// late is never lost, since the newest always arrives).
func (l *Library) Subscribe() *eventbus.Subscriber[Changed] {
	return eventbus.Subscribe(l.opts.Bus, eventbus.Options[Changed]{Buffer: 1, Replace: func(_, _ Changed) bool { return true }})
}

// Entries are every model the library knows, in the order the page
// lists them (the catalog's, also those not installed, first).
func (l *Library) Entries() []Entry {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return slices.Clone(l.entries)
}

// Installed are the models listed as here: installed, added (also one
// whose file is gone, with its note) or served by the remote server.
func (l *Library) Installed() []Entry {
	var out []Entry
	for _, e := range l.Entries() {
		if e.Installed || e.Source == SourceAdded {
			out = append(out, e)
		}
	}
	return out
}

// Lookup returns the entry a name resolves to (Resolve).
func (l *Library) Lookup(name string) (Entry, bool) {
	n, err := l.Resolve(name)
	if err != nil {
		return Entry{}, false
	}
	l.mu.RLock()
	defer l.mu.RUnlock()
	for _, e := range l.entries {
		if e.Name == n {
			return e, true
		}
	}
	return Entry{}, false
}

// Fresh returns the entry a name resolves to, as its files are now: a
// local model whose file or folder went away since the last scan (the
// library does not watch the disk) makes the library scan again, so
// that the error says what is missing and the lists show it.
func (l *Library) Fresh(ctx context.Context, name string) (Entry, error) {
	n, err := l.Resolve(name)
	if err != nil {
		return Entry{}, err
	}
	e, err := l.entry(n)
	if err != nil {
		return Entry{}, err
	}
	if !e.Installed || e.Source == SourceRemote || e.Path == "" {
		return e, nil
	}
	if _, err := os.Stat(e.Path); err == nil {
		return e, nil
	}
	l.Rescan(ctx)
	if n, err = l.Resolve(name); err != nil {
		return Entry{}, err
	}
	return l.entry(n)
}

// Resolve maps a requested name to a served name: exact names and
// aliases match case-insensitively, and a name without a tag matches
// ("minicpm5" finds "minicpm5:2b", as "llama3" does in Ollama; also
// "minicpm5:latest"): the family's first installed model, else its
// first.
func (l *Library) Resolve(name string) (string, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	want := strings.TrimSpace(name)
	var names []string
	for _, e := range l.entries {
		if !e.servable() {
			if e.matches(want) && e.Missing != nil {
				// Listed, but its file is gone: say so, not "not found".
				return "", fmt.Errorf("model %q: %w: %w", name, ErrUnknownModel, e.Missing)
			}
			continue
		}
		if e.matches(want) {
			return e.Name, nil
		}
		names = append(names, e.Name)
	}
	base := strings.TrimSuffix(strings.ToLower(want), ":latest")
	if !strings.Contains(base, ":") {
		first := ""
		for _, e := range l.entries {
			if n, _, ok := strings.Cut(strings.ToLower(e.Name), ":"); ok && n == base && e.servable() {
				if first == "" {
					first = e.Name
				}
				if e.Installed {
					return e.Name, nil
				}
			}
		}
		if first != "" {
			return first, nil
		}
	}
	if len(names) == 0 {
		return "", fmt.Errorf("model %q: %w (no models are configured)", name, ErrUnknownModel)
	}
	return "", fmt.Errorf("model %q: %w; available: %s", name, ErrUnknownModel, strings.Join(names, ", "))
}

// Current is the current model: the one served by default, switched to
// last (remembered in the settings), or given with --model for this run.
func (l *Library) Current() string {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.current
}

// SetCurrent makes the model named name current and remembers it in
// the settings; it returns the served name.
func (l *Library) SetCurrent(ctx context.Context, name string) (string, error) {
	served, err := l.Resolve(name)
	if err != nil {
		return "", err
	}
	// Held across both, so that two switches at once leave the settings
	// naming the model the library holds as current.
	l.edit.Lock()
	defer l.edit.Unlock()
	if l.setCurrent(served) && l.opts.Store != nil {
		if _, err := l.opts.Store.Update(ctx, func(s *config.Settings) error { s.Model = served; return nil }); err != nil {
			return served, fmt.Errorf("remember %s as the model: %w", served, err)
		}
	}
	return served, nil
}

// setCurrent changes the current model and publishes the change; it
// reports whether it changed.
func (l *Library) setCurrent(name string) bool {
	l.mu.Lock()
	changed := l.current != name
	l.current = name
	l.mu.Unlock()
	if changed {
		l.publish(name)
	}
	return changed
}

// AddForRun serves the GGUF file, Hugging Face folder or FastFlowLM
// folder at path as name (its base name when empty) for this run, not
// remembered, and makes it current (the --model flag).
func (l *Library) AddForRun(ctx context.Context, path, name string) (Entry, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return Entry{}, fmt.Errorf("--model %s: %w", path, err)
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return Entry{}, fmt.Errorf("--model %s: %w", path, err)
	}
	if name == "" {
		name = strings.TrimSuffix(filepath.Base(abs), filepath.Ext(abs))
	}
	e := Entry{Name: name, Source: SourceAdded, Path: abs, Engines: []enginekind.Kind{enginekind.CPU}, ForRun: true,
		Note: "given with --model for this run"}
	l.describe(&e, fi)
	l.edit.Lock()
	l.mu.Lock()
	l.extra = append(slices.DeleteFunc(l.extra, func(o Entry) bool { return strings.EqualFold(o.Name, name) }), e)
	l.mu.Unlock()
	l.rebuild(ctx)
	l.edit.Unlock()
	l.setCurrent(name)
	return e, nil
}

// SetRemote lists the models the remote server serves (the remote
// engine) at url; a name the library knows already keeps its entry.
func (l *Library) SetRemote(ctx context.Context, url string, names []string) {
	l.edit.Lock()
	defer l.edit.Unlock()
	l.mu.Lock()
	l.extra = slices.DeleteFunc(l.extra, func(o Entry) bool { return o.Source == SourceRemote })
	for _, n := range names {
		if n == "" || slices.ContainsFunc(l.extra, func(o Entry) bool { return strings.EqualFold(o.Name, n) }) {
			continue
		}
		l.extra = append(l.extra, Entry{Name: n, Source: SourceRemote, Installed: true, Format: "remote", Path: url,
			Engines: []enginekind.Kind{enginekind.Remote}})
	}
	l.mu.Unlock()
	l.rebuild(ctx)
}

// Roots are the folders a model may be added from: the user's home,
// NPU Chat's models folder and FastFlowLM's.
func (l *Library) Roots(ctx context.Context) Roots {
	r := Roots{l.opts.Home, l.opts.ModelsDir()}
	if l.opts.FLMLayout != nil {
		if lay := l.opts.FLMLayout(ctx); lay != nil && lay.ModelsDir != "" {
			r = append(r, lay.ModelsDir)
		}
	}
	return r
}

// Browse lists a folder inside Roots for the page's file chooser.
func (l *Library) Browse(ctx context.Context, dir string) (*Listing, error) {
	return l.Roots(ctx).List(dir, l.opts.Home)
}

// Add adds the GGUF file, Hugging Face folder or FastFlowLM folder at
// path (inside Roots) to the library, remembered across restarts, and
// returns it. The same path added twice is the same model.
func (l *Library) Add(ctx context.Context, path string) (Entry, error) {
	real, err := l.Roots(ctx).Resolve(path, l.opts.Home)
	if err != nil {
		return Entry{}, err
	}
	format, err := Detect(real)
	if err != nil {
		return Entry{}, err
	}
	if format != FormatGGUF {
		if _, err := l.opts.Describe(real); err != nil {
			return Entry{}, fmt.Errorf("the CPU engine cannot read %s: %w", real, err)
		}
	}
	l.edit.Lock()
	defer l.edit.Unlock()
	for _, r := range l.records() {
		if r.Path == real {
			return l.entry(r.Name)
		}
	}
	name, err := NameFor(real, func(n string) bool { _, err := l.Resolve(n); return err == nil })
	if err != nil {
		return Entry{}, err
	}
	rec := config.AddedModel{Name: name, Path: real, Format: format, Added: l.opts.Now()}
	if err := l.editRecords(ctx, func(ms []config.AddedModel) []config.AddedModel { return append(ms, rec) }); err != nil {
		return Entry{}, fmt.Errorf("add %s: %w", real, err)
	}
	l.opts.Log.Info("model library: added", "model", name, "path", real, "format", format)
	l.rebuild(ctx)
	return l.entry(name)
}

// entry is the entry named exactly name.
func (l *Library) entry(name string) (Entry, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	for _, e := range l.entries {
		if strings.EqualFold(e.Name, name) {
			return e, nil
		}
	}
	return Entry{}, fmt.Errorf("model %q: %w", name, ErrUnknownModel)
}

// Forget removes a model the user added from the library (its files
// stay where they are). A model of another source is an error that says
// who removes it.
func (l *Library) Forget(ctx context.Context, name string) error {
	l.edit.Lock()
	defer l.edit.Unlock()
	e, err := l.entry(name)
	if err != nil {
		return err
	}
	if e.Remove != "forget" {
		return fmt.Errorf("%s is not a model you added: it cannot be forgotten", name)
	}
	err = l.editRecords(ctx, func(ms []config.AddedModel) []config.AddedModel {
		return slices.DeleteFunc(ms, func(o config.AddedModel) bool { return strings.EqualFold(o.Name, name) })
	})
	if err != nil {
		return fmt.Errorf("forget %s: %w", name, err)
	}
	l.opts.Log.Info("model library: forgot (its files stay)", "model", name, "path", e.Path)
	l.rebuild(ctx)
	return nil
}

// Offers is the catalog as the page lists it: NPU Chat's models and
// FastFlowLM's own list, each with what can run it; a model the
// in-process engine cannot compute says so before any download, and
// one that nothing here can run (the NPU only, FastFlowLM not found)
// is not offered for install.
func (l *Library) Offers(ctx context.Context) []Offer {
	flmFound := false
	if l.opts.FLMLayout != nil {
		if lay := l.opts.FLMLayout(ctx); lay != nil && lay.Found() {
			flmFound = true
		}
	}
	if l.opts.Catalog == nil {
		return nil
	}
	var out []Offer
	for _, m := range l.opts.Catalog.All() {
		of := Offer{Name: m.Name, Source: SourceNPUChat, Description: m.Description, Size: m.FLMBytes(),
			Engines: m.Engines(), CPUNote: m.CPUNote(), Installable: true}
		if m.Origin == catalog.OriginFastFlowLM {
			of.Source = SourceFastFlowLM
		}
		if e, err := l.entry(m.Name); err == nil {
			of.Installed = e.Installed
		}
		if of.CPUNote != "" && !flmFound {
			of.Installable = false
			of.CPUNote += " FastFlowLM is not installed on this computer, so nothing here can run it."
		}
		out = append(out, of)
	}
	return out
}
