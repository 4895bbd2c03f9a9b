package linux

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/npuchat/npuchat/installer/appmeta"
)

// theDeb is the package under test: $NPUCHAT_DEB (what `make deb` built,
// as `make test-installers` passes it), or one TestMain builds.
var theDeb string

func TestMain(m *testing.M) {
	theDeb = os.Getenv("NPUCHAT_DEB")
	var tmp string
	if theDeb == "" {
		var err error
		tmp, err = os.MkdirTemp("", "npuchat-deb-test")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		theDeb, err = Build(context.Background(), Options{Root: "../..", Out: tmp, Work: tmp, Log: os.Stderr})
		if err != nil {
			fmt.Fprintln(os.Stderr, "build the .deb to test:", err)
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

// need finds a tool scripts/setup installs; a missing one fails the test.
func need(t *testing.T, tool string) string {
	t.Helper()
	p, err := exec.LookPath(tool)
	if err != nil {
		t.Fatalf("%s is needed (scripts/setup installs it, scripts/setup.d/installer.apt)", tool)
	}
	return p
}

// sh runs a command and returns its combined output and exit code; it
// fails the test when the command cannot be started.
func sh(t *testing.T, name string, args ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		return out.String(), ee.ExitCode()
	}
	if err != nil {
		t.Fatalf("%s %v: %v\n%s", name, args, err, out.String())
	}
	return out.String(), 0
}

func field(t *testing.T, name string) string {
	t.Helper()
	out, code := sh(t, "dpkg-deb", "--field", theDeb, name)
	if code != 0 {
		t.Fatalf("dpkg-deb --field %s: %s", name, out)
	}
	return strings.TrimSpace(out)
}

func TestLintianHasNoErrors(t *testing.T) {
	need(t, "lintian")
	out, code := sh(t, "lintian", "--display-info", "--pedantic", theDeb)
	t.Logf("lintian %s:\n%s", filepath.Base(theDeb), out)
	var errs []string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "E: ") {
			errs = append(errs, l)
		}
	}
	if len(errs) > 0 || code != 0 && code != 2 {
		t.Errorf("lintian: exit %d, %d errors:\n%s", code, len(errs), strings.Join(errs, "\n"))
	}
}

// TestControlFields checks what apt shows and uses: the version is
// FyneApp.toml's, FastFlowLM is recommended and the DKMS driver
// suggested, and the package is amd64.
func TestControlFields(t *testing.T) {
	meta, err := appmeta.Load("../../FyneApp.toml")
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{
		"Package":      "npuchat",
		"Version":      meta.Version(),
		"Architecture": "amd64",
		"Recommends":   "fastflowlm",
		"Suggests":     "amdxdna-dkms",
		"Homepage":     meta.Website,
	} {
		if got := field(t, name); got != want {
			t.Errorf("%s: %q, want %q", name, got, want)
		}
	}
}

// depRE is one "pkg (op version)" of a Depends field.
var depRE = regexp.MustCompile(`^([a-z0-9][a-z0-9+.-]+)(?:\s*\((>=|>>|=)\s*([^)]+)\))?$`)

func parseDepends(t *testing.T, s string) map[string]string {
	t.Helper()
	deps := map[string]string{}
	for _, d := range strings.Split(s, ",") {
		d = strings.TrimSpace(d)
		if d == "" {
			continue
		}
		m := depRE.FindStringSubmatch(d)
		if m == nil {
			t.Fatalf("cannot read dependency %q (alternatives are not expected here)", d)
		}
		deps[m[1]] = m[3]
	}
	return deps
}

// TestDependsCoverSharedLibraries runs dpkg-shlibdeps, Debian's own tool
// for this, on the packaged binary: every package it says the binary's
// shared libraries (fyne's OpenGL and X11 ones) come from must be in
// Depends, at least at the version it says.
func TestDependsCoverSharedLibraries(t *testing.T) {
	need(t, "dpkg-shlibdeps")
	dir := t.TempDir()
	if out, code := sh(t, "dpkg-deb", "-x", theDeb, filepath.Join(dir, "root")); code != 0 {
		t.Fatal(out)
	}
	bin := filepath.Join(dir, "root", "usr", "bin", "npuchat")
	ldd, _ := sh(t, "ldd", bin)
	t.Logf("ldd /usr/bin/npuchat:\n%s", ldd)
	if strings.Contains(ldd, "not found") {
		t.Errorf("a shared library of /usr/bin/npuchat is missing on this machine:\n%s", ldd)
	}
	os.MkdirAll(filepath.Join(dir, "debian"), 0o755)
	os.WriteFile(filepath.Join(dir, "debian", "control"), []byte("Source: npuchat\n\nPackage: npuchat\nArchitecture: any\n"), 0o644)
	cmd := exec.Command("dpkg-shlibdeps", "-O", bin)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("dpkg-shlibdeps: %v\n%s", err, out)
	}
	line := strings.TrimSpace(string(out))
	want, ok := strings.CutPrefix(line, "shlibs:Depends=")
	if !ok {
		t.Fatalf("dpkg-shlibdeps said %q", line)
	}
	t.Logf("dpkg-shlibdeps: %s\nDepends: %s", want, field(t, "Depends"))
	have := parseDepends(t, field(t, "Depends"))
	for pkg, minVersion := range parseDepends(t, want) {
		got, ok := have[pkg]
		switch {
		case !ok:
			t.Errorf("Depends lacks %s, which /usr/bin/npuchat links against (dpkg-shlibdeps: %s)", pkg, want)
		case minVersion != "" && (got == "" || exec.Command("dpkg", "--compare-versions", got, "ge", minVersion).Run() != nil):
			t.Errorf("Depends has %s (>= %s); the binary needs >= %s", pkg, got, minVersion)
		}
	}

	// GLFW opens these X extensions with dlopen when it starts, so
	// dpkg-shlibdeps does not see them; their packages must be in
	// Depends when the binary names them. (GLFW's other dlopen names,
	// EGL, GLES, OSMesa, Vulkan and X11-xcb, are alternatives it can do
	// without.)
	b, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	for _, lib := range []string{"libXcursor.so.1", "libXi.so.6", "libXinerama.so.1", "libXrandr.so.2", "libXrender.so.1", "libXxf86vm.so.1"} {
		if !bytes.Contains(b, []byte(lib+"\x00")) {
			continue
		}
		out, code := sh(t, "dpkg", "-S", "*/"+lib)
		if code != 0 {
			t.Errorf("/usr/bin/npuchat opens %s, which no installed package has: %s", lib, out)
			continue
		}
		pkg, _, _ := strings.Cut(strings.SplitN(out, "\n", 2)[0], ":")
		if _, ok := have[pkg]; !ok {
			t.Errorf("Depends lacks %s: /usr/bin/npuchat opens %s (dlopen)", pkg, lib)
		}
	}
}

// TestDesktopEntryAndMetainfo validates the generated desktop entry and
// AppStream metainfo with the freedesktop and AppStream validators.
func TestDesktopEntryAndMetainfo(t *testing.T) {
	need(t, "desktop-file-validate")
	need(t, "appstreamcli")
	dir := t.TempDir()
	if out, code := sh(t, "dpkg-deb", "-x", theDeb, dir); code != 0 {
		t.Fatal(out)
	}
	desktop := filepath.Join(dir, "usr/share/applications/dev.npuchat.app.desktop")
	if out, code := sh(t, "desktop-file-validate", desktop); code != 0 || strings.Contains(out, "error") {
		t.Errorf("desktop-file-validate: exit %d\n%s", code, out)
	}
	b, _ := os.ReadFile(desktop)
	for _, want := range []string{"Name=NPU Chat\n", "Exec=npuchat\n", "Icon=dev.npuchat.app\n", "Categories=Utility;Network;\n"} {
		if !bytes.Contains(b, []byte(want)) {
			t.Errorf("desktop entry lacks %q:\n%s", want, b)
		}
	}
	meta := filepath.Join(dir, "usr/share/metainfo/dev.npuchat.app.metainfo.xml")
	if out, code := sh(t, "appstreamcli", "validate", "--no-net", "--explain", meta); code != 0 {
		t.Errorf("appstreamcli validate: exit %d\n%s", code, out)
	} else {
		t.Logf("appstreamcli validate:\n%s", out)
	}
	for _, size := range []int{16, 32, 48, 64, 128, 256, 512} {
		p := filepath.Join(dir, fmt.Sprintf("usr/share/icons/hicolor/%dx%d/apps/dev.npuchat.app.png", size, size))
		if _, err := os.Stat(p); err != nil {
			t.Errorf("icon: %v", err)
		}
	}
}

func TestStageIconsRejectsWrongSizes(t *testing.T) {
	src := t.TempDir()
	b, err := os.ReadFile("../../gui/icons/npuchat-16.png")
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(src, "npuchat-48.png"), b, 0o644) // a 16×16 image
	err = StageIcons(src, t.TempDir(), "dev.npuchat.app")
	if err == nil || !strings.Contains(err.Error(), "16×16, but its name says 48×48") {
		t.Errorf("StageIcons: %v", err)
	}
	os.Remove(filepath.Join(src, "npuchat-48.png"))
	os.WriteFile(filepath.Join(src, "npuchat-16.png"), b, 0o644)
	if err := StageIcons(src, t.TempDir(), "dev.npuchat.app"); err == nil || !strings.Contains(err.Error(), "48×48") {
		t.Errorf("StageIcons without a 48×48 icon: %v", err)
	}
}

func installed(t *testing.T) bool {
	t.Helper()
	out, _ := sh(t, "dpkg-query", "-W", "-f=${Status}", "npuchat")
	return strings.Contains(out, "install ok installed")
}

// TestInstallRunUpgradeRemove installs the package on this machine with
// dpkg (root, as CI runs), runs the installed /usr/bin/npuchat, switches
// the two optional system settings on the way README.Debian says,
// upgrades over itself (they stay on), removes the package, and checks
// that every file it installed is gone, the settings are off again, and
// a user's data is untouched.
func TestInstallRunUpgradeRemove(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("installing the .deb needs root (dpkg -i); CI runs as root")
	}
	if installed(t) {
		t.Fatal("npuchat is already installed on this machine; this test installs and removes it, so remove it first (dpkg -r npuchat)")
	}
	t.Cleanup(func() {
		if installed(t) {
			sh(t, "dpkg", "--purge", "npuchat")
		}
	})
	if out, code := sh(t, "dpkg", "-i", theDeb); code != 0 {
		t.Fatalf("dpkg -i: exit %d\n%s", code, out)
	}
	listing, _ := sh(t, "dpkg", "-L", "npuchat")
	var files, dirs []string
	for _, p := range strings.Split(strings.TrimSpace(listing), "\n") {
		st, err := os.Lstat(p)
		switch {
		case err != nil:
			t.Errorf("dpkg -L lists %s, which is not there: %v", p, err)
		case st.IsDir():
			dirs = append(dirs, p)
		default:
			files = append(files, p)
		}
	}
	if len(files) < 10 {
		t.Fatalf("dpkg -L npuchat lists only %d files:\n%s", len(files), listing)
	}

	meta, err := appmeta.Load("../../FyneApp.toml")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("/usr/bin/npuchat", "version")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.Output()
	if want := "npuchat " + meta.Version() + " (linux/amd64"; err != nil || !strings.HasPrefix(string(stdout), want) {
		t.Errorf("/usr/bin/npuchat version: %v, %q; want %q…\n%s", err, stdout, want, stderr.String())
	}
	t.Logf("/usr/bin/npuchat version: %s(stderr: %q)", stdout, stderr.String())
	cmd = exec.Command("/usr/bin/npuchat", "check", "--json")
	stdout, err = cmd.Output()
	code := 0
	code = cmd.ProcessState.ExitCode()
	var report struct {
		Ready  *bool  `json:"ready"`
		OS     string `json:"os"`
		Checks []struct {
			ID     string `json:"id"`
			Status string `json:"status"`
		} `json:"checks"`
	}
	if jerr := json.Unmarshal(stdout, &report); jerr != nil || report.Ready == nil || report.OS != "linux" || len(report.Checks) == 0 {
		t.Errorf("/usr/bin/npuchat check --json: exit %d (%v), not a report: %v\n%s", code, err, jerr, stdout)
	}
	if code != 0 && code != 1 { // 0 ready, 1 not ready (no NPU here), 2 the check failed
		t.Errorf("/usr/bin/npuchat check --json: exit %d\n%s", code, stdout)
	}
	t.Logf("/usr/bin/npuchat check --json: exit %d, ready %v, %d checks", code, *report.Ready, len(report.Checks))

	// Switch the optional settings on, as README.Debian says.
	links := map[string]string{
		"/etc/udev/rules.d/70-npuchat-accel.rules":       "/usr/share/npuchat/system/70-npuchat-accel.rules",
		"/etc/security/limits.d/99-npuchat-memlock.conf": "/usr/share/npuchat/system/99-npuchat-memlock.conf",
	}
	for link, target := range links {
		if _, err := os.Lstat(link); err == nil {
			t.Fatalf("%s exists already; not touching it", link)
		}
		if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, link); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if l, err := os.Readlink(link); err == nil && l == target {
				os.Remove(link)
			}
		})
	}
	// A user's data, which nothing may touch.
	home := t.TempDir()
	data := filepath.Join(home, ".local", "share", "npuchat", "history.db")
	os.MkdirAll(filepath.Dir(data), 0o755)
	os.WriteFile(data, []byte("chat history"), 0o644)
	for _, s := range []string{"preinst", "postinst", "prerm", "postrm"} {
		if b, err := os.ReadFile("/var/lib/dpkg/info/npuchat." + s); err == nil && regexp.MustCompile(`\$HOME|~/|/home/|/root/`).Match(b) {
			t.Errorf("the %s script refers to a home folder:\n%s", s, b)
		}
	}

	// An upgrade (here: the same version again) keeps them on.
	if out, code := sh(t, "dpkg", "-i", theDeb); code != 0 {
		t.Fatalf("dpkg -i over the installed package: exit %d\n%s", code, out)
	}
	for link := range links {
		if _, err := os.Stat(link); err != nil {
			t.Errorf("after an upgrade: %v", err)
		}
	}

	if out, code := sh(t, "dpkg", "-r", "npuchat"); code != 0 {
		t.Fatalf("dpkg -r: exit %d\n%s", code, out)
	}
	for _, f := range files {
		if _, err := os.Lstat(f); err == nil {
			t.Errorf("dpkg -r left %s", f)
		}
	}
	for _, d := range dirs {
		if strings.Contains(d, "npuchat") {
			if _, err := os.Lstat(d); err == nil {
				t.Errorf("dpkg -r left the folder %s", d)
			}
		}
	}
	for link := range links {
		if _, err := os.Lstat(link); err == nil {
			t.Errorf("dpkg -r left the switched-on setting %s", link)
		}
	}
	if b, err := os.ReadFile(data); err != nil || string(b) != "chat history" {
		t.Errorf("the user's data changed: %q, %v", b, err)
	}
	if out, code := sh(t, "dpkg", "--purge", "npuchat"); code != 0 {
		t.Errorf("dpkg --purge after remove: exit %d\n%s", code, out)
	}
	t.Logf("dpkg -r removed all %d files and the package's %d folders", len(files), len(dirs))
}
