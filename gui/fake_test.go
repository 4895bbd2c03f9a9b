package gui

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"fyne.io/fyne/v2"

	"github.com/npuchat/npuchat/app"
	"github.com/npuchat/npuchat/config"
	"github.com/npuchat/npuchat/enginekind"
	"github.com/npuchat/npuchat/eventbus"
	"github.com/npuchat/npuchat/models/library"
	"github.com/npuchat/npuchat/npu/check"
	"github.com/npuchat/npuchat/service"
	"github.com/npuchat/npuchat/service/backend"
	"github.com/npuchat/npuchat/service/backend/fake"
	"github.com/npuchat/npuchat/service/install"
	"github.com/npuchat/npuchat/service/servicetest"
)

// The assembled app is what the tray drives, in its own types (no
// converter between them in cmd/).
var _ App = (*app.App)(nil)

// fakeApp is an App around a real service.Manager whose backends are
// fakes: the state machine, its events and the NPU-to-CPU fallback are
// the service's own, only the engines and the settings are pretend.
type fakeApp struct {
	mgr *service.Manager

	mu       sync.Mutex
	engine   enginekind.Kind
	atStart  bool
	login    bool
	loginErr error
	npuErr   error // the NPU backend's load error; nil: the NPU works
	report   *check.Report
	checkErr error
	// install is StartInstall: it starts an install that publishes its
	// statuses as the service's install events, as the app's runner does.
	install   func(publish func(install.Status)) error
	installs  int // StartInstall calls
	server    ServerStatus
	serverCh  chan ServerStatus
	setEngine []enginekind.Kind
	engineErr error // SetEngine's error (a settings file it cannot write)
	checks    int
	chats     int // OpenChat calls
	settings  int // OpenSettings calls

	// changes fires at each change of the fields above through a method
	// (what a test's eventually may be waiting for).
	changes pulse

	// store is a real settings store over a temporary settings file
	// (SettingsStore): the window and "the page" (a test calling
	// UpdateSettings) share it, as in the app.
	store *config.Store
}

func (f *fakeApp) Settings() config.Settings { return f.store.Get() }
func (f *fakeApp) SubscribeSettings() (<-chan config.Settings, func()) {
	return f.store.Subscribe()
}
func (f *fakeApp) UpdateSettings(ctx context.Context, change func(*config.Settings) error) (config.Settings, error) {
	return f.store.Update(ctx, change)
}

func newFakeApp(cleanup func(func())) *fakeApp {
	f := &fakeApp{engine: "auto", serverCh: make(chan ServerStatus, 4),
		server: ServerStatus{Listening: true, URL: "http://127.0.0.1:8001/"}}
	dir, err := os.MkdirTemp("", "npuchat-gui-settings-")
	if err != nil {
		panic(err)
	}
	f.store = config.NewStore(&config.Config{SettingsPath: filepath.Join(dir, "settings.json"), Settings: config.Settings{Addr: config.DefaultAddr}})
	cleanup(func() { f.store.Close(); os.RemoveAll(dir) })
	reg := &servicetest.Registry{}
	reg.Add(servicetest.Entry{Desc: service.ModelDesc{Name: "minicpm5:2b", Installed: true}})
	f.mgr = service.New(service.Options{
		Resolve:   reg.Resolve,
		Models:    reg.Models,
		KeepAlive: time.Hour,
		Engines: func(string) []enginekind.Kind {
			switch f.Engine() {
			case "npu":
				return []enginekind.Kind{enginekind.NPU}
			case "cpu":
				return []enginekind.Kind{enginekind.CPU}
			}
			return []enginekind.Kind{enginekind.NPU, enginekind.CPU}
		},
		NewBackend: func(ctx context.Context, model string, kind enginekind.Kind) (backend.Backend, error) {
			f.mu.Lock()
			npuErr := f.npuErr
			f.mu.Unlock()
			opts := fake.Options{Name: model, Kind: kind, LoadDelay: 20 * time.Millisecond, Reply: func(*backend.Request) string { return "hello" }}
			if kind == "npu" {
				opts.LoadErr = npuErr
			}
			return fake.New(opts), nil
		},
	})
	// The tray starts with the model off (app.ModelOff).
	f.mgr.Stop(context.Background())
	cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		f.mgr.Close(ctx)
	})
	return f
}

func (f *fakeApp) Status() service.Status                    { return f.mgr.Status() }
func (f *fakeApp) Subscribe() (<-chan service.Event, func()) { return f.mgr.Subscribe() }
func (f *fakeApp) StartModel() error                         { return f.mgr.Start("minicpm5:2b") }
func (f *fakeApp) StopModel(ctx context.Context) error       { return f.mgr.Stop(ctx) }
func (f *fakeApp) Model() string                             { return "minicpm5:2b" }
func (f *fakeApp) ChatURL() string                           { return "http://127.0.0.1:8001/" }
func (f *fakeApp) OpenChat() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.chats++
	f.changes.fire()
	return nil
}
func (f *fakeApp) OpenSettings() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.settings++
	f.changes.fire()
	return nil
}
func (f *fakeApp) LogDir() string  { return "/tmp/npuchat-logs" }
func (f *fakeApp) Version() string { return "1.2.3" }

func (f *fakeApp) Engine() enginekind.Kind {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.engine
}

func (f *fakeApp) SetEngine(ctx context.Context, kind enginekind.Kind) error {
	f.mu.Lock()
	f.setEngine = append(f.setEngine, kind)
	defer f.changes.fire()
	if kind == "remote" {
		f.mu.Unlock()
		return errors.New("the remote engine needs --remote-url")
	}
	if f.engineErr != nil {
		f.mu.Unlock()
		return f.engineErr
	}
	f.engine = kind
	f.mu.Unlock()
	return nil
}

func (f *fakeApp) ServeAtStart() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.atStart
}

func (f *fakeApp) SetServeAtStart(on bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.atStart = on
	f.changes.fire()
	return nil
}

// LaunchAtLogin plays the real entry: tests change f.login behind the
// tray's back, as a user deleting the autostart file would.
func (f *fakeApp) LaunchAtLogin() (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.login, nil
}

func (f *fakeApp) SetLaunchAtLogin(on bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.loginErr != nil {
		return f.loginErr
	}
	f.login = on
	f.changes.fire()
	return nil
}

func (f *fakeApp) CheckNPU(ctx context.Context) (*check.Report, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.checks++
	f.changes.fire()
	return f.report, f.checkErr
}

func (f *fakeApp) StartInstall() error {
	f.mu.Lock()
	start := f.install
	f.installs++
	f.changes.fire()
	f.mu.Unlock()
	if start == nil {
		return errors.New("no install in this test")
	}
	return start(func(st install.Status) {
		if st.Model == "" {
			st.Model = f.Model()
		}
		f.mgr.Publish(service.Event{Type: service.EventInstall, Message: st.Message, Install: &st})
	})
}

func (f *fakeApp) Server() ServerStatus {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.server
}

func (f *fakeApp) WatchServer() (<-chan ServerStatus, func()) {
	return f.serverCh, func() {}
}

func (f *fakeApp) setServer(s ServerStatus) {
	f.mu.Lock()
	f.server = s
	f.changes.fire()
	f.mu.Unlock()
	f.serverCh <- s
}

// notReady is a report of a machine whose driver is missing.
func notReady() *check.Report {
	return &check.Report{
		Ready: false, OS: "linux",
		Summary: "The amdxdna driver is not loaded.",
		NPU:     &check.NPU{PCIID: "1022:17f0 rev 11", Name: "Strix / Strix Halo", Generation: "XDNA 2"},
		Checks: []check.Check{
			{ID: "L1", Title: "NPU device", Status: check.Pass, Found: "1022:17f0 rev 11"},
			{ID: "L3", Title: "amdxdna driver loaded", Status: check.Fail, Found: "no amdxdna module in /sys/module",
				Need: "the amdxdna kernel driver (Linux 6.14 or newer)", Fix: "sudo modprobe amdxdna; on older kernels install amdxdna-dkms"},
			{ID: "L9", Title: "Memory lock limit", Status: check.Warn, Found: "memlock 8 MiB",
				Need: "unlimited, or at least the model's size", Fix: "add '* - memlock unlimited' to /etc/security/limits.conf and log in again"},
		},
	}
}

// fakeHost records what the controller puts in the tray.
type fakeHost struct {
	mu      sync.Mutex
	menu    *fyne.Menu
	first   *fyne.Menu // the first menu given: fyne redraws that one when the tray connects
	menus   int
	icon    fyne.Resource
	tooltip string
	tap     func()
	changes pulse // fired at each Set call
}

// next returns a channel that is closed when the controller next sets
// anything on the host.
func (h *fakeHost) next() <-chan struct{} { return h.changes.next() }

// changedLocked wakes the waiters of next. h.mu must be held.
func (h *fakeHost) changedLocked() { h.changes.fire() }

// pulse tells waiters that something changed: take next before looking,
// look, then wait on it, and no change is missed. The zero pulse is
// ready to use.
type pulse struct {
	mu sync.Mutex
	ch chan struct{} // closed at the next fire (made by next)
}

// next returns a channel that is closed at the next fire.
func (p *pulse) next() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ch == nil {
		p.ch = make(chan struct{})
	}
	return p.ch
}

// fire wakes every waiter of next.
func (p *pulse) fire() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ch != nil {
		close(p.ch)
		p.ch = nil
	}
}

func (h *fakeHost) SetSystemTrayMenu(m *fyne.Menu) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.first == nil {
		h.first = m
	}
	h.menu = m
	h.menus++
	h.changedLocked()
}

func (h *fakeHost) SetSystemTrayIcon(r fyne.Resource) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.icon = r
	h.changedLocked()
}

func (h *fakeHost) SetTooltip(s string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.tooltip = s
	h.changedLocked()
}

func (h *fakeHost) SetOnTapped(f func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.tap = f
	h.changedLocked()
}

// uiThread runs functions one at a time on one goroutine, as fyne's
// main loop does; the controller's do goes through it, and so does
// every look the test takes, so nothing races.
// After the test, what is still sent is dropped, as fyne does after Quit.
type uiThread struct {
	q       chan uiCall
	mu      sync.Mutex
	closed  bool
	changes pulse // fired after each function run, but a look
}

// uiCall is one function for the UI goroutine; a look changes nothing
// (a test's condition), so it wakes no one.
type uiCall struct {
	f    func()
	look bool
}

func newUIThread(t *testing.T) *uiThread {
	u := &uiThread{q: make(chan uiCall, 256)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for c := range u.q {
			c.f()
			if !c.look {
				u.changes.fire()
			}
		}
	}()
	t.Cleanup(func() {
		u.mu.Lock()
		u.closed = true
		close(u.q)
		u.mu.Unlock()
		<-done
	})
	return u
}

func (u *uiThread) do(f func()) { u.send(uiCall{f: f}) }

func (u *uiThread) send(c uiCall) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if !u.closed {
		u.q <- c
	}
}

// wait runs f on the UI goroutine and returns when it ran.
func (u *uiThread) wait(f func()) {
	done := make(chan struct{})
	u.do(func() { f(); close(done) })
	<-done
}

// look is wait for a function that only reads (it wakes no one).
func (u *uiThread) look(f func()) {
	done := make(chan struct{})
	u.send(uiCall{f: func() { f(); close(done) }, look: true})
	<-done
}

// harness is a controller on a fake app and host, with recorded
// notifications and opened URLs.
type harness struct {
	t       *testing.T
	app     *fakeApp
	host    *fakeHost
	ui      *uiThread
	c       *controller
	mu      sync.Mutex
	notes   []Notice
	opened  []string
	stopped bool
	changes pulse // fired at each notice and opened URL
}

func newHarness(t *testing.T, fy fyne.App, f *fakeApp) *harness {
	return harnessFor(t, fy, f, f)
}

// harnessFor is newHarness with the tray driving a, which wraps f (a
// libraryApp, say).
func harnessFor(t *testing.T, fy fyne.App, f *fakeApp, a App) *harness {
	h := &harness{t: t, app: f, host: &fakeHost{}, ui: newUIThread(t)}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	h.c = newController(ctx, newLoop(fy), a, h.host, testLogger(t))
	h.c.do = h.ui.do
	h.c.notify = func(n Notice) {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.notes = append(h.notes, n)
		h.changes.fire()
	}
	h.c.openURL = func(u *url.URL) error {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.opened = append(h.opened, u.String())
		h.changes.fire()
		return nil
	}
	var stop func()
	h.ui.wait(func() { stop = h.c.start() })
	t.Cleanup(stop)
	return h
}

// menu returns the labels of the tray menu now, with "[x]" before a
// checked item and "(off)" after a disabled one, and its submenus
// indented.
func (h *harness) menu() []string {
	var out []string
	h.ui.wait(func() {
		h.host.mu.Lock()
		defer h.host.mu.Unlock()
		out = labels(h.host.menu, "")
	})
	return out
}

func labels(m *fyne.Menu, indent string) []string {
	var out []string
	for _, it := range m.Items {
		if it.IsSeparator {
			out = append(out, indent+"---")
			continue
		}
		l := indent + it.Label
		if it.Checked {
			l = indent + "[x] " + it.Label
		}
		if it.Disabled {
			l += " (off)"
		}
		out = append(out, l)
		if it.ChildMenu != nil {
			out = append(out, labels(it.ChildMenu, indent+"  ")...)
		}
	}
	return out
}

// click runs the action of the menu item with this label (in a
// submenu too), as the tray does on the UI goroutine.
func (h *harness) click(label string) {
	h.t.Helper()
	var action func()
	h.ui.wait(func() { action = findItem(h.host.menu, label) })
	if action == nil {
		h.t.Fatalf("no enabled menu item %q in %q", label, h.menu())
	}
	h.ui.wait(action)
}

func findItem(m *fyne.Menu, label string) func() {
	for _, it := range m.Items {
		if it.Label == label && !it.Disabled && it.Action != nil {
			return it.Action
		}
		if it.ChildMenu != nil {
			if a := findItem(it.ChildMenu, label); a != nil {
				return a
			}
		}
	}
	return nil
}

// tap is a left click on the icon (systray calls it from D-Bus's goroutine).
func (h *harness) tap() {
	h.host.mu.Lock()
	tap := h.host.tap
	h.host.mu.Unlock()
	tap()
}

// eventually waits until cond (run on the UI goroutine) holds, looking
// again at each change that could make it hold: a function run on the
// UI goroutine (the controller's, or a test's action), a change of the
// fake app, a notice or an opened URL. A minute bounds a failure (long,
// for a loaded two-core CI machine); nothing is timed.
func (h *harness) eventually(what string, cond func() bool) {
	h.t.Helper()
	bound := time.After(time.Minute)
	for {
		ui, app, seen := h.ui.changes.next(), h.app.changes.next(), h.changes.next()
		var ok bool
		h.ui.look(func() { ok = cond() })
		if ok {
			return
		}
		select {
		case <-ui:
		case <-app:
		case <-seen:
		case <-bound:
			h.t.Fatalf("awaiting %s for a minute; menu %q, tooltip %q, notices %+v", what, h.menu(), h.tooltip(), h.notices())
		}
	}
}

func (h *harness) status() string {
	var s string
	h.ui.wait(func() { s = h.c.view.Status })
	return s
}

func (h *harness) tooltip() string {
	h.host.mu.Lock()
	defer h.host.mu.Unlock()
	return h.host.tooltip
}

func (h *harness) iconName() string {
	h.host.mu.Lock()
	defer h.host.mu.Unlock()
	if h.host.icon == nil {
		return ""
	}
	return h.host.icon.Name()
}

func (h *harness) notices() []Notice {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]Notice(nil), h.notes...)
}

func (h *harness) openedURLs() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.opened...)
}

func (h *harness) String() string { return fmt.Sprintf("menu %q", h.menu()) }

// fakeLibrary is a ModelLibrary that records what the tray asks of it:
// the models added (their paths, as fyne's dialogs give them) and the
// models switched to.
type fakeLibrary struct {
	mu     sync.Mutex
	models []library.Model
	added  []string
	used   []string
	roots  library.Roots
	bus    *eventbus.Bus // made at the first WatchLibrary or change
}

// changes is the bus the fake announces its changes on.
func (l *fakeLibrary) changes() *eventbus.Bus {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.bus == nil {
		l.bus = eventbus.New()
	}
	return l.bus
}

func (l *fakeLibrary) WatchLibrary() (<-chan library.Changed, func()) {
	s := eventbus.Subscribe(l.changes(), eventbus.Options[library.Changed]{})
	return s.Events(), s.Close
}

// set changes the models as change says and announces it, as the
// library does for a change on the page.
func (l *fakeLibrary) set(change func([]library.Model) []library.Model) {
	l.mu.Lock()
	l.models = change(l.models)
	l.mu.Unlock()
	eventbus.Publish(l.changes(), library.Changed{})
}

func (l *fakeLibrary) Library(ctx context.Context) []library.Model {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.models)
}

func (l *fakeLibrary) UseModel(ctx context.Context, name string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.used = append(l.used, name)
	return nil
}

func (l *fakeLibrary) AddModel(ctx context.Context, path string) (library.Model, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.added = append(l.added, path)
	m := library.Model{Name: strings.TrimSuffix(filepath.Base(path), filepath.Ext(path)), Path: path, Engines: []string{"cpu"}}
	l.mu.Unlock()
	l.set(func(ms []library.Model) []library.Model { return append(ms, m) })
	l.mu.Lock()
	return m, nil
}

func (l *fakeLibrary) LibraryRoots() library.Roots { return l.roots }

// calls returns what was added and switched to so far.
func (l *fakeLibrary) calls() (added, used []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.added), slices.Clone(l.used)
}

// libraryApp is the fake app with a model library (the tray then shows
// its Model submenu).
type libraryApp struct {
	*fakeApp
	*fakeLibrary
}
