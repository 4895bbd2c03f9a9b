package sample

import (
	"math"
	"testing"
)

func TestArgmax(t *testing.T) {
	nan := float32(math.NaN())
	cases := []struct {
		name string
		x    []float32
		want int
	}{
		{"empty", nil, 0},
		{"one", []float32{-3}, 0},
		{"largest in the middle", []float32{0.1, 3, -1, 2.9}, 1},
		{"largest last", []float32{-5, -4, -3}, 2},
		{"first on ties", []float32{1, 7, 2, 7}, 1},
		{"negative infinity loses", []float32{float32(math.Inf(-1)), -1e30}, 1},
		{"a NaN after the first is passed over", []float32{1, nan, 2}, 2},
	}
	for _, c := range cases {
		if got := Argmax(c.x); got != c.want {
			t.Errorf("%s: Argmax(%v) = %d, want %d", c.name, c.x, got, c.want)
		}
	}
}
