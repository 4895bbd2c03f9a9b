package gui

import (
	"image/png"
	"os"
	"path/filepath"
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
	if meta.Details.ID != AppID || meta.Details.Name != "NPU Chat" {
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
