package autostart

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestForOSFindsTheAutostartFolder(t *testing.T) {
	cases := []struct {
		name string
		env  map[string]string
		want string
	}{
		{"XDG_CONFIG_HOME wins", map[string]string{"XDG_CONFIG_HOME": "/x/cfg", "HOME": "/home/u"}, "/x/cfg/autostart"},
		{"else ~/.config", map[string]string{"HOME": "/home/u"}, "/home/u/.config/autostart"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := ForOS("linux", func(k string) string { return c.env[k] })
			x, ok := e.(*XDG)
			if !ok || x.Dir != c.want {
				t.Fatalf("got %#v, want XDG in %s", e, c.want)
			}
		})
	}
	if err := ForOS("linux", func(string) string { return "" }).Enable("/bin/npuchat"); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("no HOME: %v", err)
	}
	if _, ok := ForOS("windows", func(string) string { return "" }).(*Registry); !ok {
		t.Fatal("windows is not the registry entry")
	}
}

// TestXDGEntryIsReadFromTheFile: Enabled follows the real file, also when
// someone else changes or removes it.
func TestXDGEntryIsReadFromTheFile(t *testing.T) {
	cfg := t.TempDir()
	e := ForOS("linux", func(k string) string { return map[string]string{"XDG_CONFIG_HOME": cfg}[k] })
	x := e.(*XDG)
	enabled := func() bool {
		t.Helper()
		on, err := e.Enabled()
		if err != nil {
			t.Fatal(err)
		}
		return on
	}
	if enabled() {
		t.Fatal("on before Enable")
	}
	exe := filepath.Join(cfg, "opt", "NPU Chat", "bin", "npuchat") // the program must be there (TryExec)
	os.MkdirAll(filepath.Dir(exe), 0o755)
	os.WriteFile(exe, []byte("#!/bin/sh\n"), 0o755)
	if err := e.Enable(exe); err != nil {
		t.Fatal(err)
	}
	if !enabled() {
		t.Fatal("off after Enable")
	}
	b, err := os.ReadFile(filepath.Join(cfg, "autostart", "npuchat.desktop"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"[Desktop Entry]\n", "Type=Application\n", "Name=NPU Chat\n", `Exec="` + exe + `" --hidden` + "\n"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("desktop file lacks %q:\n%s", want, b)
		}
	}
	// A desktop's settings switch an entry off by editing it.
	for _, off := range []string{"Hidden=true", "X-GNOME-Autostart-enabled=false"} {
		os.WriteFile(x.Path(), []byte(strings.Replace(string(b), "X-GNOME-Autostart-enabled=true", off, 1)), 0o644)
		if enabled() {
			t.Errorf("on with %s", off)
		}
	}
	os.WriteFile(x.Path(), []byte("not a desktop file"), 0o644)
	if enabled() {
		t.Error("on with a file that is not a desktop entry")
	}
	e.Enable(exe)
	os.Remove(x.Path()) // removed by hand
	if enabled() {
		t.Error("on after the file was removed")
	}
	if err := e.Disable(); err != nil {
		t.Errorf("Disable of an absent entry: %v", err)
	}
	e.Enable(exe)
	if err := e.Disable(); err != nil || enabled() {
		t.Errorf("Disable: %v, enabled %v", err, enabled())
	}
	if ents, _ := os.ReadDir(x.Dir); len(ents) != 0 {
		t.Errorf("left in the autostart folder: %v", ents)
	}
}

func TestXDGUnreadableEntryIsAnError(t *testing.T) {
	dir := t.TempDir()
	x := &XDG{Dir: dir}
	os.Mkdir(x.Path(), 0o755) // a folder where the file should be
	if _, err := x.Enabled(); err == nil || !strings.Contains(err.Error(), "npuchat.desktop") {
		t.Fatalf("Enabled: %v", err)
	}
}

func TestExecValueQuotesAsTheSpecSays(t *testing.T) {
	cases := []struct{ exe, want string }{
		{"/usr/bin/npuchat", `"/usr/bin/npuchat" --hidden`},
		{"/opt/NPU Chat/npuchat", `"/opt/NPU Chat/npuchat" --hidden`},
		// Inside quotes ", `, $ and \ take a backslash; then the string
		// escape doubles every backslash.
		{`/home/u/$x/"q"/npuchat`, `"/home/u/\\$x/\\"q\\"/npuchat" --hidden`},
		{"/a`b/npuchat", "\"/a\\\\`b/npuchat\" --hidden"},
		{`/a\b/npuchat`, `"/a\\\\b/npuchat" --hidden`},
		// A literal % is %% (a lone one starts a field code like %f).
		{"/home/u/100%/npuchat", `"/home/u/100%%/npuchat" --hidden`},
	}
	for _, c := range cases {
		if got := ExecValue(c.exe); got != c.want {
			t.Errorf("ExecValue(%q) = %s, want %s", c.exe, got, c.want)
		}
	}
}

// fakeRunKey is the Run key as a map; a missing value is reported as the
// registry reports it (an error that is os.ErrNotExist).
type fakeRunKey struct {
	values map[string]string
	closed int
}

func (k *fakeRunKey) GetStringValue(name string) (string, uint32, error) {
	v, ok := k.values[name]
	if !ok {
		return "", 0, fmt.Errorf("registry: %w", os.ErrNotExist)
	}
	return v, 1 /* REG_SZ */, nil
}
func (k *fakeRunKey) SetStringValue(name, value string) error { k.values[name] = value; return nil }
func (k *fakeRunKey) DeleteValue(name string) error {
	if _, ok := k.values[name]; !ok {
		return fmt.Errorf("registry: %w", os.ErrNotExist)
	}
	delete(k.values, name)
	return nil
}
func (k *fakeRunKey) Close() error { k.closed++; return nil }

func TestRegistryEntryIsTheRunValue(t *testing.T) {
	key := &fakeRunKey{values: map[string]string{"OneDrive": `"C:\OneDrive.exe" /background`}}
	e := &Registry{Open: func() (RunKey, error) { return key, nil }}
	if on, err := e.Enabled(); on || err != nil {
		t.Fatalf("before Enable: %v %v", on, err)
	}
	exe := `C:\Program Files\NPU Chat\npuchat.exe`
	if err := e.Enable(exe); err != nil {
		t.Fatal(err)
	}
	// The MSI writes this same name and data.
	if got := key.values["NPU Chat"]; got != `"C:\Program Files\NPU Chat\npuchat.exe" --hidden` {
		t.Fatalf("Run value %q", got)
	}
	if on, err := e.Enabled(); !on || err != nil {
		t.Fatalf("after Enable: %v %v", on, err)
	}
	delete(key.values, "NPU Chat") // removed with regedit or Task Manager
	if on, _ := e.Enabled(); on {
		t.Fatal("on after the value was removed")
	}
	if err := e.Disable(); err != nil {
		t.Fatalf("Disable of an absent value: %v", err)
	}
	e.Enable(exe)
	if err := e.Disable(); err != nil {
		t.Fatal(err)
	}
	if _, ok := key.values["NPU Chat"]; ok || key.values["OneDrive"] == "" {
		t.Fatalf("values after Disable: %v", key.values)
	}
	if key.closed != 7 {
		t.Errorf("key opened 7 times, closed %d", key.closed)
	}
	denied := &Registry{Open: func() (RunKey, error) { return nil, os.ErrPermission }}
	if _, err := denied.Enabled(); !errors.Is(err, os.ErrPermission) || !strings.Contains(err.Error(), RunKeyPath) {
		t.Fatalf("Enabled with the key closed to us: %v", err)
	}
}

func TestCommandExe(t *testing.T) {
	for in, want := range map[string]string{
		`"C:\Program Files\NPU Chat\npuchat.exe" --hidden`: `C:\Program Files\NPU Chat\npuchat.exe`,
		`C:\npuchat.exe --hidden`:                          `C:\npuchat.exe`,
		``:                                                 ``,
	} {
		if got := commandExe(in); got != want {
			t.Errorf("commandExe(%q) = %q, want %q", in, got, want)
		}
	}
}

// fakeApprovedKey is StartupApproved\Run as a map of binary values.
type fakeApprovedKey struct {
	values map[string][]byte
	closed int
}

func (k *fakeApprovedKey) GetBinaryValue(name string) ([]byte, uint32, error) {
	v, ok := k.values[name]
	if !ok {
		return nil, 0, fmt.Errorf("registry: %w", os.ErrNotExist)
	}
	return v, 3 /* REG_BINARY */, nil
}
func (k *fakeApprovedKey) DeleteValue(name string) error {
	if _, ok := k.values[name]; !ok {
		return fmt.Errorf("registry: %w", os.ErrNotExist)
	}
	delete(k.values, name)
	return nil
}
func (k *fakeApprovedKey) Close() error { k.closed++; return nil }

// TestRegistryEntrySwitchedOffInTaskManager: Task Manager's Startup apps
// (and Settings > Apps > Startup) switch an entry off without removing
// the Run value, by writing StartupApproved\Run\NPU Chat with an odd
// first byte. Such an entry is off (the check mark tells the truth), and
// turning launch at login on from NPU Chat switches it on again, rather
// than showing a check mark while Windows does not start NPU Chat.
func TestRegistryEntrySwitchedOffInTaskManager(t *testing.T) {
	run := &fakeRunKey{values: map[string]string{}}
	approved := &fakeApprovedKey{values: map[string][]byte{"OneDrive": {3, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8}}}
	opened := 0
	e := &Registry{
		Open:         func() (RunKey, error) { return run, nil },
		OpenApproved: func() (ApprovedKey, error) { opened++; return approved, nil },
	}
	exe := `C:\Program Files\NPU Chat\npuchat.exe`
	if err := e.Enable(exe); err != nil {
		t.Fatal(err)
	}
	approved.values[RunValueName] = []byte{2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0} // enabled in Task Manager
	if on, err := e.Enabled(); !on || err != nil {
		t.Fatalf("approved: %v %v", on, err)
	}
	approved.values[RunValueName] = []byte{3, 0, 0, 0, 0x10, 0x9a, 0x8b, 0x7c, 0x6d, 0x5e, 0xda, 0x01} // disabled
	if on, err := e.Enabled(); on || err != nil {
		t.Fatalf("switched off in Task Manager: %v %v", on, err)
	}
	if err := e.Enable(exe); err != nil {
		t.Fatal(err)
	}
	if on, err := e.Enabled(); !on || err != nil {
		t.Fatalf("after Enable: %v %v", on, err)
	}
	if _, ok := approved.values["OneDrive"]; !ok {
		t.Fatal("another program's entry was changed")
	}
	// No StartupApproved key (a fresh profile, Wine): approved.
	none := &Registry{
		Open:         func() (RunKey, error) { return run, nil },
		OpenApproved: func() (ApprovedKey, error) { return nil, fmt.Errorf("registry: %w", os.ErrNotExist) },
	}
	if on, err := none.Enabled(); !on || err != nil {
		t.Fatalf("without the StartupApproved key: %v %v", on, err)
	}
	if err := none.Enable(exe); err != nil {
		t.Fatalf("Enable without the StartupApproved key: %v", err)
	}
	if approved.closed != opened {
		t.Errorf("StartupApproved opened %d times, closed %d", opened, approved.closed)
	}
}

// TestXDGEntryForAProgramThatIsGone: the entry names its program in
// TryExec too, so that a session skips it once the program is gone
// (the package removed, the binary moved), and the check mark says off
// then, so that turning it on again points it at this program.
func TestXDGEntryForAProgramThatIsGone(t *testing.T) {
	dir := t.TempDir()
	exe := filepath.Join(dir, "old place", "npuchat")
	os.MkdirAll(filepath.Dir(exe), 0o755)
	os.WriteFile(exe, []byte("#!/bin/sh\n"), 0o755)
	x := &XDG{Dir: filepath.Join(dir, "autostart")}
	if err := x.Enable(exe); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(x.Path())
	if !strings.Contains(string(b), "\nTryExec="+exe+"\n") {
		t.Fatalf("no TryExec in:\n%s", b)
	}
	if on, err := x.Enabled(); !on || err != nil {
		t.Fatalf("with the program there: %v %v", on, err)
	}
	os.Remove(exe)
	if on, err := x.Enabled(); on || err != nil {
		t.Fatalf("with the program gone: %v %v", on, err)
	}
}
