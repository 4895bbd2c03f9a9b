package desktoptest

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"image"
	"image/color"
	"math/bits"
	"os"
	"os/exec"
)

// Screenshot is what the display shows now: the root window read with
// xwd (Debian's x11-apps), as a person would see it. StartXvfb's root
// is black, so the windows stand out from it.
func (d *Display) Screenshot() (*image.NRGBA, error) {
	cmd := exec.Command("xwd", "-root", "-silent")
	cmd.Env = append(os.Environ(), "DISPLAY="+d.Name)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("xwd -root on %s (x11-apps, scripts/setup.d/tray.apt): %v: %s", d.Name, err, stderr.Bytes())
	}
	return decodeXWD(out)
}

// decodeXWD reads an X Window Dump of a TrueColor visual at 24 or 32
// bits per pixel (what Xvfb's 24-bit screen gives).
func decodeXWD(b []byte) (*image.NRGBA, error) {
	if len(b) < 100 {
		return nil, fmt.Errorf("xwd: %d bytes, no header", len(b))
	}
	var h [25]uint32
	for i := range h {
		h[i] = binary.BigEndian.Uint32(b[4*i:])
	}
	headerSize, version, format := h[0], h[1], h[2]
	width, height := int(h[4]), int(h[5])
	byteOrder, bpp, bytesPerLine := h[7], int(h[11]), int(h[12])
	masks := [3]uint32{h[14], h[15], h[16]}
	ncolors := int(h[19])
	if version != 7 || format != 2 || (bpp != 32 && bpp != 24) {
		return nil, fmt.Errorf("xwd: version %d, format %d, %d bits per pixel: not a 24/32-bit ZPixmap", version, format, bpp)
	}
	off := int(headerSize) + 12*ncolors
	if len(b) < off+bytesPerLine*height {
		return nil, fmt.Errorf("xwd: %d bytes, want %d", len(b), off+bytesPerLine*height)
	}
	img := image.NewNRGBA(image.Rect(0, 0, width, height))
	step := bpp / 8
	// channel scales a masked field to 8 bits.
	channel := func(p, mask uint32) uint8 {
		shift := bits.TrailingZeros32(mask)
		width := bits.OnesCount32(mask)
		v := (p & mask) >> shift
		if width >= 8 {
			return uint8(v >> (width - 8))
		}
		return uint8(v << (8 - width))
	}
	for y := 0; y < height; y++ {
		row := b[off+y*bytesPerLine:]
		for x := 0; x < width; x++ {
			px := row[x*step : x*step+step]
			var p uint32
			for i := 0; i < step; i++ {
				if byteOrder == 0 { // LSBFirst
					p |= uint32(px[i]) << (8 * i)
				} else {
					p = p<<8 | uint32(px[i])
				}
			}
			img.SetNRGBA(x, y, color.NRGBA{channel(p, masks[0]), channel(p, masks[1]), channel(p, masks[2]), 0xFF})
		}
	}
	return img, nil
}

// Crop returns the part of a screenshot that is not the black root: the
// bounding box of the windows shown.
func Crop(img *image.NRGBA) *image.NRGBA {
	r := image.Rectangle{}
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			c := img.NRGBAAt(x, y)
			if c.R|c.G|c.B != 0 {
				r = r.Union(image.Rect(x, y, x+1, y+1))
			}
		}
	}
	if r.Empty() {
		return img
	}
	return img.SubImage(r).(*image.NRGBA)
}
