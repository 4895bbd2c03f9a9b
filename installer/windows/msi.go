package windows

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/npuchat/npuchat/installer/appmeta"
)

// ExeOptions says what to build and where.
type ExeOptions struct {
	// Root is the repository's root (FyneApp.toml, cmd/trayapp, gui/icons).
	Root string
	// Out is the path of the npuchat.exe to write.
	Out string
	// Log receives the build's progress and the tools' output.
	Log io.Writer
}

// MinGW is the C cross-compiler of the Windows build.
const MinGW = "x86_64-w64-mingw32-gcc"

// sysoBase is the name (without go-winres' _windows_amd64.syso suffix)
// of the resource object written into cmd/trayapp for one build.
const sysoBase = "zz_npuchat_res"

// BuildExe cross-compiles the tray build of cmd/trayapp for
// windows/amd64 with its icon, version resource and manifest.
func BuildExe(ctx context.Context, o ExeOptions) error {
	if o.Log == nil {
		o.Log = io.Discard
	}
	root, err := filepath.Abs(o.Root)
	if err != nil {
		return err
	}
	out, err := filepath.Abs(o.Out)
	if err != nil {
		return err
	}
	o.Root, o.Out = root, out
	meta, err := appmeta.Load(filepath.Join(o.Root, "FyneApp.toml"))
	if err != nil {
		return err
	}
	icon := filepath.Join(o.Root, "gui", "icons", "npuchat.ico")
	if _, err := os.Stat(icon); err != nil {
		return fmt.Errorf("windows exe: the app icon: %w (it comes with the tray's icon set in gui/icons)", err)
	}
	if _, err := exec.LookPath(MinGW); err != nil {
		return fmt.Errorf("windows exe: %s not found: install gcc-mingw-w64-x86-64 (scripts/setup does)", MinGW)
	}
	pkgDir := filepath.Join(o.Root, "cmd", "trayapp")
	syso := filepath.Join(pkgDir, sysoBase+"_windows_amd64.syso")
	defer os.Remove(syso)
	winres := exec.CommandContext(ctx, "go", "tool", "go-winres", "simply",
		"--arch", "amd64", "--out", filepath.Join(pkgDir, sysoBase),
		"--manifest", "gui", "--icon", icon,
		"--product-name", meta.Details.Name, "--file-description", meta.Details.Name,
		"--product-version", meta.WindowsVersion(), "--file-version", meta.WindowsVersion(),
		"--original-filename", "npuchat.exe", "--copyright", "© the NPU Chat authors")
	winres.Dir = filepath.Join(o.Root, "installer") // the module that pins go-winres
	if err := run(winres, o.Log); err != nil {
		return fmt.Errorf("windows exe: go-winres: %w", err)
	}
	if _, err := os.Stat(syso); err != nil {
		return fmt.Errorf("windows exe: go-winres wrote no %s: %w", syso, err)
	}
	fmt.Fprintf(o.Log, "msi: go build ./cmd/trayapp (windows/amd64, cgo with %s, GUI subsystem) -> %s\n", MinGW, o.Out)
	build := exec.CommandContext(ctx, "go", "build", "-trimpath",
		"-ldflags", "-s -w -H windowsgui -X main.version="+meta.Version(), "-o", o.Out, "./cmd/trayapp")
	build.Dir = o.Root
	build.Env = append(os.Environ(), "CGO_ENABLED=1", "CC="+MinGW, "GOOS=windows", "GOARCH=amd64")
	if err := run(build, o.Log); err != nil {
		return fmt.Errorf("windows exe: go build: %w", err)
	}
	return nil
}

// MSIOptions says what to put in the MSI and where.
type MSIOptions struct {
	// Root is the repository's root.
	Root string
	// Exe is the npuchat.exe to install.
	Exe string
	// Out is the folder the MSI is written to.
	Out string
	// Version, when set, overrides FyneApp.toml's (tests build an
	// upgrade with it).
	Version string
	// Log receives the tools' output.
	Log io.Writer
}

// FileName is the MSI's file name for a version.
func FileName(version string) string { return "npuchat-" + version + "-x64.msi" }

// UpgradeCode is the MSI's upgrade code, as in npuchat.wxs: the same for
// every version, never to change.
const UpgradeCode = "{9AC89D81-8F02-449C-8003-6581F93B1F2B}"

// What wixl 0.101 cannot write, set afterwards with msibuild; see the
// package doc.
const (
	// msidbUpgradeAttributesVersionMinInclusive|VersionMaxInclusive: wixl
	// drops IncludeMaximum, without which a rebuild of the same version
	// would install beside the old one.
	upgradeAttributes  = 256 | 512
	autostartCondition = `AUTOSTART="1" AND (NOT WIX_UPGRADE_DETECTED OR RUNVALUE)`
	// Just after InstallValidate (1400), before InstallInitialize (1500).
	removeExistingProductsSeq = 1401
)

// BuildMSI compiles installer/windows/npuchat.wxs around o.Exe and
// returns the MSI's path.
func BuildMSI(ctx context.Context, o MSIOptions) (string, error) {
	if o.Log == nil {
		o.Log = io.Discard
	}
	meta, err := appmeta.Load(filepath.Join(o.Root, "FyneApp.toml"))
	if err != nil {
		return "", err
	}
	version := meta.Version()
	if o.Version != "" {
		version = o.Version
	}
	exe, err := filepath.Abs(o.Exe)
	if err != nil {
		return "", err
	}
	root, err := filepath.Abs(o.Root)
	if err != nil {
		return "", err
	}
	if _, err := os.Stat(exe); err != nil {
		return "", fmt.Errorf("msi: %w", err)
	}
	for _, tool := range []string{"wixl", "msibuild"} {
		if _, err := exec.LookPath(tool); err != nil {
			return "", fmt.Errorf("msi: %s not found: install wixl and msitools (scripts/setup does)", tool)
		}
	}
	if err := os.MkdirAll(o.Out, 0o755); err != nil {
		return "", fmt.Errorf("msi: %w", err)
	}
	target, err := filepath.Abs(filepath.Join(o.Out, FileName(version)))
	if err != nil {
		return "", err
	}
	tmp := target + ".tmp"
	defer os.Remove(tmp)
	// wixl finds sources by relative name only (an absolute path is "not
	// found"), so it runs in a folder that holds both.
	src, err := os.MkdirTemp("", "npuchat-msi")
	if err != nil {
		return "", fmt.Errorf("msi: %w", err)
	}
	defer os.RemoveAll(src)
	if err := copyFile(exe, filepath.Join(src, "npuchat.exe")); err != nil {
		return "", fmt.Errorf("msi: %w", err)
	}
	if err := copyFile(filepath.Join(root, "gui", "icons", "npuchat.ico"), filepath.Join(src, "npuchat.ico")); err != nil {
		return "", fmt.Errorf("msi: the app icon: %w", err)
	}
	defs := map[string]string{
		"Version":     version,
		"ProductName": meta.Details.Name,
		"Comment":     meta.LinuxAndBSD.Comment,
		"Website":     meta.Website,
		"ExeFile":     "npuchat.exe",
		"IconFile":    "npuchat.ico",
	}
	args := []string{"--arch", "x64", "-o", tmp}
	for k, v := range defs {
		if strings.ContainsAny(v, "\"<>&") {
			return "", fmt.Errorf("msi: %s %q has a character the WiX source cannot take", k, v)
		}
		args = append(args, "-D", k+"="+v)
	}
	args = append(args, filepath.Join(root, "installer", "windows", "npuchat.wxs"))
	wixl := exec.CommandContext(ctx, "wixl", args...)
	wixl.Dir = src
	if err := run(wixl, o.Log); err != nil {
		return "", fmt.Errorf("msi: wixl: %w", err)
	}
	fix := exec.CommandContext(ctx, "msibuild", tmp,
		"-q", "UPDATE `Component` SET `Condition` = '"+autostartCondition+"' WHERE `Component` = 'Autostart'",
		"-q", fmt.Sprintf("UPDATE `InstallExecuteSequence` SET `Sequence` = %d WHERE `Action` = 'RemoveExistingProducts'", removeExistingProductsSeq),
		// Attributes is part of the Upgrade table's key: replace the row.
		"-q", "DELETE FROM `Upgrade` WHERE `ActionProperty` = 'WIX_UPGRADE_DETECTED'",
		"-q", fmt.Sprintf("INSERT INTO `Upgrade` (`UpgradeCode`, `VersionMin`, `VersionMax`, `Attributes`, `ActionProperty`) VALUES ('%s', '0.0.0', '%s', %d, 'WIX_UPGRADE_DETECTED')",
			UpgradeCode, version, upgradeAttributes))
	if err := run(fix, o.Log); err != nil {
		return "", fmt.Errorf("msi: msibuild: %w", err)
	}
	if err := os.Rename(tmp, target); err != nil {
		return "", fmt.Errorf("msi: %w", err)
	}
	fmt.Fprintf(o.Log, "msi: wrote %s\n", target)
	return target, nil
}

func copyFile(src, dst string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, b, 0o644)
}

// run runs cmd with its output going to log, and returns an error that
// includes the tail of that output when it fails.
func run(cmd *exec.Cmd, log io.Writer) error {
	var tail tailBuffer
	cmd.Stdout = io.MultiWriter(log, &tail)
	cmd.Stderr = io.MultiWriter(log, &tail)
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s: %w\n%s", strings.Join(cmd.Args[:min(len(cmd.Args), 3)], " "), err, tail.String())
	}
	return nil
}

// tailBuffer keeps the last 4 KiB written to it.
type tailBuffer struct{ b []byte }

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.b = append(t.b, p...)
	if len(t.b) > 4096 {
		t.b = t.b[len(t.b)-4096:]
	}
	return len(p), nil
}

func (t *tailBuffer) String() string { return string(t.b) }
