package main

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/npuchat/npuchat/internal/golden"
)

const repoRoot = "../.."

// TestCommittedIconsAreCurrent fails when an icon under gui/ is not what
// this program draws (a design changed without `go run ./tools/icons`,
// or a file was edited by hand). Pixels are compared, not bytes, so a
// different PNG compressor in another Go release does not matter.
func TestCommittedIconsAreCurrent(t *testing.T) {
	files, err := outputs()
	if err != nil {
		t.Fatal(err)
	}
	if golden.Update() {
		if err := write(repoRoot, files); err != nil {
			t.Fatal(err)
		}
	}
	for name, want := range files {
		t.Run(name, func(t *testing.T) {
			got, err := os.ReadFile(filepath.Join(repoRoot, name))
			if err != nil {
				t.Fatalf("%v; run `go run ./tools/icons` from the repository root", err)
			}
			wantImgs, err := decodeIcon(name, want)
			if err != nil {
				t.Fatal(err)
			}
			gotImgs, err := decodeIcon(name, got)
			if err != nil {
				t.Fatalf("committed %s: %v", name, err)
			}
			if len(gotImgs) != len(wantImgs) {
				t.Fatalf("%s holds %d images, want %d; run `go run ./tools/icons`", name, len(gotImgs), len(wantImgs))
			}
			for i := range wantImgs {
				if p, ok := samePixels(gotImgs[i], wantImgs[i]); !ok {
					t.Fatalf("%s image %d differs at %v from what tools/icons draws; run `go run ./tools/icons`", name, i, p)
				}
			}
		})
	}
}

// TestICOHoldsEverySize reads the ICO as Windows does: the directory's
// sizes, BMP entries with their AND mask, and the 256 px PNG.
func TestICOHoldsEverySize(t *testing.T) {
	files, err := outputs()
	if err != nil {
		t.Fatal(err)
	}
	imgs, err := decodeICO(files["gui/icons/npuchat.ico"])
	if err != nil {
		t.Fatal(err)
	}
	if len(imgs) != len(icoSizes) {
		t.Fatalf("%d images, want %d", len(imgs), len(icoSizes))
	}
	for i, n := range icoSizes {
		if got := imgs[i].Bounds().Dx(); got != n {
			t.Errorf("image %d is %d px, want %d", i, got, n)
		}
		if p, ok := samePixels(imgs[i], render(n, appDesign, appIcon(n))); !ok {
			t.Errorf("%d px entry differs from the PNG at %v", n, p)
		}
	}
}

// TestTrayIconsReadOnAnyPanel checks, at the 22 px a panel shows, that
// each state icon stands out from a light and a dark panel and that no
// two states look alike.
func TestTrayIconsReadOnAnyPanel(t *testing.T) {
	panels := map[string]color.NRGBA{"light": {0xF4, 0xF4, 0xF4, 0xFF}, "dark": {0x20, 0x21, 0x24, 0xFF}, "mid": {0x80, 0x80, 0x80, 0xFF}}
	// A mid-grey panel is rare; there the dark rim alone must show.
	minShare := map[string]float64{"light": 0.2, "dark": 0.2, "mid": 0.1}
	icons := map[string]*image.NRGBA{}
	for _, s := range states {
		icons[s] = panelView(s, 22)
	}
	for _, s := range states {
		for pname, bg := range panels {
			// Share of pixels whose colour is a quarter of the RGB cube's
			// diagonal or more away from the panel's: the visible part.
			visible := 0
			for y := 0; y < 22; y++ {
				for x := 0; x < 22; x++ {
					if distance(over(icons[s].NRGBAAt(x, y), bg), bg) >= 0.25 {
						visible++
					}
				}
			}
			share := float64(visible) / (22 * 22)
			t.Logf("%s on a %s panel: %.0f%% stands out", s, pname, share*100)
			if min := minShare[pname]; share < min {
				t.Errorf("%s on a %s panel: only %.0f%% of the icon stands out", s, pname, share*100)
			}
		}
	}
	for i, a := range states {
		for _, b := range states[i+1:] {
			if d := meanDiff(icons[a], icons[b]); d < 0.08 {
				t.Errorf("%s and %s differ by %.3f on average: too alike", a, b, d)
			}
		}
	}
}

// TestTrayIconsHaveNoSemiTransparentPixels: fyne.io/systray garbles the
// colour of semi-transparent pixels on Linux (see trayImage).
func TestTrayIconsHaveNoSemiTransparentPixels(t *testing.T) {
	for _, s := range states {
		img := trayImage(s)
		for i := 3; i < len(img.Pix); i += 4 {
			if a := img.Pix[i]; a != 0 && a != 0xFF {
				t.Fatalf("%s: pixel %d has alpha %d", s, i/4, a)
			}
		}
	}
}

// TestAppIconFillsItsSquare guards against a blank or clipped icon at any
// size: the rounded square covers most of it and its corners are clear.
func TestAppIconFillsItsSquare(t *testing.T) {
	for _, n := range appSizes {
		img := render(n, appDesign, appIcon(n))
		opaque := 0
		for y := 0; y < n; y++ {
			for x := 0; x < n; x++ {
				if img.NRGBAAt(x, y).A == 0xFF {
					opaque++
				}
			}
		}
		if share := float64(opaque) / float64(n*n); share < 0.6 {
			t.Errorf("%d px: %.0f%% opaque, want most of the square", n, share*100)
		}
		if a := img.NRGBAAt(0, 0).A; a != 0 {
			t.Errorf("%d px: corner alpha %d, want a transparent rounded corner", n, a)
		}
	}
}

func decodeIcon(name string, b []byte) ([]*image.NRGBA, error) {
	if filepath.Ext(name) == ".ico" {
		return decodeICO(b)
	}
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	return []*image.NRGBA{toNRGBA(img)}, nil
}

// decodeICO reads an icon file's entries (PNG or 32-bit BMP).
func decodeICO(b []byte) ([]*image.NRGBA, error) {
	le := binary.LittleEndian
	if len(b) < 6 || le.Uint16(b[0:]) != 0 || le.Uint16(b[2:]) != 1 {
		return nil, fmt.Errorf("not an icon file")
	}
	count := int(le.Uint16(b[4:]))
	var out []*image.NRGBA
	for i := 0; i < count; i++ {
		e := b[6+16*i:]
		side := int(e[0])
		if side == 0 {
			side = 256
		}
		size, off := le.Uint32(e[8:]), le.Uint32(e[12:])
		if int(off+size) > len(b) {
			return nil, fmt.Errorf("entry %d runs past the end", i)
		}
		data := b[off : off+size]
		if bytes.HasPrefix(data, []byte("\x89PNG")) {
			img, err := png.Decode(bytes.NewReader(data))
			if err != nil {
				return nil, fmt.Errorf("entry %d: %w", i, err)
			}
			out = append(out, toNRGBA(img))
			continue
		}
		w, h, bpp := int(int32(le.Uint32(data[4:]))), int(int32(le.Uint32(data[8:]))), le.Uint16(data[14:])
		if w != side || h != 2*side || bpp != 32 {
			return nil, fmt.Errorf("entry %d: BMP %dx%d at %d bpp, want %dx%d at 32", i, w, h, bpp, side, 2*side)
		}
		maskRow := (side + 31) / 32 * 4
		if want := 40 + side*side*4 + maskRow*side; len(data) != want {
			return nil, fmt.Errorf("entry %d: %d bytes, want %d", i, len(data), want)
		}
		img := image.NewNRGBA(image.Rect(0, 0, side, side))
		px := data[40:]
		mask := data[40+side*side*4:]
		for row := 0; row < side; row++ {
			y := side - 1 - row
			for x := 0; x < side; x++ {
				p := px[(row*side+x)*4:]
				c := color.NRGBA{p[2], p[1], p[0], p[3]}
				masked := mask[row*maskRow+x/8]&(0x80>>(x%8)) != 0
				if masked != (c.A == 0) {
					return nil, fmt.Errorf("entry %d: AND mask disagrees with alpha at %d,%d", i, x, y)
				}
				img.SetNRGBA(x, y, c)
			}
		}
		out = append(out, img)
	}
	return out, nil
}

func toNRGBA(img image.Image) *image.NRGBA {
	if n, ok := img.(*image.NRGBA); ok {
		return n
	}
	b := img.Bounds()
	n := image.NewNRGBA(b)
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			n.Set(x, y, img.At(x, y))
		}
	}
	return n
}

// samePixels compares two images; fully transparent pixels are equal
// whatever their colour.
func samePixels(a, b *image.NRGBA) (image.Point, bool) {
	if a.Bounds() != b.Bounds() {
		return a.Bounds().Size(), false
	}
	for y := a.Bounds().Min.Y; y < a.Bounds().Max.Y; y++ {
		for x := a.Bounds().Min.X; x < a.Bounds().Max.X; x++ {
			ca, cb := a.NRGBAAt(x, y), b.NRGBAAt(x, y)
			if ca != cb && !(ca.A == 0 && cb.A == 0) {
				return image.Pt(x, y), false
			}
		}
	}
	return image.Point{}, true
}

func over(c, bg color.NRGBA) color.NRGBA {
	a := float64(c.A) / 255
	mix := func(f, b uint8) uint8 { return uint8(math.Round(float64(f)*a + float64(b)*(1-a))) }
	return color.NRGBA{mix(c.R, bg.R), mix(c.G, bg.G), mix(c.B, bg.B), 0xFF}
}

// distance is the distance of two colours in the RGB cube, 0 to 1.
func distance(a, b color.NRGBA) float64 {
	d := func(x, y uint8) float64 { return (float64(x) - float64(y)) / 255 }
	return math.Sqrt((d(a.R, b.R)*d(a.R, b.R) + d(a.G, b.G)*d(a.G, b.G) + d(a.B, b.B)*d(a.B, b.B)) / 3)
}

// meanDiff is the mean absolute channel difference of two icons over a
// mid-grey panel, 0 (same) to 1.
func meanDiff(a, b *image.NRGBA) float64 {
	bg := color.NRGBA{0x80, 0x80, 0x80, 0xFF}
	var sum float64
	n := a.Bounds().Dx() * a.Bounds().Dy()
	for y := 0; y < a.Bounds().Dy(); y++ {
		for x := 0; x < a.Bounds().Dx(); x++ {
			ca, cb := over(a.NRGBAAt(x, y), bg), over(b.NRGBAAt(x, y), bg)
			sum += (math.Abs(float64(ca.R)-float64(cb.R)) + math.Abs(float64(ca.G)-float64(cb.G)) + math.Abs(float64(ca.B)-float64(cb.B))) / (3 * 255)
		}
	}
	return sum / float64(n)
}
