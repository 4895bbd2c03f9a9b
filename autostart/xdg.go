package autostart

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/npuchat/npuchat/safefile"
)

// XDG is the Linux entry: an autostart desktop file in Dir.
type XDG struct {
	// Dir is the autostart folder ($XDG_CONFIG_HOME/autostart).
	Dir string
}

// Path is the desktop file's path.
func (x *XDG) Path() string { return filepath.Join(x.Dir, DesktopFileName) }

// Enabled implements Entry: the file exists, is a desktop entry, and is
// not switched off with Hidden=true or X-GNOME-Autostart-enabled=false
// (what desktop settings write when a user turns an entry off).
func (x *XDG) Enabled() (bool, error) {
	b, err := safefile.ReadFile(x.Path(), maxDesktopBytes)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("launch at login: read %s: %w", x.Path(), err)
	}
	keys := desktopEntry(b)
	if keys == nil {
		return false, nil // not a desktop entry: nothing starts from it
	}
	if strings.EqualFold(keys["Hidden"], "true") || strings.EqualFold(keys["X-GNOME-Autostart-enabled"], "false") {
		return false, nil
	}
	// A session skips an entry whose TryExec program is gone (the
	// package removed, the binary moved): it is off.
	if try := unescapeString(keys["TryExec"]); try != "" {
		if filepath.IsAbs(try) {
			if _, err := os.Stat(try); err != nil {
				return false, nil
			}
		} else if _, err := exec.LookPath(try); err != nil {
			return false, nil
		}
	}
	return keys["Exec"] != "", nil
}

// Enable implements Entry: it writes the desktop file (atomically: a
// temporary file renamed into place).
func (x *XDG) Enable(exe string) error {
	if err := os.MkdirAll(x.Dir, 0o755); err != nil {
		return fmt.Errorf("launch at login: %w", err)
	}
	f, err := os.CreateTemp(x.Dir, ".npuchat.desktop.tmp-*")
	if err != nil {
		return fmt.Errorf("launch at login: %w", err)
	}
	_, err = f.WriteString(DesktopFile(exe))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), x.Path())
	}
	if err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("launch at login: write %s: %w", x.Path(), err)
	}
	return nil
}

// Disable implements Entry.
func (x *XDG) Disable() error {
	if err := os.Remove(x.Path()); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("launch at login: %w", err)
	}
	return nil
}

// DesktopFile is the autostart entry that starts exe with --hidden.
func DesktopFile(exe string) string {
	return "[Desktop Entry]\n" +
		"Type=Application\n" +
		"Name=NPU Chat\n" +
		"Comment=Serve a local language model from the tray\n" +
		"TryExec=" + escapeString(exe) + "\n" +
		"Exec=" + ExecValue(exe) + "\n" +
		"Icon=npuchat\n" +
		"Terminal=false\n" +
		"X-GNOME-Autostart-enabled=true\n"
}

// ExecValue is the Exec key's value for exe with --hidden, quoted as the
// Desktop Entry Specification says: the path in double quotes with ",
// `, $ and \ escaped by a backslash, a literal % written %% (else it
// reads as a field code such as %f), and then every backslash doubled,
// since the key's value is itself a string with \\ escapes.
func ExecValue(exe string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range exe {
		switch r {
		case '"', '`', '$', '\\':
			b.WriteByte('\\')
		case '%':
			b.WriteByte('%')
		}
		b.WriteRune(r)
	}
	b.WriteByte('"')
	arg := strings.ReplaceAll(b.String(), `\`, `\\`)
	return arg + " " + HiddenFlag
}

// escapeString writes s as a desktop entry string value: backslash,
// newline, tab and carriage return escaped.
func escapeString(s string) string {
	return strings.NewReplacer(`\`, `\\`, "\n", `\n`, "\t", `\t`, "\r", `\r`).Replace(s)
}

// unescapeString reads a desktop entry string value.
func unescapeString(s string) string {
	return strings.NewReplacer(`\\`, `\`, `\n`, "\n", `\t`, "\t", `\r`, "\r", `\s`, " ").Replace(s)
}

// desktopEntry returns the keys of a desktop file's [Desktop Entry]
// group (nil when it has none).
func desktopEntry(b []byte) map[string]string {
	var keys map[string]string
	in := false
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
		case strings.HasPrefix(line, "["):
			in = line == "[Desktop Entry]"
			if in && keys == nil {
				keys = map[string]string{}
			}
		case in:
			k, v, ok := strings.Cut(line, "=")
			if ok {
				keys[strings.TrimSpace(k)] = strings.TrimSpace(v)
			}
		}
	}
	return keys
}

// maxDesktopBytes caps the autostart desktop entry NPU Chat wrote (a
// dozen lines).
const maxDesktopBytes = 64 << 10
