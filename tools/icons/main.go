// Command icons draws NPU Chat's icons and writes them into gui/:
//
//	gui/icon.png                 the app icon at 512 px (FyneApp.toml's Icon)
//	gui/icons/npuchat-<N>.png    the app icon at the Linux hicolor sizes
//	gui/icons/npuchat.ico        the app icon for Windows (16 to 256 px)
//	gui/icons/tray-<state>.png   the tray icon of each state (off, loading, on, error)
//
// Run it from the repository root after changing a design:
//
//	go run ./tools/icons
//
// The outputs are committed; the package's test fails when they differ
// from what this program draws. -sheet FILE also writes an enlarged
// contact sheet (every icon at its size, the tray icons at 22 px on a
// light and a dark panel) for a person to look at.
//
// The shapes are signed distance fields rasterized with one pixel of
// anti-aliasing (raster.go), so the program needs only the standard
// library.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"image"
	"image/png"
	"os"
	"path/filepath"
)

// AppSizes are the Linux hicolor sizes of the app icon.
var appSizes = []int{16, 22, 24, 32, 48, 64, 128, 256, 512}

// icoSizes are the sizes in the Windows ICO (Explorer, taskbar, shortcuts).
var icoSizes = []int{16, 24, 32, 48, 64, 128, 256}

// traySize is the side of the committed tray icons; panels scale them
// down (22 px is typical) and HiDPI panels use the detail.
const traySize = 64

func main() {
	root := flag.String("root", ".", "repository root to write gui/ under")
	sheet := flag.String("sheet", "", "also write an enlarged contact sheet PNG here")
	flag.Parse()
	files, err := outputs()
	if err == nil {
		err = write(*root, files)
	}
	if err == nil && *sheet != "" {
		err = writePNG(*sheet, contactSheet())
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "icons:", err)
		os.Exit(1)
	}
}

// outputs returns every committed icon file, by path from the repository
// root, with its content.
func outputs() (map[string][]byte, error) {
	files := map[string][]byte{}
	for _, n := range appSizes {
		b, err := encodePNG(render(n, appDesign, appIcon(n)))
		if err != nil {
			return nil, err
		}
		files[fmt.Sprintf("gui/icons/npuchat-%d.png", n)] = b
		if n == 512 {
			files["gui/icon.png"] = b
		}
	}
	var imgs []*image.NRGBA
	for _, n := range icoSizes {
		imgs = append(imgs, render(n, appDesign, appIcon(n)))
	}
	ico, err := encodeICO(imgs)
	if err != nil {
		return nil, err
	}
	files["gui/icons/npuchat.ico"] = ico
	for _, s := range states {
		b, err := encodePNG(render(traySize, trayDesign, trayIcon(s)))
		if err != nil {
			return nil, err
		}
		files["gui/icons/tray-"+s+".png"] = b
	}
	return files, nil
}

func write(root string, files map[string][]byte) error {
	for name, b := range files {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

func encodePNG(img image.Image) ([]byte, error) {
	var buf bytes.Buffer
	enc := png.Encoder{CompressionLevel: png.BestCompression}
	if err := enc.Encode(&buf, img); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func writePNG(path string, img image.Image) error {
	b, err := encodePNG(img)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}
