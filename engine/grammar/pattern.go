package grammar

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode"

	"regexp/syntax"
)

// A string's "pattern" (and "format", through the patterns below) is
// compiled into a deterministic automaton over code points (a DFA), with
// the standard library's regexp/syntax as the parser: the string's frame
// keeps the DFA state, and each code point (written plainly or as an
// escape) must have a transition. The DFA is built ahead by subset
// construction, bounded by maxDFAStates, so that a pattern that would
// backtrack catastrophically in a regex engine costs nothing while
// generating, and one whose DFA would be huge is refused at once. States
// from which no match can be reached are dropped, so a generation never
// enters a string it cannot finish.
//
// As JSON Schema says, a pattern is not anchored: "abc" matches any
// string holding abc. ^ at its start and $ at its end anchor it; other
// assertions (^ or $ inside, \b, \B) are refused.

// maxDFAStates bounds a pattern's automaton.
const maxDFAStates = 2000

// formats are the "format" values the grammar honours, as patterns
// (RFC 3339 date, time and date-time, RFC 4122 uuid, dotted IPv4, and a
// plain address for email).
var formats = map[string]string{
	"date":      `^` + datePattern + `$`,
	"time":      `^` + timePattern + `$`,
	"date-time": `^` + datePattern + `T` + timePattern + `$`,
	"uuid":      `^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`,
	"ipv4":      `^(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])(\.(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])){3}$`,
	"email":     `^[A-Za-z0-9._%+-]{1,64}@[A-Za-z0-9-]{1,63}(\.[A-Za-z0-9-]{1,63}){1,8}$`,
}

const (
	datePattern = `[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])`
	timePattern = `([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\.[0-9]{1,9})?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])`
)

// formatNames lists the formats for errors.
func formatNames() string {
	names := make([]string, 0, len(formats))
	for k := range formats {
		names = append(names, k)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// dfa is a pattern's automaton. State 0 is the start.
type dfa struct {
	states []dfaState
}

type dfaState struct {
	edges  []dfaEdge // sorted, disjoint code point ranges
	accept bool
}

type dfaEdge struct {
	lo, hi rune
	next   int32
}

// next is the state after code point r from state s, or -1.
func (d *dfa) next(s int32, r rune) int32 {
	e := d.states[s].edges
	i := sort.Search(len(e), func(i int) bool { return e[i].hi >= r })
	if i < len(e) && e[i].lo <= r {
		return e[i].next
	}
	return -1
}

// overlaps reports whether state s has a transition on some code point
// in [lo, hi] (for a character whose first bytes are written).
func (d *dfa) overlaps(s int32, lo, hi rune) bool {
	e := d.states[s].edges
	i := sort.Search(len(e), func(i int) bool { return e[i].hi >= lo })
	return i < len(e) && e[i].lo <= hi
}

// compilePattern builds the DFA of pattern; the errors name what is
// wrong for a person, without the keyword (the caller adds it).
func compilePattern(pattern string) (*dfa, error) {
	re, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		return nil, fmt.Errorf("is not a regular expression NPU Chat can read: %v", err)
	}
	re = re.Simplify()
	startAnchored, endAnchored := false, false
	subs := []*syntax.Regexp{re}
	if re.Op == syntax.OpConcat {
		subs = slices.Clone(re.Sub)
	}
	if len(subs) > 0 && (subs[0].Op == syntax.OpBeginText || subs[0].Op == syntax.OpBeginLine) {
		startAnchored, subs = true, subs[1:]
	}
	if n := len(subs); n > 0 && (subs[n-1].Op == syntax.OpEndText || subs[n-1].Op == syntax.OpEndLine) {
		endAnchored, subs = true, subs[:n-1]
	}
	anything := &syntax.Regexp{Op: syntax.OpStar, Sub: []*syntax.Regexp{{Op: syntax.OpAnyChar}}}
	if !startAnchored {
		subs = append([]*syntax.Regexp{anything}, subs...)
	}
	if !endAnchored {
		subs = append(subs, anything)
	}
	whole := &syntax.Regexp{Op: syntax.OpConcat, Sub: subs}
	if len(subs) == 0 {
		whole = &syntax.Regexp{Op: syntax.OpEmptyMatch}
	}
	prog, err := syntax.Compile(whole)
	if err != nil {
		return nil, fmt.Errorf("is not a regular expression NPU Chat can compile: %v", err)
	}
	return buildDFA(prog)
}

// instRanges are the code point ranges an instruction matches.
func instRanges(in *syntax.Inst) [][2]rune {
	switch in.Op {
	case syntax.InstRuneAny:
		return [][2]rune{{0, unicode.MaxRune}}
	case syntax.InstRuneAnyNotNL:
		return [][2]rune{{0, '\n' - 1}, {'\n' + 1, unicode.MaxRune}}
	case syntax.InstRune1:
		return [][2]rune{{in.Rune[0], in.Rune[0]}}
	}
	// InstRune
	if len(in.Rune) == 1 {
		r := in.Rune[0]
		out := [][2]rune{{r, r}}
		if syntax.Flags(in.Arg)&syntax.FoldCase != 0 {
			for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
				out = append(out, [2]rune{f, f})
			}
		}
		return out
	}
	var out [][2]rune
	for i := 0; i+1 < len(in.Rune); i += 2 {
		out = append(out, [2]rune{in.Rune[i], in.Rune[i+1]})
	}
	return out
}

// buildDFA is the subset construction over prog, with dead states
// removed.
func buildDFA(prog *syntax.Prog) (*dfa, error) {
	// closure adds pc and what it reaches without reading (sets of rune
	// instructions and Match).
	var closure func(pc uint32, seen map[uint32]bool, out *[]uint32) error
	closure = func(pc uint32, seen map[uint32]bool, out *[]uint32) error {
		if seen[pc] {
			return nil
		}
		seen[pc] = true
		in := &prog.Inst[pc]
		switch in.Op {
		case syntax.InstAlt, syntax.InstAltMatch:
			if err := closure(in.Out, seen, out); err != nil {
				return err
			}
			return closure(in.Arg, seen, out)
		case syntax.InstCapture, syntax.InstNop:
			return closure(in.Out, seen, out)
		case syntax.InstEmptyWidth:
			return fmt.Errorf("uses an assertion (^ or $ inside the pattern, \\b, \\B) that NPU Chat supports only as ^ at the start and $ at the end")
		case syntax.InstFail:
			return nil
		}
		*out = append(*out, pc) // a rune instruction or Match
		return nil
	}
	set := func(pcs []uint32) ([]uint32, error) {
		seen := map[uint32]bool{}
		var out []uint32
		for _, pc := range pcs {
			if err := closure(pc, seen, &out); err != nil {
				return nil, err
			}
		}
		slices.Sort(out)
		return slices.Compact(out), nil
	}
	key := func(s []uint32) string {
		var b strings.Builder
		for _, pc := range s {
			b.WriteString(strconv.FormatUint(uint64(pc), 36))
			b.WriteByte(',')
		}
		return b.String()
	}
	start, err := set([]uint32{uint32(prog.Start)})
	if err != nil {
		return nil, err
	}
	d := &dfa{}
	ids := map[string]int32{}
	var sets [][]uint32
	add := func(s []uint32) (int32, error) {
		k := key(s)
		if id, ok := ids[k]; ok {
			return id, nil
		}
		if len(sets) >= maxDFAStates {
			return 0, fmt.Errorf("is too complex: its automaton has more than %d states; simplify it", maxDFAStates)
		}
		id := int32(len(sets))
		ids[k] = id
		sets = append(sets, s)
		d.states = append(d.states, dfaState{})
		return id, nil
	}
	if _, err := add(start); err != nil {
		return nil, err
	}
	for i := 0; i < len(sets); i++ {
		var points []rune
		for _, pc := range sets[i] {
			in := &prog.Inst[pc]
			if in.Op == syntax.InstMatch {
				d.states[i].accept = true
				continue
			}
			for _, r := range instRanges(in) {
				points = append(points, r[0], r[1]+1)
			}
		}
		slices.Sort(points)
		points = slices.Compact(points)
		var edges []dfaEdge
		for j := 0; j+1 < len(points); j++ {
			lo, hi := points[j], points[j+1]-1
			var outs []uint32
			for _, pc := range sets[i] {
				in := &prog.Inst[pc]
				if in.Op == syntax.InstMatch {
					continue
				}
				for _, r := range instRanges(in) {
					if r[0] <= lo && hi <= r[1] {
						outs = append(outs, in.Out)
						break
					}
				}
			}
			if len(outs) == 0 {
				continue
			}
			next, err := set(outs)
			if err != nil {
				return nil, err
			}
			if len(next) == 0 {
				continue
			}
			id, err := add(next)
			if err != nil {
				return nil, err
			}
			if n := len(edges); n > 0 && edges[n-1].next == id && edges[n-1].hi+1 == lo {
				edges[n-1].hi = hi
			} else {
				edges = append(edges, dfaEdge{lo, hi, id})
			}
		}
		d.states[i].edges = edges
	}
	// Keep only the states from which a match can be reached.
	live := make([]bool, len(d.states))
	for changed := true; changed; {
		changed = false
		for i, s := range d.states {
			if live[i] {
				continue
			}
			if s.accept || slices.ContainsFunc(s.edges, func(e dfaEdge) bool { return live[e.next] }) {
				live[i], changed = true, true
			}
		}
	}
	if !live[0] {
		return nil, fmt.Errorf("matches no string")
	}
	for i := range d.states {
		d.states[i].edges = slices.DeleteFunc(d.states[i].edges, func(e dfaEdge) bool { return !live[e.next] })
	}
	return d, nil
}

// utf8Span is the code points a character can still be whose first
// bytes give the value w, with left continuation bytes to come, the next
// of them in [lob, hib] (the others in 0x80-0xBF).
func utf8Span(w int64, left int32, lob, hib byte) (rune, rune) {
	shift := 6 * uint(left-1)
	lo := (rune(w)<<6 | rune(lob&0x3F)) << shift
	hi := (rune(w)<<6|rune(hib&0x3F))<<shift | (1<<shift - 1)
	return lo, hi
}

// leadValue is the payload bits of a UTF-8 lead byte.
func leadValue(c byte) int64 {
	switch {
	case c >= 0xF0:
		return int64(c & 0x07)
	case c >= 0xE0:
		return int64(c & 0x0F)
	}
	return int64(c & 0x1F)
}
