package main

import (
	"image/color"
)

// Colours of the mark.
var (
	teal   = color.NRGBA{0x14, 0xB8, 0xA6, 0xFF}
	navy   = color.NRGBA{0x1E, 0x2A, 0x78, 0xFF}
	ink    = color.NRGBA{0x16, 0x1B, 0x3D, 0xFF}
	white  = color.NRGBA{0xFF, 0xFF, 0xFF, 0xFF}
	amber  = color.NRGBA{0xF5, 0x9E, 0x0B, 0xFF}
	green  = color.NRGBA{0x22, 0xA5, 0x5A, 0xFF}
	red    = color.NRGBA{0xE0, 0x3A, 0x3A, 0xFF}
	grey   = color.NRGBA{0xC4, 0xC9, 0xD0, 0xFF}
	edge   = color.NRGBA{0x1A, 0x1D, 0x28, 0xFF} // dark rim: keeps a light icon visible on a light panel
	shadow = color.NRGBA{0x00, 0x00, 0x00, 0x30}
)

// appDesign is the side of the app icon's design square.
const appDesign = 512

// appIcon is NPU Chat's mark: a white chat bubble holding a chip (the
// NPU), on a teal-to-navy rounded square. Below 32 px the chip loses
// its pins and grows, so that it still reads as a dark square in a
// bubble at 16 px.
func appIcon(n int) []layer {
	small := n < 32
	bg := roundRect(24, 24, 488, 488, 104)
	bubble := union(
		roundRect(64, 84, 448, 380, 80),
		polygon([2]float64{120, 340}, [2]float64{232, 340}, [2]float64{104, 456}),
	)
	layers := []layer{
		{bg, vertical(teal, navy, 24, 488)},
		{grow(bubble, 6), solid(shadow)},
		{bubble, solid(white)},
	}
	if small {
		chip := roundRect(160, 136, 352, 328, 28)
		die := roundRect(216, 192, 296, 272, 12)
		return append(layers, layer{chip, solid(ink)}, layer{die, solid(amber)})
	}
	chip := roundRect(180, 156, 332, 308, 22)
	layers = append(layers, layer{pins(180, 156, 332, 308, 3, 26, 22, 8), solid(ink)}, layer{chip, solid(ink)})
	die := roundRect(214, 190, 298, 274, 12)
	return append(layers, layer{die, solid(amber)})
}

// pins are k pins per side around the square (x0,y0)-(x1,y1), each
// length long and width wide, with corner radius r.
func pins(x0, y0, x1, y1 float64, k int, length, width, r float64) shape {
	var ss []shape
	side := x1 - x0
	for i := 0; i < k; i++ {
		c := x0 + side*(float64(i)+0.5)/float64(k)
		cy := y0 + (y1-y0)*(float64(i)+0.5)/float64(k)
		ss = append(ss,
			roundRect(c-width/2, y0-length, c+width/2, y0+r, r), // top
			roundRect(c-width/2, y1-r, c+width/2, y1+length, r), // bottom
			roundRect(x0-length, cy-width/2, x0+r, cy+width/2, r),
			roundRect(x1-r, cy-width/2, x1+length, cy+width/2, r),
		)
	}
	return union(ss...)
}

// trayDesign is the side of a tray icon's design square; the icons are
// drawn to be read at 22 px, the usual panel size.
const trayDesign = 64

// States are the tray icon's states, in the order the contact sheet
// shows them.
var states = []string{"off", "loading", "on", "error"}

// trayBubble is the tray's chat bubble, filling the square.
func trayBubble() shape {
	return union(
		roundRect(3, 4, 61, 47, 12),
		polygon([2]float64{11, 40}, [2]float64{31, 40}, [2]float64{6, 62}),
	)
}

// trayIcon is the tray icon of a state. Each state differs in colour and
// in shape, so that it reads without colour too:
//
//	off      a hollow grey bubble with a grey chip
//	loading  an amber bubble with three dots (working)
//	on       a green bubble with a white chip
//	error    a red bubble with an exclamation mark
//
// Filled bubbles have a dark rim and mid-tone fills, so every icon
// stands out on light and on dark panels. The committed tray icons have
// no semi-transparent pixels (see trayImage).
func trayIcon(state string) []layer {
	b := trayBubble()
	// The chip: a square with two pins a side and its die cut out, so
	// that at 22 px it still reads as a chip and not as a blob.
	chip := func(c color.NRGBA) []layer {
		body := roundRect(21, 14.5, 43, 36.5, 3)
		return []layer{
			{pins(21, 14.5, 43, 36.5, 2, 5.5, 5, 1), solid(c)},
			{minus(body, roundRect(27.5, 21, 36.5, 30, 1.5)), solid(c)},
		}
	}
	switch state {
	case "off":
		ls := []layer{
			{stroke(grow(b, -3), 9), solid(edge)},
			{stroke(grow(b, -3), 4.5), solid(grey)},
			{grow(union(roundRect(21, 14.5, 43, 36.5, 3), pins(21, 14.5, 43, 36.5, 2, 5.5, 5, 1)), 2.5), solid(edge)},
		}
		return append(ls, chip(grey)...)
	case "loading":
		ls := []layer{{b, solid(edge)}, {grow(b, -2), solid(amber)}}
		for _, x := range []float64{18, 32, 46} {
			ls = append(ls, layer{circle(x, 25.5, 5.5), solid(ink)})
		}
		return ls
	case "on":
		ls := []layer{{b, solid(edge)}, {grow(b, -2), solid(green)}}
		return append(ls, chip(white)...)
	case "error":
		return []layer{
			{b, solid(edge)}, {grow(b, -2), solid(red)},
			{polygon([2]float64{27.5, 9.5}, [2]float64{36.5, 9.5}, [2]float64{34.5, 30}, [2]float64{29.5, 30}), solid(white)},
			{circle(32, 37.5, 4.5), solid(white)},
		}
	}
	panic("unknown tray state " + state)
}
