package main

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"image"
	"image/color"
	"image/draw"
)

// encodeICO writes a Windows icon file holding each image: 256 px as PNG
// (the form Windows reads at that size) and smaller sizes as 32-bit BMP
// with an AND mask, which every Windows tool and resource compiler reads.
func encodeICO(imgs []*image.NRGBA) ([]byte, error) {
	var dir, data bytes.Buffer
	le := binary.LittleEndian
	binary.Write(&dir, le, [3]uint16{0, 1, uint16(len(imgs))}) // reserved, type icon, count
	offset := 6 + 16*len(imgs)
	for _, img := range imgs {
		n := img.Bounds().Dx()
		if n != img.Bounds().Dy() || n > 256 {
			return nil, fmt.Errorf("ico: image %dx%d is not a square of at most 256 px", n, img.Bounds().Dy())
		}
		var entry []byte
		if n == 256 {
			b, err := encodePNG(img)
			if err != nil {
				return nil, err
			}
			entry = b
		} else {
			entry = bmpEntry(img)
		}
		side := uint8(n) // 0 means 256
		dir.Write([]byte{side, side, 0, 0})
		binary.Write(&dir, le, [2]uint16{1, 32}) // planes, bits per pixel
		binary.Write(&dir, le, [2]uint32{uint32(len(entry)), uint32(offset)})
		data.Write(entry)
		offset += len(entry)
	}
	dir.Write(data.Bytes())
	return dir.Bytes(), nil
}

// bmpEntry is an icon image in BMP form: a BITMAPINFOHEADER of double
// height, BGRA rows bottom-up, then the 1-bit AND mask (set where fully
// transparent), rows padded to 4 bytes.
func bmpEntry(img *image.NRGBA) []byte {
	n := img.Bounds().Dx()
	var b bytes.Buffer
	le := binary.LittleEndian
	maskRow := (n + 31) / 32 * 4
	binary.Write(&b, le, struct {
		Size                         uint32
		Width, Height                int32
		Planes, BitCount             uint16
		Compression, SizeImage       uint32
		XPels, YPels, Used, Required uint32
	}{40, int32(n), int32(2 * n), 1, 32, 0, uint32(n*n*4 + maskRow*n), 0, 0, 0, 0})
	for y := n - 1; y >= 0; y-- {
		for x := 0; x < n; x++ {
			c := img.NRGBAAt(x, y)
			b.Write([]byte{c.B, c.G, c.R, c.A})
		}
	}
	for y := n - 1; y >= 0; y-- {
		row := make([]byte, maskRow)
		for x := 0; x < n; x++ {
			if img.NRGBAAt(x, y).A == 0 {
				row[x/8] |= 0x80 >> (x % 8)
			}
		}
		b.Write(row)
	}
	return b.Bytes()
}

// contactSheet shows every icon for a person to check: the app icon at
// each hicolor size enlarged with visible pixels, and the tray icons at
// 22 px, as a panel shows them, on a light and a dark panel (enlarged
// ×6, and at true size at the end of each row).
func contactSheet() *image.NRGBA {
	const w, h = 1150, 1200
	sheet := image.NewNRGBA(image.Rect(0, 0, w, h))
	draw.Draw(sheet, sheet.Bounds(), image.NewUniform(color.NRGBA{0xE8, 0xE8, 0xEC, 0xFF}), image.Point{}, draw.Src)
	x := 16
	for _, n := range []int{16, 22, 24, 32, 48, 64} {
		k := 4
		if n >= 48 {
			k = 3
		}
		blit(sheet, render(n, appDesign, appIcon(n)), x, 16, k)
		x += n*k + 16
	}
	x = 16
	for _, n := range []int{128, 256, 512} {
		blit(sheet, render(n, appDesign, appIcon(n)), x, 300, 1)
		x += n + 16
	}
	panels := []color.NRGBA{{0xF4, 0xF4, 0xF4, 0xFF}, {0x20, 0x21, 0x24, 0xFF}}
	for i, bg := range panels {
		y := 830 + i*170
		draw.Draw(sheet, image.Rect(0, y, w, y+160), image.NewUniform(bg), image.Point{}, draw.Src)
		x = 16
		for _, s := range states {
			blit(sheet, panelView(s, 22), x, y+14, 6)
			x += 22*6 + 24
		}
		for _, s := range states {
			blit(sheet, panelView(s, 22), x, y+69, 1)
			x += 30
		}
		x += 24
		for _, s := range states {
			blit(sheet, trayImage(s), x, y+48, 1)
			x += traySize + 12
		}
	}
	return sheet
}

// blit draws src over dst at (x, y), each source pixel a k×k block.
func blit(dst *image.NRGBA, src *image.NRGBA, x, y, k int) {
	b := src.Bounds()
	big := image.NewNRGBA(image.Rect(0, 0, b.Dx()*k, b.Dy()*k))
	for py := 0; py < big.Bounds().Dy(); py++ {
		for px := 0; px < big.Bounds().Dx(); px++ {
			big.SetNRGBA(px, py, src.NRGBAAt(b.Min.X+px/k, b.Min.Y+py/k))
		}
	}
	draw.Draw(dst, big.Bounds().Add(image.Pt(x, y)), big, image.Point{}, draw.Over)
}
