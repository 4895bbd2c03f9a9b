package main

import (
	"image"
	"image/color"
	"math"
)

// A shape is a signed distance field in design units: negative inside,
// positive outside, zero on the edge. Distances let one rasterizer give
// every shape the same anti-aliased edge at any size.
type shape func(x, y float64) float64

// paint is a colour that may vary over the design square (a gradient).
type paint func(x, y float64) color.NRGBA

// layer is one filled shape; layers are composited in order.
type layer struct {
	s shape
	p paint
}

// solid paints one colour.
func solid(c color.NRGBA) paint { return func(x, y float64) color.NRGBA { return c } }

// vertical paints a gradient from top (y = y0) to bottom (y = y1).
func vertical(top, bottom color.NRGBA, y0, y1 float64) paint {
	return func(x, y float64) color.NRGBA {
		t := math.Max(0, math.Min(1, (y-y0)/(y1-y0)))
		mix := func(a, b uint8) uint8 { return uint8(math.Round(float64(a) + t*(float64(b)-float64(a)))) }
		return color.NRGBA{mix(top.R, bottom.R), mix(top.G, bottom.G), mix(top.B, bottom.B), mix(top.A, bottom.A)}
	}
}

// roundRect is the rectangle (x0,y0)-(x1,y1) with corners of radius r.
func roundRect(x0, y0, x1, y1, r float64) shape {
	cx, cy := (x0+x1)/2, (y0+y1)/2
	hx, hy := (x1-x0)/2-r, (y1-y0)/2-r
	return func(x, y float64) float64 {
		qx, qy := math.Abs(x-cx)-hx, math.Abs(y-cy)-hy
		out := math.Hypot(math.Max(qx, 0), math.Max(qy, 0))
		return out + math.Min(math.Max(qx, qy), 0) - r
	}
}

// circle is the disc of radius r around (cx, cy).
func circle(cx, cy, r float64) shape {
	return func(x, y float64) float64 { return math.Hypot(x-cx, y-cy) - r }
}

// polygon is a closed polygon given by its corners (exact distance).
func polygon(pts ...[2]float64) shape {
	return func(x, y float64) float64 {
		d := math.Inf(1)
		inside := false
		for i, j := 0, len(pts)-1; i < len(pts); j, i = i, i+1 {
			ax, ay := pts[j][0], pts[j][1]
			bx, by := pts[i][0], pts[i][1]
			ex, ey := bx-ax, by-ay
			wx, wy := x-ax, y-ay
			t := math.Max(0, math.Min(1, (wx*ex+wy*ey)/(ex*ex+ey*ey)))
			d = math.Min(d, math.Hypot(wx-ex*t, wy-ey*t))
			if (ay > y) != (by > y) && x < ax+(y-ay)*ex/ey {
				inside = !inside
			}
		}
		if inside {
			return -d
		}
		return d
	}
}

// union is every point inside any of the shapes.
func union(ss ...shape) shape {
	return func(x, y float64) float64 {
		d := math.Inf(1)
		for _, s := range ss {
			d = math.Min(d, s(x, y))
		}
		return d
	}
}

// minus is a with b cut out of it.
func minus(a, b shape) shape {
	return func(x, y float64) float64 { return math.Max(a(x, y), -b(x, y)) }
}

// stroke is a band of width w centred on the shape's edge.
func stroke(s shape, w float64) shape {
	return func(x, y float64) float64 { return math.Abs(s(x, y)) - w/2 }
}

// grow moves the shape's edge outward by d (inward when d < 0).
func grow(s shape, d float64) shape {
	return func(x, y float64) float64 { return s(x, y) - d }
}

// render draws the layers, designed on a square of side design, into an
// n×n image. Each pixel's coverage comes from the distance at its centre,
// one pixel wide, so edges are smooth at 16 px and sharp at 512 px.
func render(n int, design float64, layers []layer) *image.NRGBA {
	img := image.NewNRGBA(image.Rect(0, 0, n, n))
	unit := design / float64(n) // design units per pixel
	for py := 0; py < n; py++ {
		for px := 0; px < n; px++ {
			x, y := (float64(px)+0.5)*unit, (float64(py)+0.5)*unit
			var r, g, b, a float64 // premultiplied, 0..1
			for _, l := range layers {
				cov := math.Max(0, math.Min(1, 0.5-l.s(x, y)/unit))
				if cov == 0 {
					continue
				}
				c := l.p(x, y)
				ca := float64(c.A) / 255 * cov
				r = float64(c.R)/255*ca + r*(1-ca)
				g = float64(c.G)/255*ca + g*(1-ca)
				b = float64(c.B)/255*ca + b*(1-ca)
				a = ca + a*(1-ca)
			}
			if a == 0 {
				continue
			}
			to8 := func(v float64) uint8 { return uint8(math.Round(math.Max(0, math.Min(1, v)) * 255)) }
			img.SetNRGBA(px, py, color.NRGBA{to8(r / a), to8(g / a), to8(b / a), to8(a)})
		}
	}
	return img
}
