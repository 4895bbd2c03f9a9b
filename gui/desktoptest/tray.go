package desktoptest

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/godbus/dbus/v5"
	"github.com/godbus/dbus/v5/introspect"
	"github.com/godbus/dbus/v5/prop"
)

// D-Bus names of the StatusNotifierItem protocol (freedesktop's
// StatusNotifierItem spec, as KDE names it) and of dbusmenu.
const (
	watcherName = "org.kde.StatusNotifierWatcher"
	watcherPath = "/StatusNotifierWatcher"
	itemIface   = "org.kde.StatusNotifierItem"
	menuIface   = "com.canonical.dbusmenu"
	notifyName  = "org.freedesktop.Notifications"
	notifyPath  = "/org/freedesktop/Notifications"
	propsIface  = "org.freedesktop.DBus.Properties"
	hostBusName = "org.kde.StatusNotifierHost-desktoptest"
)

// Shell is the desktop shell's side of the session bus: the
// StatusNotifierWatcher that tray items register with, a host (a panel)
// that reads and clicks them, and a notification server.
type Shell struct {
	t    testing.TB
	conn *dbus.Conn

	mu      sync.Mutex
	items   []ItemRef
	notices []Notification
	changed chan struct{} // closed and replaced on each registration or notification
}

// ItemRef is a registered tray item: a bus name and an object path.
type ItemRef struct {
	Bus  string
	Path dbus.ObjectPath
}

// Notification is one org.freedesktop.Notifications.Notify call.
type Notification struct {
	App, Summary, Body string
}

// StartShell connects to the bus at addr, owns the watcher's and the
// notification server's names, and registers itself as a host.
func StartShell(t testing.TB, addr string) *Shell {
	t.Helper()
	return startShell(t, addr, true)
}

// StartShellWithoutTray is a desktop that shows no tray icons (stock
// GNOME, without the AppIndicator extension): a notification server,
// but no StatusNotifierWatcher, so a tray item has nothing to register
// with.
func StartShellWithoutTray(t testing.TB, addr string) *Shell {
	t.Helper()
	return startShell(t, addr, false)
}

func startShell(t testing.TB, addr string, tray bool) *Shell {
	t.Helper()
	conn, err := dbus.Connect(addr)
	if err != nil {
		t.Fatalf("connect to the test bus: %v", err)
	}
	t.Cleanup(func() { conn.Close() })
	s := &Shell{t: t, conn: conn, changed: make(chan struct{})}
	names := []string{notifyName}
	if tray {
		s.exportWatcher()
		names = append(names, watcherName, hostBusName)
	}
	if err := conn.Export(&notifier{s: s}, notifyPath, notifyName); err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		reply, err := conn.RequestName(name, dbus.NameFlagDoNotQueue)
		if err != nil || reply != dbus.RequestNameReplyPrimaryOwner {
			t.Fatalf("own %s on the test bus: reply %v, %v", name, reply, err)
		}
	}
	return s
}

// exportWatcher puts the StatusNotifierWatcher on the shell's connection.
func (s *Shell) exportWatcher() {
	t, conn := s.t, s.conn
	w := &watcher{s: s}
	if err := conn.Export(w, watcherPath, watcherName); err != nil {
		t.Fatal(err)
	}
	props, err := prop.Export(conn, watcherPath, map[string]map[string]*prop.Prop{watcherName: {
		"RegisteredStatusNotifierItems":  {Value: []string{}, Emit: prop.EmitTrue},
		"IsStatusNotifierHostRegistered": {Value: true, Emit: prop.EmitTrue},
		"ProtocolVersion":                {Value: int32(0), Emit: prop.EmitTrue},
	}})
	if err != nil {
		t.Fatal(err)
	}
	w.props = props
	node := &introspect.Node{Name: watcherPath, Interfaces: []introspect.Interface{introspect.IntrospectData, prop.IntrospectData,
		{Name: watcherName, Methods: introspect.Methods(w)}}}
	if err := conn.Export(introspect.NewIntrospectable(node), watcherPath, "org.freedesktop.DBus.Introspectable"); err != nil {
		t.Fatal(err)
	}
}

// watcher is org.kde.StatusNotifierWatcher.
type watcher struct {
	s     *Shell
	props *prop.Properties
}

// RegisterStatusNotifierItem is called by an item with its object path
// (fyne.io/systray) or its bus name (others).
func (w *watcher) RegisterStatusNotifierItem(sender dbus.Sender, service string) *dbus.Error {
	ref := ItemRef{Bus: string(sender), Path: "/StatusNotifierItem"}
	if strings.HasPrefix(service, "/") {
		ref.Path = dbus.ObjectPath(service)
	} else if service != "" {
		ref.Bus = service
	}
	w.s.mu.Lock()
	w.s.items = append(w.s.items, ref)
	var names []string
	for _, it := range w.s.items {
		names = append(names, it.Bus+string(it.Path))
	}
	w.s.notifyLocked()
	w.s.mu.Unlock()
	w.props.SetMust(watcherName, "RegisteredStatusNotifierItems", names)
	w.s.conn.Emit(watcherPath, watcherName+".StatusNotifierItemRegistered", ref.Bus+string(ref.Path))
	return nil
}

// RegisterStatusNotifierHost is how panels announce themselves.
func (w *watcher) RegisterStatusNotifierHost(service string) *dbus.Error { return nil }

// notifier is org.freedesktop.Notifications.
type notifier struct{ s *Shell }

func (n *notifier) Notify(app string, replaces uint32, icon, summary, body string, actions []string,
	hints map[string]dbus.Variant, timeout int32) (uint32, *dbus.Error) {
	n.s.mu.Lock()
	defer n.s.mu.Unlock()
	n.s.notices = append(n.s.notices, Notification{App: app, Summary: summary, Body: body})
	n.s.notifyLocked()
	return uint32(len(n.s.notices)), nil
}

func (n *notifier) GetCapabilities() ([]string, *dbus.Error) { return []string{"body"}, nil }

func (n *notifier) GetServerInformation() (string, string, string, string, *dbus.Error) {
	return "desktoptest", "npuchat", "1", "1.2", nil
}

func (n *notifier) CloseNotification(id uint32) *dbus.Error { return nil }

func (s *Shell) notifyLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// Notifications returns what was notified so far.
func (s *Shell) Notifications() []Notification {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Notification(nil), s.notices...)
}

// WaitItem waits for a tray item to register and returns it.
func (s *Shell) WaitItem(timeout time.Duration) (*Item, error) {
	deadline := time.After(timeout)
	for {
		s.mu.Lock()
		if len(s.items) > 0 {
			ref := s.items[len(s.items)-1]
			s.mu.Unlock()
			return &Item{s: s, Ref: ref}, nil
		}
		ch := s.changed
		s.mu.Unlock()
		select {
		case <-ch:
		case <-deadline:
			return nil, fmt.Errorf("no tray item registered with the StatusNotifierWatcher within %v", timeout)
		}
	}
}

// Item is a tray item as a panel sees it.
type Item struct {
	s   *Shell
	Ref ItemRef
}

func (it *Item) obj() dbus.BusObject { return it.s.conn.Object(it.Ref.Bus, it.Ref.Path) }

// Prop reads one of the item's properties.
func (it *Item) Prop(name string) (dbus.Variant, error) {
	var v dbus.Variant
	err := it.obj().Call(propsIface+".Get", 0, itemIface, name).Store(&v)
	if err != nil {
		return v, fmt.Errorf("read the item's %s: %w", name, err)
	}
	return v, nil
}

// Tooltip is the item's tooltip title.
func (it *Item) Tooltip() (string, error) {
	v, err := it.Prop("ToolTip")
	if err != nil {
		return "", err
	}
	// (s a(iiay) s s): icon name, icon pixmaps, title, description.
	var tt struct {
		Icon   string
		Pixmap []struct {
			W, H int32
			Data []byte
		}
		Title, Text string
	}
	if err := dbus.Store([]any{v.Value()}, &tt); err != nil {
		return "", fmt.Errorf("the item's ToolTip %v: %w", v, err)
	}
	return tt.Title + tt.Text, nil
}

// Pixmap is the item's icon (the largest IconPixmap) as ARGB32 bytes in
// network order, with its size.
func (it *Item) Pixmap() (w, h int, argb []byte, err error) {
	v, err := it.Prop("IconPixmap")
	if err != nil {
		return 0, 0, nil, err
	}
	var px []struct {
		W, H int32
		Data []byte
	}
	if err := dbus.Store([]any{v.Value()}, &px); err != nil {
		return 0, 0, nil, fmt.Errorf("the item's IconPixmap: %w", err)
	}
	for _, p := range px {
		if int(p.W) > w {
			w, h, argb = int(p.W), int(p.H), p.Data
		}
	}
	if w == 0 {
		return 0, 0, nil, errors.New("the item has no IconPixmap")
	}
	return w, h, argb, nil
}

// Activate is a left click on the icon at (x, y).
func (it *Item) Activate() error {
	if err := it.obj().Call(itemIface+".Activate", 0, int32(10), int32(10)).Err; err != nil {
		return fmt.Errorf("Activate: %w", err)
	}
	return nil
}

// MenuNode is one entry of a dbusmenu tree.
type MenuNode struct {
	ID       int32
	Label    string
	Type     string // "separator" or "" (standard)
	Enabled  bool
	Visible  bool
	Checked  bool // toggle-state 1
	Toggle   string
	Children []*MenuNode
}

// Menu reads the item's whole menu with GetLayout.
func (it *Item) Menu() (*MenuNode, error) {
	v, err := it.Prop("Menu")
	if err != nil {
		return nil, err
	}
	path, ok := v.Value().(dbus.ObjectPath)
	if !ok {
		return nil, fmt.Errorf("the item's Menu is %v, not an object path", v)
	}
	call := it.s.conn.Object(it.Ref.Bus, path).Call(menuIface+".GetLayout", 0, int32(0), int32(-1), []string{})
	if call.Err != nil {
		return nil, fmt.Errorf("GetLayout: %w", call.Err)
	}
	if len(call.Body) != 2 {
		return nil, fmt.Errorf("GetLayout answered %d values", len(call.Body))
	}
	// Body[0] is the layout's revision.
	layout, ok := call.Body[1].([]any)
	if !ok {
		return nil, fmt.Errorf("GetLayout's layout is %T", call.Body[1])
	}
	return parseNode(layout)
}

// parseNode reads a (ia{sv}av) layout entry.
func parseNode(v []any) (*MenuNode, error) {
	if len(v) != 3 {
		return nil, fmt.Errorf("menu entry of %d fields", len(v))
	}
	id, ok1 := v[0].(int32)
	props, ok2 := v[1].(map[string]dbus.Variant)
	kids, ok3 := v[2].([]dbus.Variant)
	if !ok1 || !ok2 || !ok3 {
		return nil, fmt.Errorf("menu entry %T %T %T", v[0], v[1], v[2])
	}
	n := &MenuNode{ID: id, Enabled: true, Visible: true}
	if p, ok := props["label"]; ok {
		n.Label, _ = p.Value().(string)
	}
	if p, ok := props["type"]; ok {
		n.Type, _ = p.Value().(string)
	}
	if p, ok := props["enabled"]; ok {
		n.Enabled, _ = p.Value().(bool)
	}
	if p, ok := props["visible"]; ok {
		n.Visible, _ = p.Value().(bool)
	}
	if p, ok := props["toggle-type"]; ok {
		n.Toggle, _ = p.Value().(string)
	}
	if p, ok := props["toggle-state"]; ok {
		s, _ := p.Value().(int32)
		n.Checked = s == 1
	}
	for _, k := range kids {
		kv, ok := k.Value().([]any)
		if !ok {
			return nil, fmt.Errorf("menu child %T", k.Value())
		}
		c, err := parseNode(kv)
		if err != nil {
			return nil, err
		}
		n.Children = append(n.Children, c)
	}
	return n, nil
}

// Find returns the first visible entry with this label, depth first.
func (n *MenuNode) Find(label string) *MenuNode {
	for _, c := range n.Children {
		if c.Visible && c.Label == label {
			return c
		}
		if f := c.Find(label); f != nil {
			return f
		}
	}
	return nil
}

// Lines renders the menu as text, one entry a line: "[x]" before a
// checked entry, "(disabled)" after a disabled one, submenus indented.
func (n *MenuNode) Lines() []string {
	var out []string
	var walk func(m *MenuNode, indent string)
	walk = func(m *MenuNode, indent string) {
		for _, c := range m.Children {
			if !c.Visible {
				continue
			}
			l := indent + c.Label
			switch {
			case c.Type == "separator":
				l = indent + "---"
			case c.Checked:
				l = indent + "[x] " + c.Label
			}
			if !c.Enabled && c.Type != "separator" {
				l += " (disabled)"
			}
			out = append(out, l)
			walk(c, indent+"  ")
		}
	}
	walk(n, "")
	return out
}

// Click sends the "clicked" event for a menu entry, as a panel does when
// the user picks it.
func (it *Item) Click(n *MenuNode) error {
	v, err := it.Prop("Menu")
	if err != nil {
		return err
	}
	path, _ := v.Value().(dbus.ObjectPath)
	call := it.s.conn.Object(it.Ref.Bus, path).Call(menuIface+".Event", 0, n.ID, "clicked", dbus.MakeVariant(""), uint32(time.Now().Unix()))
	if call.Err != nil {
		return fmt.Errorf("click %q: %w", n.Label, call.Err)
	}
	return nil
}
