package windows

import (
	"bytes"
	"context"
	"debug/pe"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tc-hib/winres"
	"github.com/tc-hib/winres/version"

	"github.com/npuchat/npuchat/installer/appmeta"
)

// theMSI and theExe are under test: $NPUCHAT_MSI and $NPUCHAT_EXE (what
// `make msi` built, as `make test-installers` passes them), or ones
// TestMain builds.
var theMSI, theExe string

func TestMain(m *testing.M) {
	theMSI, theExe = os.Getenv("NPUCHAT_MSI"), os.Getenv("NPUCHAT_EXE")
	var tmp string
	if theMSI == "" || theExe == "" {
		var err error
		tmp, err = os.MkdirTemp("", "npuchat-msi-test")
		if err == nil {
			theExe = filepath.Join(tmp, "npuchat.exe")
			err = BuildExe(context.Background(), ExeOptions{Root: "../..", Out: theExe, Log: os.Stderr})
		}
		if err == nil {
			theMSI, err = BuildMSI(context.Background(), MSIOptions{Root: "../..", Exe: theExe, Out: tmp, Log: os.Stderr})
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "build the MSI to test:", err)
			os.RemoveAll(tmp)
			os.Exit(1)
		}
	}
	code := m.Run()
	if tmp != "" {
		os.RemoveAll(tmp)
	}
	os.Exit(code)
}

func need(t *testing.T, tool string) {
	t.Helper()
	if _, err := exec.LookPath(tool); err != nil {
		t.Fatalf("%s is needed (scripts/setup installs it, scripts/setup.d/installer.apt)", tool)
	}
}

func meta(t *testing.T) *appmeta.Meta {
	t.Helper()
	m, err := appmeta.Load("../../FyneApp.toml")
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// table exports one MSI table with msiinfo as rows of columns (the three
// header lines dropped).
func table(t *testing.T, msi, name string) [][]string {
	t.Helper()
	out, err := exec.Command("msiinfo", "export", msi, name).Output()
	if err != nil {
		t.Fatalf("msiinfo export %s: %v", name, err)
	}
	lines := strings.Split(strings.TrimRight(strings.ReplaceAll(string(out), "\r\n", "\n"), "\n"), "\n")
	if len(lines) < 3 {
		t.Fatalf("msiinfo export %s: %q", name, out)
	}
	var rows [][]string
	for _, l := range lines[3:] {
		rows = append(rows, strings.Split(l, "\t"))
	}
	return rows
}

// row finds the row whose column col is key.
func row(t *testing.T, rows [][]string, col int, key string) []string {
	t.Helper()
	for _, r := range rows {
		if len(r) > col && r[col] == key {
			return r
		}
	}
	t.Fatalf("no row with %q in column %d: %q", key, col, rows)
	return nil
}

const runKey = `Software\Microsoft\Windows\CurrentVersion\Run`

// TestTables reads the MSI's File, Directory, Shortcut, Registry,
// Upgrade, Component, Property and sequence tables with msiinfo.
func TestTables(t *testing.T) {
	need(t, "msiinfo")
	out, err := exec.Command("msiinfo", "tables", theMSI).Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"File", "Shortcut", "Registry", "Upgrade", "Component", "Directory", "CustomAction"} {
		if !strings.Contains("\n"+string(out), "\n"+name+"\n") {
			t.Errorf("no %s table in %s", name, out)
		}
	}
	m := meta(t)

	if f := row(t, table(t, theMSI, "File"), 0, "npuchat.exe"); f[1] != "Program" || f[2] != "npuchat.exe" {
		t.Errorf("File row %q", f)
	}
	if files := table(t, theMSI, "File"); len(files) != 1 {
		t.Errorf("File table has %d rows, want only npuchat.exe: %q", len(files), files)
	}
	dirs := table(t, theMSI, "Directory")
	if d := row(t, dirs, 0, "INSTALLDIR"); d[1] != "UserProgramsFolder" || d[2] != "NPU Chat" {
		t.Errorf("INSTALLDIR %q", d)
	}
	if d := row(t, dirs, 0, "UserProgramsFolder"); d[1] != "LocalAppDataFolder" || d[2] != "Programs" {
		t.Errorf("UserProgramsFolder %q, want LocalAppDataFolder\\Programs", d)
	}

	sc := row(t, table(t, theMSI, "Shortcut"), 0, "StartMenuShortcut")
	if sc[1] != "ProgramMenuFolder" || sc[2] != "NPU Chat" || sc[4] != `[INSTALLDIR]npuchat.exe` || sc[8] != "npuchat.ico" {
		t.Errorf("Shortcut row %q", sc)
	}

	reg := table(t, theMSI, "Registry")
	for _, r := range reg {
		if r[1] != "1" { // 1 = HKCU
			t.Errorf("registry row %q is not in HKCU: a per-user MSI writes nothing else", r)
		}
	}
	run := row(t, reg, 3, "NPU Chat")
	if run[2] != runKey || run[4] != `"[INSTALLDIR]npuchat.exe" --hidden` || run[5] != "Autostart" {
		t.Errorf("Run value row %q", run)
	}

	comps := table(t, theMSI, "Component")
	if c := row(t, comps, 0, "Autostart"); c[4] != autostartCondition {
		t.Errorf("Autostart component condition %q, want %q", c[4], autostartCondition)
	}
	for _, c := range comps {
		if c[5] == "" {
			t.Errorf("component %q has no key path", c)
		}
	}

	up := table(t, theMSI, "Upgrade")
	if len(up) != 2 {
		t.Fatalf("Upgrade rows %q", up)
	}
	const code = UpgradeCode
	replace := row(t, up, 6, "WIX_UPGRADE_DETECTED")
	if replace[0] != code || replace[1] != "0.0.0" || replace[2] != m.Version() || attrs(t, replace[4])&(256|512|2) != 256|512 {
		t.Errorf("upgrade row %q: want %s, 0.0.0 to %s both included, not detect-only", replace, code, m.Version())
	}
	newer := row(t, up, 6, "WIX_DOWNGRADE_DETECTED")
	if newer[0] != code || newer[1] != m.Version() || newer[2] != "" || attrs(t, newer[4])&(256|2) != 2 {
		t.Errorf("downgrade row %q", newer)
	}

	props := table(t, theMSI, "Property")
	if p := row(t, props, 0, "UpgradeCode"); p[1] != code {
		t.Errorf("UpgradeCode %q", p)
	}
	if p := row(t, props, 0, "ProductVersion"); p[1] != m.Version() {
		t.Errorf("ProductVersion %q, want FyneApp.toml's %s", p, m.Version())
	}
	if p := row(t, props, 0, "AUTOSTART"); p[1] != "1" {
		t.Errorf("AUTOSTART %q", p)
	}
	for _, p := range props {
		if p[0] == "ALLUSERS" {
			t.Errorf("ALLUSERS is set (%q): the MSI must install per user", p)
		}
	}
	seq := table(t, theMSI, "InstallExecuteSequence")
	rep, _ := strconv.Atoi(row(t, seq, 0, "RemoveExistingProducts")[2])
	validate, _ := strconv.Atoi(row(t, seq, 0, "InstallValidate")[2])
	initialize, _ := strconv.Atoi(row(t, seq, 0, "InstallInitialize")[2])
	if rep <= validate || rep >= initialize {
		t.Errorf("RemoveExistingProducts at %d, want between InstallValidate (%d) and InstallInitialize (%d)", rep, validate, initialize)
	}
	if r := row(t, seq, 0, "RemoveAutostart"); r[1] != `REMOVE="ALL" AND NOT UPGRADINGPRODUCTCODE` {
		t.Errorf("RemoveAutostart runs when %q", r[1])
	}

	sum, err := exec.Command("msiinfo", "suminfo", theMSI).Output()
	if err != nil {
		t.Fatal(err)
	}
	// Word count: 2 compressed, 8 "elevated privileges are not required".
	var wc int
	for _, l := range strings.Split(string(sum), "\n") {
		if v, ok := strings.CutPrefix(l, "Source: "); ok {
			wc, _ = strconv.Atoi(strings.Fields(v)[0])
		}
	}
	if wc&8 == 0 || !strings.Contains(string(sum), "Template: x64;") {
		t.Errorf("summary: word count %d (want the no-elevation bit 8), or not x64:\n%s", wc, sum)
	}
}

func attrs(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatalf("attributes %q: %v", s, err)
	}
	return n
}

// TestExtractedExe extracts the MSI with msiextract and checks that
// npuchat.exe is an amd64 GUI-subsystem PE with the app's icon and a
// version resource from FyneApp.toml.
func TestExtractedExe(t *testing.T) {
	need(t, "msiextract")
	dir := t.TempDir()
	if out, err := exec.Command("msiextract", "-C", dir, theMSI).CombinedOutput(); err != nil {
		t.Fatalf("msiextract: %v\n%s", err, out)
	}
	exe := filepath.Join(dir, "Programs", "NPU Chat", "npuchat.exe")
	f, err := pe.Open(exe)
	if err != nil {
		t.Fatalf("msiextract did not yield a PE npuchat.exe: %v", err)
	}
	defer f.Close()
	if f.Machine != pe.IMAGE_FILE_MACHINE_AMD64 {
		t.Errorf("machine %#x, want amd64", f.Machine)
	}
	oh, ok := f.OptionalHeader.(*pe.OptionalHeader64)
	if !ok {
		t.Fatalf("not a PE32+ image: %T", f.OptionalHeader)
	}
	if oh.Subsystem != pe.IMAGE_SUBSYSTEM_WINDOWS_GUI {
		t.Errorf("subsystem %d, want %d (GUI: no console window for the tray)", oh.Subsystem, pe.IMAGE_SUBSYSTEM_WINDOWS_GUI)
	}

	// The MSI ships npuchat.exe alone: it must need no MinGW runtime DLL
	// (libwinpthread-1.dll, libgcc_s_seh-1.dll, …), only Windows' own.
	syms, err := f.ImportedSymbols()
	if err != nil {
		t.Fatal(err)
	}
	dlls := map[string]bool{}
	for _, s := range syms {
		if i := strings.LastIndexByte(s, ':'); i >= 0 {
			dlls[strings.ToLower(s[i+1:])] = true
		}
	}
	for dll := range dlls {
		if strings.HasPrefix(dll, "lib") {
			t.Errorf("npuchat.exe imports %s, which the MSI does not install", dll)
		}
	}
	t.Logf("npuchat.exe imports %v", dlls)

	r, err := os.Open(exe)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	rs, err := winres.LoadFromEXE(r)
	if err != nil {
		t.Fatalf("resources: %v", err)
	}
	icons := 0
	rs.WalkType(winres.RT_GROUP_ICON, func(winres.Identifier, uint16, []byte) bool { icons++; return true })
	if icons == 0 {
		t.Error("npuchat.exe has no icon")
	}
	if rs.Get(winres.RT_MANIFEST, winres.ID(1), winres.LCIDDefault) == nil {
		t.Error("npuchat.exe has no manifest")
	}
	var vi *version.Info
	rs.WalkType(winres.RT_VERSION, func(_ winres.Identifier, _ uint16, data []byte) bool {
		vi, err = version.FromBytes(data)
		return false
	})
	if vi == nil || err != nil {
		t.Fatalf("no version resource: %v", err)
	}
	m := meta(t)
	want := m.WindowsVersion()
	got := fmt.Sprintf("%d.%d.%d.%d", vi.FileVersion[0], vi.FileVersion[1], vi.FileVersion[2], vi.FileVersion[3])
	if got != want {
		t.Errorf("file version %s, want %s", got, want)
	}
	j, _ := json.Marshal(vi)
	if !bytes.Contains(j, []byte(`"ProductName":"`+m.Details.Name+`"`)) {
		t.Errorf("version strings lack the product name: %s", j)
	}
}

// wine is a private Wine prefix (under the user cache folder, made once)
// in which the tests run npuchat.exe and msiexec.
type wine struct {
	t      *testing.T
	bin    string
	prefix string
}

func newWine(t *testing.T) *wine {
	t.Helper()
	w := &wine{t: t}
	for _, c := range []string{"wine64", "wine", "/usr/lib/wine/wine64"} {
		if p, err := exec.LookPath(c); err == nil {
			w.bin = p
			break
		}
	}
	if w.bin == "" {
		t.Fatal("wine64 is needed (scripts/setup installs it, scripts/setup.d/npu.apt)")
	}
	need(t, MinGW)
	cache, err := os.UserCacheDir()
	if err != nil {
		t.Fatal(err)
	}
	w.prefix = filepath.Join(cache, "npuchat-test-wine-installer")
	sys32 := filepath.Join(w.prefix, "drive_c", "windows", "system32")
	if _, err := os.Stat(sys32); err != nil {
		w.run(5*time.Minute, "wineboot", "--init")
	}
	// Wine 8 lacks bcryptprimitives.dll, which Go programs need at start.
	if out, err := exec.Command(MinGW, "-shared", "-O2", "-o", filepath.Join(sys32, "bcryptprimitives.dll"),
		"testdata/bcryptprimitives.c", "-lbcrypt").CombinedOutput(); err != nil {
		t.Fatalf("mingw: %v\n%s", err, out)
	}
	return w
}

// run runs a Windows program under Wine and returns its exit code and
// output (CRLF folded).
func (w *wine) run(timeout time.Duration, args ...string) (int, string) {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, w.bin, args...)
	cmd.Env = append(os.Environ(), "WINEPREFIX="+w.prefix, "WINEDEBUG=-all", "WINEDLLOVERRIDES=mscoree,mshtml=")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if ctx.Err() != nil {
		w.t.Fatalf("wine %v: timed out after %s\n%s", args, timeout, out.String())
	}
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		w.t.Fatalf("wine %v: %v", args, err)
	}
	return code, strings.ReplaceAll(out.String(), "\r\n", "\n")
}

// winPath is a Linux path as Wine's Z: drive sees it.
func winPath(p string) string {
	abs, _ := filepath.Abs(p)
	return `Z:` + strings.ReplaceAll(abs, "/", `\`)
}

// TestWineRunsVersion runs `npuchat.exe version` under Wine: the GUI
// build still prints (console_windows.go) and touches no OpenGL.
func TestWineRunsVersion(t *testing.T) {
	w := newWine(t)
	code, out := w.run(2*time.Minute, theExe, "version")
	want := "npuchat " + meta(t).Version() + " (windows/amd64"
	if code != 0 || !strings.HasPrefix(out, want) {
		t.Fatalf("wine npuchat.exe version: exit %d, %q; want %q…", code, out, want)
	}
	t.Logf("wine npuchat.exe version: %s", out)
}

// user is the Wine prefix's Windows user folder, seen from Linux.
func (w *wine) user() string {
	users, _ := filepath.Glob(filepath.Join(w.prefix, "drive_c", "users", "*", "AppData", "Local"))
	for _, u := range users {
		if !strings.Contains(u, string(filepath.Separator)+"Public"+string(filepath.Separator)) {
			return filepath.Dir(filepath.Dir(u))
		}
	}
	w.t.Fatalf("no user folder in %s", w.prefix)
	return ""
}

// runValue reads the Run value (ok false when there is none).
func (w *wine) runValue() (string, bool) {
	w.t.Helper()
	code, out := w.run(time.Minute, "reg", "query", `HKCU\`+runKey, "/v", "NPU Chat")
	if code != 0 {
		return "", false
	}
	for _, l := range strings.Split(out, "\n") {
		if _, v, ok := strings.Cut(l, "REG_SZ"); ok && strings.Contains(l, "NPU Chat") {
			return strings.TrimSpace(v), true
		}
	}
	w.t.Fatalf("reg query: %s", out)
	return "", false
}

// products counts the installed products named NPU Chat.
func (w *wine) products() int {
	w.t.Helper()
	_, out := w.run(time.Minute, "reg", "query", `HKCU\Software\Microsoft\Installer\Products`, "/s", "/v", "ProductName")
	return strings.Count(out, "REG_SZ    NPU Chat")
}

// TestWineInstallUpgradeUninstall installs the MSI with Wine's msiexec,
// silently and without elevation, upgrades it, and uninstalls it:
// program, shortcut and Run value appear and go, AUTOSTART=0 and an
// autostart switched off in the tray are kept through an upgrade, an
// older MSI refuses to replace a newer one, and the user's data stays.
func TestWineInstallUpgradeUninstall(t *testing.T) {
	need(t, "wixl")
	w := newWine(t)
	user := w.user()
	exe := filepath.Join(user, "AppData", "Local", "Programs", "NPU Chat", "npuchat.exe")
	lnk := filepath.Join(user, "AppData", "Roaming", "Microsoft", "Windows", "Start Menu", "Programs", "NPU Chat.lnk")
	m := meta(t)
	parts := strings.Split(m.Version(), ".")
	patch, _ := strconv.Atoi(parts[2])
	newer := fmt.Sprintf("%s.%s.%d", parts[0], parts[1], patch+1)
	newerMSI, err := BuildMSI(context.Background(), MSIOptions{Root: "../..", Exe: theExe, Out: t.TempDir(), Version: newer})
	if err != nil {
		t.Fatal(err)
	}
	msiexec := func(args ...string) int {
		t.Helper()
		code, out := w.run(3*time.Minute, append([]string{"msiexec"}, args...)...)
		if code != 0 {
			t.Logf("msiexec %v: exit %d\n%s", args, code, out)
		}
		return code
	}
	// A clean start: nothing left from an earlier, interrupted run.
	msiexec("/x", winPath(newerMSI), "/qn")
	msiexec("/x", winPath(theMSI), "/qn")
	w.run(time.Minute, "reg", "delete", `HKCU\`+runKey, "/v", "NPU Chat", "/f")
	if w.products() != 0 {
		t.Fatal("NPU Chat is still installed in the test's Wine prefix")
	}
	t.Cleanup(func() {
		msiexec("/x", winPath(newerMSI), "/qn")
		msiexec("/x", winPath(theMSI), "/qn")
	})

	// Install: the program, the shortcut, launch at login.
	if code := msiexec("/i", winPath(theMSI), "/qn"); code != 0 {
		t.Fatalf("msiexec /i: exit %d", code)
	}
	for _, p := range []string{exe, lnk} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("after install: %v", err)
		}
	}
	wantRun := `"C:\users\` + filepath.Base(user) + `\AppData\Local\Programs\NPU Chat\npuchat.exe" --hidden`
	if v, ok := w.runValue(); !ok || v != wantRun {
		t.Errorf("Run value %q (%v), want %q", v, ok, wantRun)
	}
	if code, out := w.run(time.Minute, exe, "version"); code != 0 || !strings.Contains(out, m.Version()) {
		t.Errorf("installed npuchat.exe version: exit %d, %q", code, out)
	}
	// The user's data, which the MSI never installed.
	data := []string{
		filepath.Join(user, "AppData", "Local", "npuchat", "history.db"),
		filepath.Join(user, "AppData", "Roaming", "npuchat", "settings.json"),
		filepath.Join(user, ".flm", "models", "model.q4nx"),
	}
	for _, p := range data {
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.WriteFile(p, []byte("mine"), 0o644)
		t.Cleanup(func() { os.RemoveAll(filepath.Dir(p)) })
	}

	// Switched off in the tray, then upgraded: it stays off, and the new
	// version replaces the old one.
	w.run(time.Minute, "reg", "delete", `HKCU\`+runKey, "/v", "NPU Chat", "/f")
	if code := msiexec("/i", winPath(newerMSI), "/qn"); code != 0 {
		t.Fatalf("msiexec /i %s (upgrade): exit %d", newer, code)
	}
	if n := w.products(); n != 1 {
		t.Errorf("after the upgrade %d NPU Chat products are installed, want 1", n)
	}
	if v, ok := w.runValue(); ok {
		t.Errorf("the upgrade switched launch at login back on: %q", v)
	}
	if _, err := os.Stat(exe); err != nil {
		t.Errorf("after the upgrade: %v", err)
	}
	// An older MSI does not replace a newer one.
	if code := msiexec("/i", winPath(theMSI), "/qn"); code == 0 {
		t.Error("installing the older MSI over the newer one succeeded")
	}

	// Switched on again in the tray, then uninstalled: all of it goes,
	// the user's data stays.
	w.run(time.Minute, "reg", "add", `HKCU\`+runKey, "/v", "NPU Chat", "/d", wantRun, "/f")
	if code := msiexec("/x", winPath(newerMSI), "/qn"); code != 0 {
		t.Fatalf("msiexec /x: exit %d", code)
	}
	for _, p := range []string{exe, filepath.Dir(exe), lnk} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("uninstall left %s", p)
		}
	}
	if v, ok := w.runValue(); ok {
		t.Errorf("uninstall left the Run value %q", v)
	}
	if code, out := w.run(time.Minute, "reg", "query", `HKCU\Software\NPU Chat`); code == 0 {
		t.Errorf("uninstall left HKCU\\Software\\NPU Chat:\n%s", out)
	}
	for _, p := range data {
		if b, err := os.ReadFile(p); err != nil || string(b) != "mine" {
			t.Errorf("uninstall touched the user's %s: %q, %v", p, b, err)
		}
	}
	if n := w.products(); n != 0 {
		t.Errorf("after uninstall %d NPU Chat products are registered", n)
	}

	// AUTOSTART=0: no Run value.
	if code := msiexec("/i", winPath(theMSI), "/qn", "AUTOSTART=0"); code != 0 {
		t.Fatalf("msiexec /i AUTOSTART=0: exit %d", code)
	}
	if v, ok := w.runValue(); ok {
		t.Errorf("AUTOSTART=0 wrote the Run value %q", v)
	}
	if code := msiexec("/x", winPath(theMSI), "/qn"); code != 0 {
		t.Errorf("msiexec /x: exit %d", code)
	}
}

// TestConsoleAttachUnderWine starts npuchat.exe, a GUI-subsystem
// program, from a console program the way a terminal does (no standard
// handles of its own) and reads the console's screen: `version` must
// appear there, which it does only because console_windows.go attaches
// to the parent's console (an exe built without it prints nothing here).
// Wine's console has a screen buffer only with a display, hence Xvfb.
func TestConsoleAttachUnderWine(t *testing.T) {
	w := newWine(t)
	need(t, "xvfb-run")
	dir := t.TempDir()
	host := filepath.Join(dir, "consolehost.exe")
	build := exec.Command("go", "build", "-o", host, "./testdata/consolehost")
	build.Env = append(os.Environ(), "GOOS=windows", "GOARCH=amd64", "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build consolehost: %v\n%s", err, out)
	}
	report := filepath.Join(dir, "report.txt")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "xvfb-run", "-a", w.bin, host, winPath(theExe), winPath(report))
	cmd.Env = append(os.Environ(), "WINEPREFIX="+w.prefix, "WINEDEBUG=-all", "WINEDLLOVERRIDES=mscoree,mshtml=")
	out, err := cmd.CombinedOutput()
	b, rerr := os.ReadFile(report)
	if err != nil || rerr != nil {
		t.Fatalf("consolehost: %v, %v\n%s\n%s", err, rerr, out, b)
	}
	want := "npuchat " + meta(t).Version() + " (windows/amd64"
	if !strings.HasPrefix(string(b), "exit 0\n") || !strings.Contains(string(b), want) {
		t.Errorf("the console shows %q; want exit 0 and %q…", b, want)
	}
}

// autostartConsts reads the string constants of the tray's launch-at-login
// package (autostart/autostart.go, in the main module), so that the MSI
// is checked against what the tray really toggles.
func autostartConsts(t *testing.T) map[string]string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "../../autostart/autostart.go", nil, 0)
	if err != nil {
		t.Fatalf("the tray's autostart package: %v", err)
	}
	consts := map[string]string{}
	ast.Inspect(f, func(n ast.Node) bool {
		vs, ok := n.(*ast.ValueSpec)
		if !ok {
			return true
		}
		for i, name := range vs.Names {
			if i < len(vs.Values) {
				if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
					consts[name.Name], _ = strconv.Unquote(lit.Value)
				}
			}
		}
		return true
	})
	return consts
}

// TestRunValueIsTheTrays checks the MSI's Run value against the tray's
// autostart package: the same key, value name and flag, quoted as its
// CommandLine quotes the executable.
func TestRunValueIsTheTrays(t *testing.T) {
	c := autostartConsts(t)
	for _, k := range []string{"RunValueName", "RunKeyPath", "HiddenFlag"} {
		if c[k] == "" {
			t.Fatalf("autostart.%s not found in autostart/autostart.go: %v", k, c)
		}
	}
	run := row(t, table(t, theMSI, "Registry"), 5, "Autostart")
	if run[2] != c["RunKeyPath"] || run[3] != c["RunValueName"] || run[4] != `"[INSTALLDIR]npuchat.exe" `+c["HiddenFlag"] {
		t.Errorf("the MSI's Run value %q; the tray uses HKCU\\%s, %q, `\"<exe>\" %s`", run[2:5], c["RunKeyPath"], c["RunValueName"], c["HiddenFlag"])
	}
}
