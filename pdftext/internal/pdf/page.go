// Copyright 2014 The Go Authors.  All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package pdf

import (
	"errors"
	"fmt"
)

// maxGState bounds the graphics state stack (q without Q): the PDF
// specification's implementation limit is 28 (PDF 32000-1:2008, C.2).
const maxGState = 256

// maxParents bounds the chain of Parent links followed for an inherited
// page attribute (a page tree is a few levels deep).
const maxParents = 64

// A Page represent a single page in a PDF file.
// The methods interpret a Page dictionary stored in V.
type Page struct {
	V Value
}

// Pages walks the page tree in order and returns its first limit pages;
// total is the number of pages the file has (the tree's own count when
// the walk stopped at limit). A tree whose kids lead back to an ancestor
// or to a page already met is ErrLoop; one deeper than Limits.Depth is
// a *LimitError.
func (r *Reader) Pages(limit int) (pages []Page, total int, err error) {
	defer catch(&err)
	root := r.Trailer().Key("Root").Key("Pages")
	if root.Kind() != Dict {
		return nil, 0, errors.New("malformed PDF: no page tree")
	}
	seen := make(map[objptr]bool)
	found := 0
	var walk func(node Value, depth int) bool // false: stop, max reached
	walk = func(node Value, depth int) bool {
		r.g.tick()
		if depth > r.g.lim.Depth {
			r.g.fail(&LimitError{What: "depth", Limit: int64(r.g.lim.Depth)})
		}
		kids := node.Key("Kids")
		for i := 0; i < kids.Len(); i++ {
			r.g.tick()
			kid := kids.Index(i)
			if kid.Kind() != Dict {
				continue
			}
			if ptr, ok := kids.data.(array)[i].(objptr); ok {
				if seen[ptr] {
					r.g.fail(ErrLoop)
				}
				seen[ptr] = true
			}
			switch kid.Key("Type").Name() {
			case "Pages":
				if !walk(kid, depth+1) {
					return false
				}
			case "Page":
				found++
				if len(pages) == limit {
					return false
				}
				pages = append(pages, Page{kid})
			}
		}
		return true
	}
	if root.ptr != (objptr{}) {
		seen[root.ptr] = true
	}
	if walk(root, 1) {
		return pages, found, nil
	}
	return pages, int(max(root.Key("Count").Int64(), int64(found))), nil
}

func (p Page) findInherited(key string) Value {
	n := 0
	for v := p.V; !v.IsNull(); v = v.Key("Parent") {
		if r := v.Key(key); !r.IsNull() {
			return r
		}
		if n++; n > maxParents {
			break
		}
	}
	return Value{}
}

// Resources returns the resources dictionary associated with the page.
func (p Page) Resources() Value {
	return p.findInherited("Resources")
}

// Font returns the font with the given name associated with the page.
func (p Page) Font(name string) Font {
	return Font{p.Resources().Key("Font").Key(name), nil}
}

// A Font represent a font in a PDF file.
// The methods interpret a Font dictionary stored in V.
type Font struct {
	V   Value
	enc TextEncoding
}

// FirstChar returns the code point of the first character in the font.
func (f Font) FirstChar() int {
	return int(f.V.Key("FirstChar").Int64())
}

// LastChar returns the code point of the last character in the font.
func (f Font) LastChar() int {
	return int(f.V.Key("LastChar").Int64())
}

// Width returns the width of the given code point.
func (f Font) Width(code int) float64 {
	first := f.FirstChar()
	last := f.LastChar()
	if code < first || last < code {
		return 0
	}
	return f.V.Key("Widths").Index(code - first).Float64()
}

// Encoder returns the encoding between font code point sequences and UTF-8,
// parsed once per Font.
func (f *Font) Encoder() TextEncoding {
	if f.enc == nil {
		f.enc = f.getEncoder()
	}
	return f.enc
}

func (f Font) getEncoder() TextEncoding {
	enc := f.V.Key("Encoding")
	switch enc.Kind() {
	case Name:
		switch enc.Name() {
		case "WinAnsiEncoding":
			return &byteEncoder{&winAnsiEncoding}
		case "MacRomanEncoding":
			return &byteEncoder{&macRomanEncoding}
		case "Identity-H":
			return f.charmapEncoding()
		case "UniGB-UCS2-H":
			return &ucs2Encoder{}
		default:
			return &nopEncoder{}
		}
	case Dict:
		return newDictEncoder(enc.Key("Differences"))
	case Null:
		return f.charmapEncoding()
	default:
		return &nopEncoder{}
	}
}

func (f *Font) charmapEncoding() TextEncoding {
	toUnicode := f.V.Key("ToUnicode")
	if toUnicode.Kind() == Stream {
		m := readCmapCached(toUnicode)
		if m == nil {
			return &nopEncoder{}
		}
		return m
	}

	return &byteEncoder{&pdfDocEncoding}
}

// newDictEncoder reads a Differences array once into a byte table: codes
// it names map to their glyph's rune, the rest to themselves.
func newDictEncoder(diff Value) *byteEncoder {
	var t [256]rune
	for i := range t {
		t[i] = rune(i)
	}
	set := [256]bool{}
	n := -1
	for j := 0; j < diff.Len(); j++ {
		diff.r.g.tick()
		x := diff.Index(j)
		if x.Kind() == Integer {
			n = int(x.Int64())
			continue
		}
		if x.Kind() == Name {
			if n >= 0 && n < 256 && !set[n] {
				if r := nameToRune[x.Name()]; r != 0 {
					t[n], set[n] = r, true
				}
			}
			n++
		}
	}
	return &byteEncoder{&t}
}

// A TextEncoding represents a mapping between
// font code points and UTF-8 text.
type TextEncoding interface {
	// Decode returns the UTF-8 text corresponding to
	// the sequence of code points in raw.
	Decode(raw string) (text string)
}

type nopEncoder struct {
}

func (e *nopEncoder) Decode(raw string) (text string) {
	return raw
}

type ucs2Encoder struct{}

func (e *ucs2Encoder) Decode(raw string) (text string) {
	return utf16Decode(raw)
}

type byteEncoder struct {
	table *[256]rune
}

func (e *byteEncoder) Decode(raw string) (text string) {
	r := make([]rune, 0, len(raw))
	for i := 0; i < len(raw); i++ {
		r = append(r, e.table[raw[i]])
	}
	return string(r)
}

type byteRange struct {
	low  string
	high string
}

type bfrange struct {
	lo  string
	hi  string
	dst Value
}

type cmap struct {
	g       *guard
	space   [4][]byteRange    // codespace range
	bfrange []bfrange         // in the file's order: the first match wins
	bfchar  map[string]string // source code -> UTF-16BE replacement
}

func (m *cmap) Decode(raw string) (text string) {
	var r []rune
Parse:
	for len(raw) > 0 {
		m.g.tick()
		for n := 1; n <= 4 && n <= len(raw); n++ { // number of digits in character replacement (1-4 possible)
			for _, space := range m.space[n-1] { // find matching codespace Ranges for number of digits
				if space.low <= raw[:n] && raw[:n] <= space.high { // see if value is in range
					text := raw[:n]
					raw = raw[n:]
					if repl, ok := m.bfchar[text]; ok {
						r = append(r, []rune(utf16Decode(repl))...)
						continue Parse
					}
					for _, bfrange := range m.bfrange { // check for matching bfrange
						m.g.tick()
						if len(bfrange.lo) == n && bfrange.lo <= text && text <= bfrange.hi {
							if bfrange.dst.Kind() == String {
								s := bfrange.dst.RawString()
								if bfrange.lo != text && s != "" { // value isn't at the beginning of the range so scale result
									b := []byte(s)
									b[len(b)-1] += text[len(text)-1] - bfrange.lo[len(bfrange.lo)-1] // increment last byte by difference
									s = string(b)
								}
								r = append(r, []rune(utf16Decode(s))...)
								continue Parse
							}
							if bfrange.dst.Kind() == Array {
								n := text[len(text)-1] - bfrange.lo[len(bfrange.lo)-1]
								v := bfrange.dst.Index(int(n))
								if v.Kind() == String {
									s := v.RawString()
									r = append(r, []rune(utf16Decode(s))...)
									continue Parse
								}
							}
							r = append(r, noRune)
							continue Parse
						}
					}
					r = append(r, noRune)
					continue Parse
				}
			}
		}
		r = append(r, noRune)
		raw = raw[1:]
	}
	return string(r)
}

// readCmapCached is readCmap once per ToUnicode stream of the file.
func readCmapCached(toUnicode Value) *cmap {
	if toUnicode.ptr == (objptr{}) {
		return readCmap(toUnicode)
	}
	if m, ok := toUnicode.r.cmaps[toUnicode.ptr]; ok {
		return m
	}
	m := readCmap(toUnicode)
	toUnicode.r.cmaps[toUnicode.ptr] = m
	return m
}

func readCmap(toUnicode Value) *cmap {
	n := -1
	m := cmap{g: toUnicode.r.g, bfchar: make(map[string]string)}
	ok := true
	Interpret(toUnicode, func(stk *Stack, op string) {
		if !ok {
			return
		}
		switch op {
		case "findresource":
			stk.Pop() // category
			stk.Pop() // key
			stk.Push(newDict())
		case "begincmap":
			stk.Push(newDict())
		case "endcmap":
			stk.Pop()
		case "begincodespacerange":
			n = int(stk.Pop().Int64())
		case "endcodespacerange":
			if n < 0 {
				ok = false
				return
			}
			for i := 0; i < n && stk.Len() >= 2; i++ {
				hi, lo := stk.Pop().RawString(), stk.Pop().RawString()
				if len(lo) == 0 || len(lo) > 4 || len(lo) != len(hi) {
					ok = false
					return
				}
				m.space[len(lo)-1] = append(m.space[len(lo)-1], byteRange{lo, hi})
			}
			n = -1
		case "beginbfchar":
			n = int(stk.Pop().Int64())
		case "endbfchar":
			if n < 0 {
				panic("missing beginbfchar")
			}
			// A code defined twice keeps the definition upstream's list
			// matched first: the earlier block's, and within a block
			// the later pair's (pairs are popped last first).
			for i := 0; i < n && stk.Len() >= 2; i++ {
				repl, orig := stk.Pop().RawString(), stk.Pop().RawString()
				if _, ok := m.bfchar[orig]; !ok {
					m.bfchar[orig] = repl
				}
			}
		case "beginbfrange":
			n = int(stk.Pop().Int64())
		case "endbfrange":
			if n < 0 {
				panic("missing beginbfrange")
			}
			for i := 0; i < n && stk.Len() >= 3; i++ {
				dst, srcHi, srcLo := stk.Pop(), stk.Pop().RawString(), stk.Pop().RawString()
				m.bfrange = append(m.bfrange, bfrange{srcLo, srcHi, dst})
			}
		case "defineresource":
			stk.Pop().Name() // category
			value := stk.Pop()
			stk.Pop().Name() // key
			stk.Push(value)
		}
	})
	if !ok {
		return nil
	}
	return &m
}

type matrix [3][3]float64

var ident = matrix{{1, 0, 0}, {0, 1, 0}, {0, 0, 1}}

func (x matrix) mul(y matrix) matrix {
	var z matrix
	for i := 0; i < 3; i++ {
		for j := 0; j < 3; j++ {
			for k := 0; k < 3; k++ {
				z[i][j] += x[i][k] * y[k][j]
			}
		}
	}
	return z
}

// A Text is one character drawn on a page (40 bytes: a page's text is
// held as these until it is put in rows).
type Text struct {
	FontSize float64 // the font size, in points (1/72 of an inch)
	X        float64 // the X coordinate, in points, increasing left to right
	Y        float64 // the Y coordinate, in points, increasing bottom to top
	W        float64 // the width of the character, in points
	R        rune    // the character
}

type gstate struct {
	Tc    float64
	Tw    float64
	Th    float64
	Tl    float64
	Tf    *Font
	Tfs   float64
	Tmode int
	Trise float64
	Tm    matrix
	Tlm   matrix
	Trm   matrix
	CTM   matrix
}

// popArgs pops every value currently on the stack and returns them with the
// bottom of the stack at args[0], matching the operand order expected by PDF
// content-stream operators.
func popArgs(stk *Stack) []Value {
	n := stk.Len()
	args := make([]Value, n)
	for i := n - 1; i >= 0; i-- {
		args[i] = stk.Pop()
	}
	return args
}

// errBudget ends a page's content stream when the character budget is
// spent.
var errBudget = errors.New("character budget spent")

// Text returns the page's pieces of text, a piece per character, in the
// order drawn, decoding the content stream only until budget characters
// (counted as pieces of text, newlines included) are found: full is false
// when it stopped there.
func (p Page) Text(budget int) (text []Text, full bool, err error) {
	defer func() {
		if err != nil {
			text = nil
		}
	}()
	defer catch(&err)
	if p.V.IsNull() || p.V.Key("Contents").Kind() == Null {
		return nil, true, nil
	}
	full = true
	func() {
		defer func() {
			if v := recover(); v != nil {
				if s, ok := v.(stop); ok && s.err == errBudget {
					full = false
					return
				}
				panic(v)
			}
		}()
		p.content(budget, &text)
	}()
	return text, full, nil
}

// content appends the page's pieces of text to *out; it panics with
// errBudget when a piece would pass budget.
func (p Page) content(budget int, out *[]Text) {
	strm := p.V.Key("Contents")
	var enc TextEncoding = &nopEncoder{}
	fonts := make(map[string]*Font)
	none := &Font{}

	var g = gstate{
		Th:  1,
		CTM: ident,
		Tf:  none,
	}

	showText := func(s string) {
		n := 0
		decoded := enc.Decode(s)
		for _, ch := range decoded {
			p.V.r.g.tick()
			if len(*out) >= budget {
				panic(stop{errBudget})
			}
			var w0 float64
			if n < len(s) {
				w0 = g.Tf.Width(int(s[n]))
			}
			n++

			Trm := matrix{{g.Tfs * g.Th, 0, 0}, {0, g.Tfs, 0}, {0, g.Trise, 1}}.mul(g.Tm).mul(g.CTM)
			*out = append(*out, Text{Trm[0][0], Trm[2][0], Trm[2][1], w0 / 1000 * Trm[0][0], ch})

			tx := w0/1000*g.Tfs + g.Tc
			tx *= g.Th
			g.Tm = matrix{{1, 0, 0}, {0, 1, 0}, {tx, 0, 1}}.mul(g.Tm)
		}
	}

	var gstack []gstate
	Interpret(strm, func(stk *Stack, op string) {
		args := popArgs(stk)
		switch op {
		default:
			return

		case "cm": // update g.CTM
			if len(args) != 6 {
				panic("bad g.Tm")
			}
			var m matrix
			for i := 0; i < 6; i++ {
				m[i/2][i%2] = args[i].Float64()
			}
			m[2][2] = 1
			g.CTM = m.mul(g.CTM)

		case "q": // save graphics state
			if len(gstack) >= maxGState {
				panic(fmt.Errorf("graphics state saved more than %d deep", maxGState))
			}
			gstack = append(gstack, g)

		case "Q": // restore graphics state
			n := len(gstack) - 1
			if n < 0 {
				return
			}
			g = gstack[n]
			gstack = gstack[:n]

		case "BT": // begin text (reset text matrix and line matrix)
			g.Tm = ident
			g.Tlm = g.Tm

		case "T*": // move to start of next line
			x := matrix{{1, 0, 0}, {0, 1, 0}, {0, -g.Tl, 1}}
			g.Tlm = x.mul(g.Tlm)
			g.Tm = g.Tlm

		case "Tc": // set character spacing
			if len(args) != 1 {
				panic("bad g.Tc")
			}
			g.Tc = args[0].Float64()

		case "TD": // move text position and set leading
			if len(args) != 2 {
				panic("bad Td")
			}
			g.Tl = -args[1].Float64()
			fallthrough
		case "Td": // move text position
			if len(args) != 2 {
				panic("bad Td")
			}
			tx := args[0].Float64()
			ty := args[1].Float64()
			x := matrix{{1, 0, 0}, {0, 1, 0}, {tx, ty, 1}}
			g.Tlm = x.mul(g.Tlm)
			g.Tm = g.Tlm

		case "Tf": // set text font and size
			if len(args) != 2 {
				panic("bad TL")
			}
			name := args[0].Name()
			f, ok := fonts[name]
			if !ok {
				font := p.Font(name)
				f = &font
				fonts[name] = f
			}
			g.Tf = f
			enc = f.Encoder()
			if enc == nil {
				enc = &nopEncoder{}
			}
			g.Tfs = args[1].Float64()

		case "\"": // set spacing, move to next line, and show text
			if len(args) != 3 {
				panic("bad \" operator")
			}
			g.Tw = args[0].Float64()
			g.Tc = args[1].Float64()
			args = args[2:]
			fallthrough
		case "'": // move to next line and show text
			if len(args) != 1 {
				panic("bad ' operator")
			}
			x := matrix{{1, 0, 0}, {0, 1, 0}, {0, -g.Tl, 1}}
			g.Tlm = x.mul(g.Tlm)
			g.Tm = g.Tlm
			fallthrough
		case "Tj": // show text
			if len(args) != 1 {
				panic("bad Tj operator")
			}
			showText(args[0].RawString())

		case "TJ": // show text, allowing individual glyph positioning
			if len(args) != 1 {
				panic("bad TJ operator")
			}
			v := args[0]
			for i := 0; i < v.Len(); i++ {
				x := v.Index(i)
				if x.Kind() == String {
					showText(x.RawString())
				} else {
					tx := -x.Float64() / 1000 * g.Tfs * g.Th
					g.Tm = matrix{{1, 0, 0}, {0, 1, 0}, {tx, 0, 1}}.mul(g.Tm)
				}
			}
			showText("\n")

		case "TL": // set text leading
			if len(args) != 1 {
				panic("bad TL")
			}
			g.Tl = args[0].Float64()

		case "Tm": // set text matrix and line matrix
			if len(args) != 6 {
				panic("bad g.Tm")
			}
			var m matrix
			for i := 0; i < 6; i++ {
				m[i/2][i%2] = args[i].Float64()
			}
			m[2][2] = 1
			g.Tm = m
			g.Tlm = m

		case "Tr": // set text rendering mode
			if len(args) != 1 {
				panic("bad Tr")
			}
			g.Tmode = int(args[0].Int64())

		case "Ts": // set text rise
			if len(args) != 1 {
				panic("bad Ts")
			}
			g.Trise = args[0].Float64()

		case "Tw": // set word spacing
			if len(args) != 1 {
				panic("bad g.Tw")
			}
			g.Tw = args[0].Float64()

		case "Tz": // set horizontal text scaling
			if len(args) != 1 {
				panic("bad Tz")
			}
			g.Th = args[0].Float64() / 100
		}
	})
}
