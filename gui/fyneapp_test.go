package gui

import (
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/BurntSushi/toml"
)

// TestFyneAppTOML reads FyneApp.toml as `fyne package` does (the same
// fields as fyne 2.7.1's metadata.FyneApp) and fails on a field fyne
// does not know, an icon that is missing or not 512 px, or an ID that
// is not the one the tray runs with.
func TestFyneAppTOML(t *testing.T) {
	var meta struct {
		Website string
		Details struct {
			Icon, Name, ID, Version string
			Build                   int
		}
		LinuxAndBSD struct {
			GenericName, Comment string
			Categories, Keywords []string
			ExecParams           string
		}
	}
	md, err := toml.DecodeFile(filepath.Join("..", "FyneApp.toml"), &meta)
	if err != nil {
		t.Fatal(err)
	}
	if un := md.Undecoded(); len(un) > 0 {
		t.Fatalf("FyneApp.toml has fields fyne does not read: %v", un)
	}
	if meta.Details.ID != AppID || meta.Details.Name != AppName {
		t.Fatalf("details %+v, want ID %s", meta.Details, AppID)
	}
	f, err := os.Open(filepath.Join("..", meta.Details.Icon))
	if err != nil {
		t.Fatalf("FyneApp.toml's icon: %v", err)
	}
	defer f.Close()
	cfg, err := png.DecodeConfig(f)
	if err != nil || cfg.Width != 512 || cfg.Height != 512 {
		t.Fatalf("%s: %dx%d, %v; want a 512 px PNG", meta.Details.Icon, cfg.Width, cfg.Height, err)
	}
}

// TestMakeBuildTakesTheVersionOfFyneAppTOML: `make build` gives the
// program FyneApp.toml's version (-X main.version), the one the About
// box, the settings window and fyne's metadata show, not a git hash.
func TestMakeBuildTakesTheVersionOfFyneAppTOML(t *testing.T) {
	var meta struct{ Details struct{ Version string } }
	if _, err := toml.DecodeFile(filepath.Join("..", "FyneApp.toml"), &meta); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("make", "-n", "-s", "build")
	cmd.Dir = ".."
	cmd.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "VERSION=") })
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make -n build: %v\n%s", err, out)
	}
	if want := "-X main.version=" + meta.Details.Version + " "; !strings.Contains(string(out)+" ", want) &&
		!strings.Contains(string(out), "-X main.version="+meta.Details.Version+`"`) {
		t.Fatalf("make build does not pass FyneApp.toml's version %q:\n%s", meta.Details.Version, out)
	}
	if m := metadata(meta.Details.Version); m.Name != AppName || m.ID != AppID || m.Version != meta.Details.Version {
		t.Fatalf("fyne's metadata %+v", m)
	}
}
