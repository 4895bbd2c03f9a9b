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
	"image/color"
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
		b, err := encodePNG(trayImage(s))
		if err != nil {
			return nil, err
		}
		files["gui/icons/tray-"+s+".png"] = b
	}
	return files, nil
}

// trayImage is the committed tray icon of a state: drawn at traySize
// with every pixel either opaque or transparent. fyne.io/systray v1.12.2
// turns a PNG into the StatusNotifierItem pixmap by taking the low byte
// of each premultiplied 16-bit channel, which garbles the colour of any
// semi-transparent pixel (anti-aliased edges turn into coloured noise);
// opaque and transparent pixels come through exactly. The panel scales
// the 64 px icon down to its size, and that smooths the outline again
// (panelView shows how).
func trayImage(state string) *image.NRGBA {
	img := render(traySize, trayDesign, trayIcon(state))
	for i := 3; i < len(img.Pix); i += 4 {
		if img.Pix[i] >= 0x80 {
			img.Pix[i] = 0xFF
		} else {
			img.Pix[i-3], img.Pix[i-2], img.Pix[i-1], img.Pix[i] = 0, 0, 0, 0
		}
	}
	return img
}

// panelView is a tray icon as a panel of n px shows it: the committed
// image scaled down with a box filter (premultiplied).
func panelView(state string, n int) *image.NRGBA {
	src := trayImage(state)
	dst := image.NewNRGBA(image.Rect(0, 0, n, n))
	scale := float64(traySize) / float64(n)
	for y := 0; y < n; y++ {
		for x := 0; x < n; x++ {
			var r, g, b, a, w float64
			for sy := int(float64(y) * scale); sy < int(float64(y+1)*scale+0.999) && sy < traySize; sy++ {
				for sx := int(float64(x) * scale); sx < int(float64(x+1)*scale+0.999) && sx < traySize; sx++ {
					c := src.NRGBAAt(sx, sy)
					ca := float64(c.A) / 255
					r, g, b, a = r+float64(c.R)*ca, g+float64(c.G)*ca, b+float64(c.B)*ca, a+ca
					w++
				}
			}
			if a == 0 {
				continue
			}
			dst.SetNRGBA(x, y, color.NRGBA{uint8(r/a + 0.5), uint8(g/a + 0.5), uint8(b/a + 0.5), uint8(a/w*255 + 0.5)})
		}
	}
	return dst
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
