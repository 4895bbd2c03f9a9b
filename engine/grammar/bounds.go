package grammar

import (
	"fmt"
	"math"
	"strconv"
)

// Numeric bounds (minimum, maximum, exclusiveMinimum, exclusiveMaximum)
// are kept while a number is written: every digit must leave a way to a
// number within them, and the number may end only there. Integers are
// exact (int64); other numbers are checked in float64 and written
// without an exponent (the language stays a subset: every number it
// gives is in bounds).

// maxMagnitude is the largest integer part a number may have (maxIntDigits
// nines).
var maxMagnitude = int64(math.Pow10(maxIntDigits)) - 1

// readBounds reads a schema's numeric bounds into nd (kInteger or
// kNumber). Both the draft 6+ form (exclusiveMinimum: number) and the
// draft 4 form (exclusiveMinimum: true beside minimum) are read.
func readBounds(s *value, nd *node, path string) error {
	num := func(key string) (float64, bool, error) {
		v := s.get(key)
		if v == nil || v.kind == 'b' {
			return 0, false, nil
		}
		f, err := strconv.ParseFloat(v.str, 64)
		if v.kind != 'n' || err != nil || math.IsInf(f, 0) {
			return 0, false, fmt.Errorf("%s/%s: must be a number", path, key)
		}
		return f, true, nil
	}
	flag := func(key string) bool {
		v := s.get(key)
		return v != nil && v.kind == 'b' && v.b
	}
	for _, k := range []string{"exclusiveMinimum", "exclusiveMaximum"} {
		if v := s.get(k); v != nil && v.kind != 'n' && v.kind != 'b' {
			return fmt.Errorf("%s/%s: must be a number (or, in draft 4, a boolean)", path, k)
		}
	}
	lo, hasLo, err := num("minimum")
	if err != nil {
		return err
	}
	hi, hasHi, err := num("maximum")
	if err != nil {
		return err
	}
	exLo, exHi := hasLo && flag("exclusiveMinimum"), hasHi && flag("exclusiveMaximum")
	if x, ok, err := num("exclusiveMinimum"); err != nil {
		return err
	} else if ok && (!hasLo || x >= lo) {
		lo, hasLo, exLo = x, true, true
	}
	if x, ok, err := num("exclusiveMaximum"); err != nil {
		return err
	} else if ok && (!hasHi || x <= hi) {
		hi, hasHi, exHi = x, true, true
	}
	if !hasLo && !hasHi {
		return nil
	}
	nd.bounded = true
	limit := float64(maxMagnitude)
	if nd.kind == kInteger {
		nd.lo, nd.hi = -maxMagnitude, maxMagnitude
		if hasLo {
			l := math.Ceil(lo)
			if exLo && l == lo {
				l++
			}
			if l > limit {
				return fmt.Errorf("%s/minimum: %v is past the largest integer NPU Chat writes (%d digits)", path, lo, maxIntDigits)
			}
			nd.lo = int64(max(l, -limit))
		}
		if hasHi {
			h := math.Floor(hi)
			if exHi && h == hi {
				h--
			}
			if h < -limit {
				return fmt.Errorf("%s/maximum: %v is past the smallest integer NPU Chat writes (%d digits)", path, hi, maxIntDigits)
			}
			nd.hi = int64(min(h, limit))
		}
		if nd.lo > nd.hi {
			return fmt.Errorf("%s: no integer is within minimum/maximum (exclusive bounds included): nothing can match", path)
		}
		return nil
	}
	nd.flo, nd.fhi, nd.hasLo, nd.hasHi, nd.exLo, nd.exHi = lo, hi, hasLo, hasHi, exLo, exHi
	switch {
	case hasLo && hasHi && (lo > hi || lo == hi && (exLo || exHi)):
		return fmt.Errorf("%s: no number is within minimum/maximum (exclusive bounds included): nothing can match", path)
	case hasLo && lo >= limit+1, hasHi && hi <= -(limit+1):
		return fmt.Errorf("%s/minimum or maximum: past the largest number NPU Chat writes (%d integer digits)", path, maxIntDigits)
	}
	return nil
}

// inBounds reports whether the number x (the text of a JSON number) is
// within nd's bounds, for enum and const values.
func (nd *node) inBounds(text string) bool {
	if !nd.bounded {
		return true
	}
	x, err := strconv.ParseFloat(text, 64)
	if err != nil {
		return false
	}
	if nd.kind == kInteger {
		return x >= float64(nd.lo) && x <= float64(nd.hi)
	}
	return nd.lowOK(x) && nd.highOK(x)
}

func (nd *node) lowOK(x float64) bool {
	return !nd.hasLo || x > nd.flo || x == nd.flo && !nd.exLo
}

func (nd *node) highOK(x float64) bool {
	return !nd.hasHi || x < nd.fhi || x == nd.fhi && !nd.exHi
}

// numberOK reports whether the number in frame f can still end within
// nd's bounds (final: whether it ends within them now).
func numberOK(nd *node, f *frame, final bool) bool {
	if !nd.bounded {
		return true
	}
	neg := f.a == 1
	if nd.kind == kInteger {
		// The magnitudes m the number can reach, against the bounds
		// mirrored for a negative number.
		mlo, mhi := nd.lo, nd.hi
		if neg {
			mlo, mhi = -nd.hi, -nd.lo
		}
		mlo = max(mlo, 0)
		if mlo > mhi {
			return false
		}
		switch {
		case f.st == stNumSign:
			return !final
		case final || f.st == stNumZero:
			return f.v >= mlo && f.v <= mhi
		}
		p := int64(1)
		for k := 0; k <= maxIntDigits-int(f.b); k++ {
			a := f.v * p
			if a > mhi {
				return false
			}
			if a+p-1 >= mlo {
				return true
			}
			p *= 10
		}
		return false
	}
	x := float64(f.v)
	if f.st == stNumFrac {
		x += float64(f.w) / math.Pow10(int(f.b))
	}
	if final {
		if neg {
			x = -x
		}
		return nd.lowOK(x) && nd.highOK(x)
	}
	// The magnitudes reachable form intervals [a, b); the value is ±m.
	in := func(a, b float64) bool {
		// Bounds on the magnitude: value >= lo is m <= -lo when negative.
		var lo, hi float64
		var hasLo, hasHi, exLo, exHi bool
		if neg {
			lo, hasLo, exLo = -nd.fhi, nd.hasHi, nd.exHi
			hi, hasHi, exHi = -nd.flo, nd.hasLo, nd.exLo
		} else {
			lo, hasLo, exLo = nd.flo, nd.hasLo, nd.exLo
			hi, hasHi, exHi = nd.fhi, nd.hasHi, nd.exHi
		}
		lower := a
		if hasLo && lo > lower {
			lower = lo
		}
		if lower >= b {
			return false
		}
		if hasHi && (lower > hi || lower == hi && exHi) {
			return false
		}
		if !hasLo || lower > lo || !exLo {
			return true
		}
		return !hasHi || lower < hi // just above an exclusive lower bound
	}
	switch f.st {
	case stNumSign:
		return in(0, float64(maxMagnitude)+1)
	case stNumZero:
		return in(0, 1)
	case stNumDot:
		return in(x, x+1)
	case stNumFrac:
		return in(x, x+math.Pow10(-int(f.b)))
	}
	p := 1.0
	for k := 0; k <= maxIntDigits-int(f.b); k++ {
		if in(x*p, (x+1)*p) {
			return true
		}
		p *= 10
	}
	return false
}
