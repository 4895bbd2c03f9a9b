package gui

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"path/filepath"
	"reflect"
	"strings"
	"time"

	"fyne.io/fyne/v2"

	"github.com/npuchat/npuchat/enginekind"
	"github.com/npuchat/npuchat/service"
	"github.com/npuchat/npuchat/service/install"
)

// trayHost is the system tray as the controller uses it: fyne's desktop
// app for the menu and icon, fyne.io/systray for the tooltip and the
// left click, which fyne does not offer. Tests use a fake.
type trayHost interface {
	SetSystemTrayMenu(*fyne.Menu)
	SetSystemTrayIcon(fyne.Resource)
	SetTooltip(string)
	SetOnTapped(func())
}

// Menu labels, as the tray shows them (the tray test clicks them by
// label).
const (
	labelStart    = "Start serving"
	labelStop     = "Stop serving"
	labelChat     = "Open chat"
	labelEngine   = "Engine"
	labelInstall  = "Install or update model…"
	labelCheck    = "Check NPU…"
	labelSettings = "Settings…"
	labelLogin    = "Launch at login"
	labelLogs     = "Open logs folder"
	labelAbout    = "About NPU Chat"
	labelQuit     = "Quit"
)

// engineChoices are the engines offered (enginekind's table: remote
// only when it is the setting, since it needs a URL set elsewhere).
func engineChoices(current enginekind.Kind) []enginekind.Choice { return enginekind.Choices(current) }

// controller is the tray: it follows the service through one
// subscription and draws the icon, tooltip, menu and windows from one
// Snapshot. Its fields are touched only on fyne's goroutine (through
// fyne.Do); work that blocks runs in goroutines that report back the
// same way.
type controller struct {
	ctx  context.Context
	fy   fyne.App
	loop *loop
	app  App
	host trayHost
	log  *slog.Logger
	// do runs f on fyne's goroutine (loop.do: fyne.Do while the loop
	// runs, nothing after); notify shows a desktop notification;
	// openURL opens a folder. All are fyne's unless a test swaps them.
	do      func(f func())
	notify  func(Notice)
	openURL func(*url.URL) error

	snap  Snapshot
	view  View
	drawn menuState // what the menu shows now, to skip needless rebuilds
	// menuAt is when the menu was built last; menuDue is set while a
	// rebuild waits for menuEvery to pass.
	menuAt    time.Time
	menuDue   bool
	iconShown Icon
	// tooltipShown is the tooltip set last.
	tooltipShown string
	menu         *fyne.Menu
	// models is the library as read last (followLibrary; nil before the
	// first read); libraryReads counts the reads taken in (setModels).
	models       []modelLine
	libraryReads int
	// addWin is the window of the file dialog "Add a GGUF file…" or
	// "Add a model folder…" opened last, while it is open.
	addWin fyne.Window

	setup    *setupWindow
	settings *settingsWindow
	about    fyne.Window
	// noTray says why the desktop shows no tray icon (nil: it shows
	// one); the setup window then says so and offers Quit.
	noTray error
}

// menuState is what a menu build depends on.
type menuState struct {
	View   View
	Engine enginekind.Kind
	Login  bool
	Models []modelLine // the model submenu (models_menu.go)
	// NoInstall says why Install cannot act on the model served ("":
	// it can).
	NoInstall string
}

func newController(ctx context.Context, l *loop, a App, host trayHost, log *slog.Logger) *controller {
	fy := l.fy
	c := &controller{ctx: ctx, fy: fy, loop: l, app: a, host: host, log: log, do: l.do}
	c.notify = func(n Notice) { fy.SendNotification(fyne.NewNotification(n.Title, n.Body)) }
	c.openURL = fy.OpenURL
	c.snap = Snapshot{Service: a.Status(), Server: a.Server()}
	return c
}

// start installs the left-click handler, draws the tray and starts
// following the service; the returned function stops following.
func (c *controller) start() (stop func()) {
	// The click handler must be set before the tray registers: systray
	// tells the host "this item is only a menu" when it has none.
	c.host.SetOnTapped(func() { c.do(c.tapped) })
	c.redraw()
	events, unsubscribe := c.app.Subscribe()
	server, unwatch := c.app.WatchServer()
	done, stopLibrary, libraryDone := make(chan struct{}), make(chan struct{}), make(chan struct{})
	go func() {
		defer close(libraryDone)
		c.followLibrary(stopLibrary)
	}()
	go func() {
		defer close(done)
		for {
			select {
			case ev, ok := <-events:
				if !ok {
					return
				}
				c.do(func() { c.onEvent(ev) })
			case s, ok := <-server:
				if !ok {
					server = nil
					continue
				}
				c.do(func() { c.onServer(s) })
			case <-c.ctx.Done():
				return
			}
		}
	}()
	return func() {
		unsubscribe()
		unwatch()
		close(stopLibrary)
		<-done
		<-libraryDone
	}
}

// onEvent takes in one service event: notifications first (they need
// the status before it), then the new state everywhere.
func (c *controller) onEvent(ev service.Event) {
	for _, n := range noticesFor(c.snap.Service, ev) {
		c.notify(n)
	}
	c.snap.Service = ev.Status
	if ev.Type == service.EventInstall && ev.Install != nil {
		c.onInstall(*ev.Install)
	}
	c.redraw()
}

// onInstall follows an install from the service's install events, the
// tray's own as the page's (the runner publishes both): its status is
// the snapshot's, and an install the tray saw run is notified when it
// ends, once.
func (c *controller) onInstall(st install.Status) {
	prev := c.snap.Install
	c.snap.Install = &st
	if !st.State.Ended() || prev == nil || prev.State != install.StateRunning || !strings.EqualFold(prev.Model, st.Model) {
		return
	}
	if n, ok := installNotice(st); ok {
		c.notify(n)
	}
}

// installNotice is the notification of an install's end, in its words:
// installed, or failed and why (a cancel, which the user did, is not
// notified).
func installNotice(st install.Status) (Notice, bool) {
	w := st.Words()
	switch st.State {
	case install.StateDone:
		body := "Start serving from the tray icon to chat with it."
		if st.Serve {
			body = "The model is starting."
		}
		return Notice{w.Title, body}, true
	case install.StateFailed:
		return Notice{w.Title, cut(w.Problem+" "+w.Line, 240)}, true
	}
	return Notice{}, false
}

func (c *controller) onServer(s ServerStatus) {
	if s.Err != nil && (c.snap.Server.Err == nil || c.snap.Server.Err.Error() != s.Err.Error()) {
		why, _ := errorWords(s.Err.Error())
		c.notify(Notice{"NPU Chat cannot serve", cut(why, 240)})
	}
	c.snap.Server = s
	c.redraw()
}

// redraw updates the icon, tooltip, menu and open windows from the
// snapshot.
func (c *controller) redraw() {
	c.view = ViewOf(c.snap)
	if c.view.Icon != c.iconShown {
		c.host.SetSystemTrayIcon(TrayIcon(c.view.Icon))
		c.iconShown = c.view.Icon
	}
	if c.view.Tooltip != c.tooltipShown {
		c.host.SetTooltip(c.view.Tooltip) // a D-Bus signal each time on Linux
		c.tooltipShown = c.view.Tooltip
	}
	c.refreshMenu()
	if c.setup != nil {
		c.setup.update(c.snap, c.view)
	}
	if c.settings != nil {
		c.settings.update(c.snap)
	}
}

// refreshMenu rebuilds the menu when what it shows changed (fyne
// rebuilds the whole tray menu on each change).
func (c *controller) refreshMenu() {
	login, err := c.app.LaunchAtLogin()
	if err != nil {
		c.log.Warn("read the launch-at-login entry", "err", err)
	}
	ms := menuState{View: c.view, Engine: c.app.Engine(), Login: login, Models: c.modelLines(), NoInstall: c.notInstallable()}
	ms.View.Tooltip = "" // not in the menu
	if c.menu != nil && reflect.DeepEqual(ms, c.drawn) {
		return
	}
	if wait := menuEvery - time.Since(c.menuAt); c.menu != nil && wordsOnly(ms, c.drawn) && wait > 0 {
		// A progress line moved on (an install's bytes, a load's
		// percent): drawn at most once in menuEvery.
		if !c.menuDue {
			c.menuDue = true
			time.AfterFunc(wait, func() {
				c.do(func() {
					c.menuDue = false
					c.refreshMenu()
				})
			})
		}
		return
	}
	c.drawn, c.menuAt = ms, time.Now()
	// One menu value, its items replaced: fyne keeps the menu it was
	// first given and draws that one again when the tray connects, so a
	// new value would be overwritten by the first one.
	if c.menu == nil {
		c.menu = fyne.NewMenu(AppName)
	}
	c.menu.Items = c.menuItems(ms)
	c.host.SetSystemTrayMenu(c.menu)
}

// menuEvery is the shortest time between two menu rebuilds that change
// only the status lines' words: fyne rebuilds the whole tray menu, item
// by item over D-Bus on Linux, and an install reports ten times a
// second.
const menuEvery = time.Second

// wordsOnly reports whether two menu states differ only in the words of
// the status lines (not in what the menu offers).
func wordsOnly(a, b menuState) bool {
	a.View.Status, a.View.Detail = "", ""
	b.View.Status, b.View.Detail = "", ""
	return reflect.DeepEqual(a, b)
}

// menuItems are the tray menu's items for a state: its sections, one
// under the other, separated. A new section is a function returning its
// items and one line here.
func (c *controller) menuItems(ms menuState) []*fyne.MenuItem {
	return sections(
		c.statusSection(ms.View),
		c.serveSection(ms.View),
		c.engineSection(ms.Engine),
		c.modelsSection(ms.Models),
		c.toolsSection(ms),
		c.appSection(),
	)
}

// sections joins menu sections with a separator between two, skipping
// empty ones.
func sections(parts ...[]*fyne.MenuItem) []*fyne.MenuItem {
	var items []*fyne.MenuItem
	for _, p := range parts {
		if len(p) == 0 {
			continue
		}
		if len(items) > 0 {
			items = append(items, fyne.NewMenuItemSeparator())
		}
		items = append(items, p...)
	}
	return items
}

// infoItem is a line of the menu that says something and does nothing
// (shown disabled).
func infoItem(label string) *fyne.MenuItem {
	it := fyne.NewMenuItem(label, nil)
	it.Disabled = true
	return it
}

// statusSection is the state in words: the status line, and the detail
// under it when there is more to say.
func (c *controller) statusSection(v View) []*fyne.MenuItem {
	items := []*fyne.MenuItem{infoItem(v.Status)}
	if v.Detail != "" {
		items = append(items, infoItem(v.Detail))
	}
	return items
}

// serveSection switches the model on or off and opens the chat.
func (c *controller) serveSection(v View) []*fyne.MenuItem {
	serve := fyne.NewMenuItem(labelStart, c.startServing)
	if v.Serving {
		serve = fyne.NewMenuItem(labelStop, c.stopServing)
	}
	return []*fyne.MenuItem{serve, fyne.NewMenuItem(labelChat, c.openChat)}
}

// The marks of a radio choice in the menu, chosen and not.
const (
	radioOn  = "●"
	radioOff = "○"
)

// radioLabel is a menu item's label as one choice of several: "● CPU"
// chosen, "○ CPU" not. A menu item has no radio kind in fyne (only
// Checked), fyne makes a checkbox of a checked item only, and
// fyne.io/systray offers only checkmark toggles over dbusmenu, so with
// check marks the choice showed as one ticked item among plain ones, not
// as a choice. The marks draw it as a radio group on every desktop.
func radioLabel(label string, chosen bool) string {
	if chosen {
		return radioOn + " " + label
	}
	return radioOff + " " + label
}

// engineSection is the engine setting as a radio group under its
// heading: choosing one saves it (the app reloads a model that is on).
func (c *controller) engineSection(current enginekind.Kind) []*fyne.MenuItem {
	items := []*fyne.MenuItem{infoItem(labelEngine)}
	for _, e := range engineChoices(current) {
		kind := e.Kind
		items = append(items, fyne.NewMenuItem(radioLabel(e.Label, current == kind), func() { c.setEngine(kind) }))
	}
	return items
}

// toolsSection installs, checks and sets NPU Chat up.
func (c *controller) toolsSection(ms menuState) []*fyne.MenuItem {
	install := fyne.NewMenuItem(labelInstall, c.startInstall)
	install.Disabled = ms.View.Installing || ms.NoInstall != ""
	login := fyne.NewMenuItem(labelLogin, func() { c.setLaunchAtLogin(!ms.Login) })
	login.Checked = ms.Login
	return []*fyne.MenuItem{
		install,
		fyne.NewMenuItem(labelCheck, c.showSetup),
		fyne.NewMenuItem(labelSettings, c.showSettings),
		login,
		fyne.NewMenuItem(labelLogs, c.openLogs),
	}
}

// appSection is About and Quit, last.
func (c *controller) appSection() []*fyne.MenuItem {
	// IsQuit: fyne adds a Quit of its own to a tray menu without one.
	quit := fyne.NewMenuItem(labelQuit, c.quit)
	quit.IsQuit = true
	return []*fyne.MenuItem{fyne.NewMenuItem(labelAbout, c.showAbout), quit}
}

// tapped is the left click: start serving when the model is off (or
// failed), open the chat when it is on or loading.
func (c *controller) tapped() {
	if c.view.Serving {
		c.openChat()
		return
	}
	c.startServing()
}

func (c *controller) startServing() {
	go func() {
		if err := c.app.StartModel(); err != nil {
			c.fail("Could not start the model", err)
		}
	}()
}

func (c *controller) stopServing() {
	go func() {
		ctx, cancel := context.WithTimeout(c.ctx, 30*time.Second)
		defer cancel()
		if err := c.app.StopModel(ctx); err != nil {
			c.fail("Could not stop the model", err)
		}
	}()
}

func (c *controller) openChat() {
	go func() {
		if err := c.app.OpenChat(); err != nil {
			c.fail("Could not open the chat page", fmt.Errorf("open %s in a browser: %w", c.app.ChatURL(), err))
		}
	}()
}

// openSettings opens the chat page's Settings view (the MCP servers).
func (c *controller) openSettings() {
	go func() {
		if err := c.app.OpenSettings(); err != nil {
			c.fail("Could not open the chat page's Settings", fmt.Errorf("open %s in a browser: %w", c.app.ChatURL(), err))
		}
	}()
}

func (c *controller) openLogs() {
	dir, err := filepath.Abs(c.app.LogDir())
	if err == nil {
		err = c.openURL(folderURL(dir))
	}
	if err != nil {
		c.fail("Could not open the logs folder", fmt.Errorf("%s: %w", c.app.LogDir(), err))
	}
}

// folderURL is the file URL of an absolute folder: file:///home/u/logs,
// and on Windows file:///C:/Users/u/logs (a drive path needs the third
// slash, or "C:" reads as a host name).
func folderURL(abs string) *url.URL {
	p := filepath.ToSlash(abs)
	if !strings.HasPrefix(p, "/") {
		p = "/" + p
	}
	return &url.URL{Scheme: "file", Path: p}
}

// setEngine saves the engine setting; the app reloads a model that is
// on with the new engine.
func (c *controller) setEngine(kind enginekind.Kind) {
	go func() {
		ctx, cancel := context.WithTimeout(c.ctx, time.Minute)
		defer cancel()
		if err := c.app.SetEngine(ctx, kind); err != nil {
			c.fail("Could not change the engine", err)
		}
		c.do(c.redraw)
	}()
}

func (c *controller) setLaunchAtLogin(on bool) {
	if err := c.app.SetLaunchAtLogin(on); err != nil {
		c.fail("Could not change launch at login", err)
	}
	c.redraw()
}

// startInstall starts installing or updating the model; the service's
// install events show its progress and end (onInstall), in the status
// line and the setup window. It does nothing while an install runs.
func (c *controller) startInstall() {
	if st := c.snap.Install; st != nil && st.State == install.StateRunning {
		return
	}
	if why := c.notInstallable(); why != "" {
		c.notify(Notice{"Nothing to install", why})
		return
	}
	go func() {
		if err := c.app.StartInstall(); err != nil {
			c.fail("Could not install "+c.app.Model(), err)
		}
	}()
}

// fail tells the user that an action failed (from any goroutine): what
// failed and why in its sentence; the whole error goes to the log.
func (c *controller) fail(what string, err error) {
	c.log.Warn(strings.ToLower(what), "err", err)
	why, _ := errorWords(err.Error())
	c.do(func() { c.notify(Notice{what, cut(why, 240)}) })
}

func (c *controller) showSetup() {
	if c.setup == nil {
		c.setup = newSetupWindow(c)
	}
	c.setup.update(c.snap, c.view)
	c.setup.show()
}

// trayMissing is the start on a desktop that shows no tray icon (GNOME
// without the AppIndicator extension): the icon would be the only way
// to reach NPU Chat, so the setup window opens even at login, saying
// why and with Quit, a notification says where NPU Chat serves and how
// to get a tray, and the log records it.
func (c *controller) trayMissing(why error) {
	c.noTray = why
	c.log.Warn("no tray icon on this desktop: the setup window stays open instead", "err", why, "url", c.app.ChatURL())
	c.notify(noTrayNotice(c.app.ChatURL()))
	c.showSetup()
}

// noTrayNotice is the notification of a start without a tray icon.
func noTrayNotice(url string) Notice {
	return Notice{"NPU Chat has no tray icon here",
		"NPU Chat is running at " + url + ". This desktop shows no tray icons: on GNOME, install and enable the AppIndicator extension (Debian: gnome-shell-extension-appindicator)."}
}

func (c *controller) showSettings() {
	if c.settings == nil {
		c.settings = newSettingsWindow(c)
	}
	c.settings.reload(c.snap)
	c.settings.win.Show()
	c.settings.win.RequestFocus()
}

func (c *controller) showAbout() {
	if c.about == nil {
		c.about = newAboutWindow(c)
	}
	c.about.Show()
	c.about.RequestFocus()
}

// quit ends the tray: Run returns and its caller shuts the app down.
// A running install stops with the app (its downloads are kept).
func (c *controller) quit() {
	c.loop.quit()
}
