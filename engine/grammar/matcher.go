package grammar

import "slices"

// frame is one open value (or sequence) on the automaton's stack.
type frame struct {
	n  int32 // node
	st uint8 // sub-state, one of the st* constants
	ws uint8 // whitespace bytes in the current run
	// a, b, c: counters whose meaning depends on st (see step).
	a, b, c int32
	// v, w: a bounded number's integer part and fraction digits.
	v, w int64
}

// Sub-states.
const (
	stValue     uint8 = iota // before a value of node n: whitespace, then its first byte
	stObjOpen                // after '{'
	stObjComma               // after ',' in an object
	stObjKey                 // inside a declared key: c candidate prop, b bytes matched
	stObjKeyEnd              // a free key (a string child) is being written
	stObjColon               // after a key, before ':'
	stObjVal                 // the value (a child) is being written
	stObjAfter               // after a value
	stArrOpen                // after '['; a = items so far
	stArrItem                // an item (a child) is being written
	stArrAfter               // after an item
	stStr                    // in a string; a = code points so far
	stStrEsc                 // after '\'
	stStrHex                 // in \uXXXX: b = hex digits so far, c = 1 if the first was d/D
	stStrUTF                 // in a multi-byte character: b = bytes left, c = lo<<8|hi of the next byte
	stNumSign                // after '-'
	stNumZero                // after a leading 0
	stNumInt                 // in the integer digits; b = digits
	stNumDot                 // after '.'
	stNumFrac                // in the fraction; b = digits
	stNumE                   // after e/E
	stNumESign               // after the exponent's sign
	stNumExp                 // in the exponent; b = digits
	stLit                    // in a literal: c the node of the literal trie
	stSeq                    // a = part being written (a child)
	stSwitch                 // in a switch literal: c the node of the literal trie
	stNumStart               // before a number's first byte (a = 1 once it is negative)
)

// stack is one way through the automaton: a frame per open value. The
// empty stack is the finished value.
type stack []frame

// state is the set of stacks a generation may be in: one, unless
// alternatives of an anyOf that start alike both still fit what was
// written (then each goes on as a stack of its own until the bytes tell
// them apart, as a general CFG parser keeps several). Stack i is
// f[end[i-1]:end[i]]; no two are equal. A state with no stacks is dead;
// one whose stacks are all empty is finished.
type state struct {
	f   []frame
	end []int32
}

// maxStacks bounds the stacks of a state. Past it, the alternatives that
// forked last are not followed: the language narrows (what is written
// still validates), the cost per byte stays bounded.
const maxStacks = 64

// initial returns the start state of g.
func (g *Grammar) initial() state {
	return state{f: []frame{g.valueFrame(g.root)}, end: []int32{1}}
}

// done reports whether every stack is finished.
func (s *state) done() bool { return len(s.f) == 0 && len(s.end) > 0 }

// set makes s a copy of o.
func (s *state) set(o *state) {
	s.f, s.end = append(s.f[:0], o.f...), append(s.end[:0], o.end...)
}

// finish makes s the finished state.
func (s *state) finish() { s.f, s.end = s.f[:0], append(s.end[:0], 0) }

// each calls fn with each stack of s until it returns false.
func (s *state) each(fn func(st stack) bool) {
	lo := int32(0)
	for _, hi := range s.end {
		if !fn(s.f[lo:hi]) {
			return
		}
		lo = hi
	}
}

// scratch is the memory a step reuses: the stacks forked while stepping.
type scratch struct{ forks state }

// step advances s by one byte (tests and AcceptBytes; the mask walk uses
// advance with its own buffers).
func (g *Grammar) step(s *state, c byte) stepResult {
	var out state
	var sc scratch
	if !g.advance(&out, s, c, &sc) {
		return reject
	}
	*s = out
	return changed
}

// advance steps every stack of src by c into dst, forks included, and
// reports whether any stack took c.
func (g *Grammar) advance(dst, src *state, c byte, sc *scratch) bool {
	forks := &sc.forks
	forks.f, forks.end = forks.f[:0], forks.end[:0]
	if len(src.end) == 1 {
		// One stack, the common case: step it in dst's buffer.
		st := stack(append(dst.f[:0], src.f...))
		if g.stepStack(&st, c, forks) == reject {
			dst.f, dst.end = st[:0], dst.end[:0]
		} else {
			dst.f, dst.end = st, append(dst.end[:0], int32(len(st)))
		}
		if len(forks.end) == 0 {
			return len(dst.end) > 0
		}
	} else {
		dst.f, dst.end = dst.f[:0], dst.end[:0]
		lo := int32(0)
		for _, hi := range src.end {
			g.stepInto(dst, src.f[lo:hi], c, forks)
			lo = hi
		}
	}
	lo := int32(0)
	for i := 0; i < len(forks.end); i++ { // forks may fork again
		hi := forks.end[i]
		g.stepInto(dst, forks.f[lo:hi], c, forks)
		lo = hi
	}
	return len(dst.end) > 0
}

// stepInto appends to dst the stack from stepped by c, unless it refuses
// c, is already there, or dst is full. Alternatives that also take c
// are appended to forks, not yet stepped.
func (g *Grammar) stepInto(dst *state, from stack, c byte, forks *state) {
	if len(dst.end) >= maxStacks {
		return
	}
	start := len(dst.f)
	dst.f = append(dst.f, from...) // copied before forks can grow
	st := stack(dst.f[start:])
	if g.stepStack(&st, c, forks) == reject {
		dst.f = dst.f[:start]
		return
	}
	if n := start + len(st); len(st) == 0 || n <= cap(dst.f) && &dst.f[:n][start] == &st[0] {
		dst.f = dst.f[:n] // stepped in place
	} else {
		dst.f = append(dst.f[:start], st...)
	}
	lo := int32(0)
	for _, hi := range dst.end {
		if slices.Equal(dst.f[lo:hi], dst.f[start:]) {
			dst.f = dst.f[:start] // two alternatives came to the same place
			return
		}
		lo = hi
	}
	dst.end = append(dst.end, int32(len(dst.f)))
}

func (g *Grammar) valueFrame(n int) frame {
	return frame{n: int32(n), st: stValue}
}

func isWS(c byte) bool { return c == ' ' || c == '\n' || c == '\t' }

// stepWS advances a run of whitespace (ws: 0 none yet, 1 one space, 2+n
// a newline and n spaces or tabs) by c, or reports that c cannot extend
// it (see MaxIndent).
func stepWS(ws *uint8, c byte) bool {
	switch {
	case *ws == 0 && c == ' ':
		*ws = 1
	case *ws == 0 && c == '\n':
		*ws = 2
	case *ws >= 2 && *ws < 2+MaxIndent && (c == ' ' || c == '\t'):
		*ws++
	default:
		return false
	}
	return true
}

// stepResult says what a byte did.
type stepResult uint8

const (
	reject    stepResult = iota // the byte cannot come next
	changed                     // accepted; the state changed
	unchanged                   // accepted; the state is as it was
)

// stepStack advances one stack by one byte, in place. The stack may grow
// to at most MaxDepth frames; past that a byte that opens a value is
// refused. Where a union has several alternatives that take c, the
// stack follows the first and a copy for each other one, at that
// alternative's start, is appended to forks (nil: none may fork).
func (g *Grammar) stepStack(s *stack, c byte, forks *state) stepResult {
	st := *s
	for {
		if len(st) == 0 {
			return reject // nothing may follow the finished value
		}
		top := &st[len(st)-1]
		nd := &g.nodes[top.n]
		switch top.st {
		case stValue:
			if isWS(c) {
				if nd.noWS || !stepWS(&top.ws, c) {
					return reject
				}
				*s = st
				return changed
			}
			if !g.first[top.n][c] {
				return reject
			}
			// Resolve a union to the alternatives that start with c: the
			// first here, each other one as a stack of its own.
			n := int(top.n)
			if g.nodes[n].kind == kUnion {
				n = -1
				for _, a := range g.leaves[top.n] {
					switch {
					case !g.first[a][c]:
					case n < 0:
						n = a
					case forks != nil:
						forks.f = append(forks.f, st...)
						forks.f[len(forks.f)-1] = frame{n: int32(a), st: stValue}
						forks.end = append(forks.end, int32(len(forks.f)))
					}
				}
			}
			*top = frame{n: int32(n)}
			switch g.nodes[n].kind {
			case kObject:
				top.st, top.a = stObjOpen, -1
			case kArray:
				top.st = stArrOpen
			case kString:
				top.st = stStr // v: the pattern's state, 0 at the start
			case kNumber, kInteger:
				top.st = stNumStart
				continue // the number reads c
			case kLiterals:
				top.st, top.c = stLit, g.nodes[n].trie
				continue // the literal reads c
			case kSwitch:
				top.st, top.c = stSwitch, g.nodes[n].trie
				continue
			case kSeq:
				if len(st) >= MaxDepth {
					return reject
				}
				top.st = stSeq
				st = append(st, g.valueFrame(g.nodes[n].alts[0]))
				continue // the first part reads c
			}
			*s = st
			return changed
		case stObjOpen, stObjComma, stObjAfter:
			if isWS(c) {
				if !stepWS(&top.ws, c) {
					return reject
				}
				*s = st
				return changed
			}
			switch {
			case c == '"' && top.st != stObjAfter:
				if nd.freeKeys {
					if len(st) >= MaxDepth {
						return reject
					}
					top.st, top.ws = stObjKeyEnd, 0
					st = append(st, frame{n: int32(nd.extraKey), st: stStr})
					*s = st
					return changed
				}
				first := 0 // with additional properties: any key, matched against all declared ones
				if !g.extrasOK(nd, top) {
					if first = g.nextProp(nd, int(top.a)); first < 0 {
						return reject
					}
				}
				top.st, top.ws, top.c, top.b = stObjKey, 0, int32(first), 0
				*s = st
				return changed
			case c == ',' && top.st == stObjAfter:
				if !nd.freeKeys && !g.extrasOK(nd, top) && g.nextProp(nd, int(top.a)) < 0 {
					return reject
				}
				top.st, top.ws = stObjComma, 0
				*s = st
				return changed
			case c == '}' && top.st != stObjComma:
				if !nd.freeKeys && !g.canClose(nd, int(top.a)) {
					return reject
				}
				st = g.pop(st)
				*s = st
				return changed
			}
			return reject
		case stObjKey:
			extras := g.extrasOK(nd, top)
			cand := -1
			switch {
			case extras && len(nd.props) > 0:
				cand = matchKey(nd, int(top.c), len(nd.props)-1, int(top.b), c)
			case !extras:
				cand = matchKey(nd, int(top.c), propLimit(nd, int(top.a)), int(top.b), c)
			}
			if cand >= 0 {
				top.c, top.b = int32(cand), top.b+1
				if int(top.b) == len(nd.props[cand].key) {
					if extras && (top.v != 0 || cand <= int(top.a)) {
						return reject // written already, or declared after additional ones
					}
					top.a, top.st = int32(cand), stObjColon
				}
				*s = st
				return changed
			}
			// No declared key goes on with c: the key of an additional
			// property (written after the declared ones, without escapes,
			// so that it cannot spell a declared name another way).
			if !extras || len(st) >= MaxDepth {
				return reject
			}
			var prefix []byte
			if len(nd.props) > 0 {
				prefix = nd.props[top.c].key[:top.b]
			}
			top.st, top.v = stObjKeyEnd, 1
			st = append(st, frame{n: int32(nd.extraKey), st: stStr})
			for _, pc := range prefix {
				if g.stepStack(&st, pc, nil) == reject {
					return reject
				}
			}
			continue // the key's string reads c
		case stObjColon:
			if c != ':' {
				return reject
			}
			if len(st) >= MaxDepth {
				return reject
			}
			vn := nd.extra // a free or an additional property's value
			if !nd.freeKeys && top.v == 0 {
				vn = nd.props[top.a].node
			}
			top.st = stObjVal
			st = append(st, g.valueFrame(vn))
			*s = st
			return changed
		case stArrOpen, stArrAfter:
			if isWS(c) {
				if !stepWS(&top.ws, c) {
					return reject
				}
				*s = st
				return changed
			}
			switch {
			case c == ']':
				if int(top.a) < nd.minItems {
					return reject
				}
				st = g.pop(st)
				*s = st
				return changed
			case c == ',' && top.st == stArrAfter:
				if nd.maxItems >= 0 && int(top.a) >= nd.maxItems {
					return reject
				}
				if len(st) >= MaxDepth {
					return reject
				}
				top.st, top.ws = stArrItem, 0
				st = append(st, g.valueFrame(nd.items))
				*s = st
				return changed
			case top.st == stArrOpen:
				if nd.maxItems == 0 || len(st) >= MaxDepth {
					return reject
				}
				top.st, top.ws = stArrItem, 0
				st = append(st, g.valueFrame(nd.items))
				continue // the item reads c
			}
			return reject
		case stStr:
			switch {
			case c == '"':
				if int(top.a) < nd.minLen || nd.re != nil && !nd.re.states[top.v].accept {
					return reject
				}
				st = g.pop(st)
				*s = st
				return changed
			case c < 0x20:
				return reject
			}
			if nd.maxLen >= 0 && int(top.a) >= nd.maxLen {
				return reject
			}
			if c == '\\' {
				if nd.raw {
					return reject
				}
				// An escape writes a character of the Basic Multilingual
				// Plane: the pattern must take one here.
				if nd.re != nil && !nd.re.overlaps(int32(top.v), 0, 0xFFFF) {
					return reject
				}
				top.st = stStrEsc
				*s = st
				return changed
			}
			if c < 0x80 {
				if nd.re != nil && !g.patternRune(nd, top, rune(c)) {
					return reject
				}
				if nd.maxLen < 0 && nd.minLen == 0 && nd.re == nil {
					*s = st // frames may have been pushed before this byte
					return unchanged
				}
				top.a++
				*s = st
				return changed
			}
			var left int32
			var lo, hi byte = 0x80, 0xBF
			switch {
			case c >= 0xC2 && c <= 0xDF:
				left = 1
			case c == 0xE0:
				left, lo = 2, 0xA0
			case c >= 0xE1 && c <= 0xEC, c == 0xEE, c == 0xEF:
				left = 2
			case c == 0xED:
				left, hi = 2, 0x9F
			case c == 0xF0:
				left, lo = 3, 0x90
			case c >= 0xF1 && c <= 0xF3:
				left = 3
			case c == 0xF4:
				left, hi = 3, 0x8F
			default:
				return reject
			}
			if nd.re != nil {
				if rlo, rhi := utf8Span(leadValue(c), left, lo, hi); !nd.re.overlaps(int32(top.v), rlo, rhi) {
					return reject
				}
				top.w = leadValue(c)
			}
			if nd.maxLen >= 0 || nd.minLen > 0 {
				top.a++
			}
			top.st, top.b, top.c = stStrUTF, left, int32(lo)<<8|int32(hi)
			*s = st
			return changed
		case stStrUTF:
			lo, hi := byte(top.c>>8), byte(top.c)
			if c < lo || c > hi {
				return reject
			}
			top.b--
			top.c = 0x80<<8 | 0xBF
			if nd.re != nil {
				top.w = top.w<<6 | int64(c&0x3F)
				if top.b == 0 {
					if !g.patternRune(nd, top, rune(top.w)) {
						return reject
					}
				} else if lo, hi := utf8Span(top.w, top.b, 0x80, 0xBF); !nd.re.overlaps(int32(top.v), lo, hi) {
					return reject
				}
			}
			if top.b == 0 {
				top.st, top.c = stStr, 0
			}
			*s = st
			return changed
		case stStrEsc:
			switch c {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				if nd.re != nil && !g.patternRune(nd, top, escaped[c]) {
					return reject
				}
				if nd.maxLen >= 0 || nd.minLen > 0 {
					top.a++
				}
				top.st = stStr
			case 'u':
				if nd.re != nil && !nd.re.overlaps(int32(top.v), 0, 0xFFFF) {
					return reject
				}
				top.st, top.b, top.c, top.w = stStrHex, 0, 0, 0
			default:
				return reject
			}
			*s = st
			return changed
		case stStrHex:
			if !isHex(c) {
				return reject
			}
			switch top.b {
			case 0:
				if c == 'd' || c == 'D' {
					top.c = 1
				}
			case 1:
				if top.c == 1 && !(c >= '0' && c <= '7') {
					return reject // a surrogate: never produced
				}
			}
			top.b++
			if nd.re != nil {
				top.w = top.w<<4 | int64(hexValue(c))
				shift := 4 * uint(4-top.b)
				lo := rune(top.w) << shift
				hi := lo | (1<<shift - 1)
				if top.b == 4 {
					if !g.patternRune(nd, top, rune(top.w)) {
						return reject
					}
				} else if !nd.re.overlaps(int32(top.v), lo, hi) {
					return reject
				}
			}
			if top.b == 4 {
				if nd.maxLen >= 0 || nd.minLen > 0 {
					top.a++
				}
				top.st, top.b, top.c = stStr, 0, 0
			}
			*s = st
			return changed
		case stNumStart, stNumSign, stNumZero, stNumInt, stNumDot, stNumFrac, stNumE, stNumESign, stNumExp:
			r, done := g.number(top, nd, c)
			if r != reject {
				*s = st
				return r
			}
			if !done || !numberOK(nd, top, true) {
				return reject
			}
			st = g.pop(st) // the number ended before c; the parent reads c
			continue
		case stLit, stSwitch:
			next := g.litNext(top.c, c)
			if next < 0 {
				if top.st == stLit && g.lit[top.c].end >= 0 {
					st = g.pop(st) // complete; c belongs to the parent
					continue
				}
				return reject
			}
			top.c = next
			if ln := &g.lit[next]; ln.end >= 0 && ln.n == 0 {
				if top.st == stSwitch {
					// Replace the switch by the node that follows.
					*top = g.valueFrame(nd.then[ln.end])
					*s = st
					return changed
				}
				st = g.pop(st)
			}
			*s = st
			return changed
		default:
			return reject
		}
	}
}

// pop removes the finished top frame and tells its parent.
func (g *Grammar) pop(st stack) stack {
	st = st[:len(st)-1]
	for len(st) > 0 {
		p := &st[len(st)-1]
		pn := &g.nodes[p.n]
		switch p.st {
		case stObjKeyEnd:
			p.st = stObjColon
		case stObjVal:
			p.st, p.ws = stObjAfter, 0
		case stArrItem:
			if pn.minItems > 0 || pn.maxItems >= 0 {
				p.a++
			}
			p.st, p.ws = stArrAfter, 0
		case stSeq:
			p.a++
			if int(p.a) == len(pn.alts) {
				st = st[:len(st)-1] // the sequence is finished too
				continue
			}
			st = append(st, g.valueFrame(pn.alts[p.a]))
		}
		return st
	}
	return st
}

// nextProp is the first declared property that may come after property
// last (-1: none yet), or -1 when no more may.
func (g *Grammar) nextProp(nd *node, last int) int {
	if last+1 < len(nd.props) {
		return last + 1
	}
	return -1
}

// propLimit is the last declared property index that may come next after
// last: the first required one after it (no required property is
// skipped), else the last one.
func propLimit(nd *node, last int) int {
	for i := last + 1; i < len(nd.props); i++ {
		if nd.props[i].required {
			return i
		}
	}
	return len(nd.props) - 1
}

// canClose reports whether the object may end after property last.
func (g *Grammar) canClose(nd *node, last int) bool {
	for i := last + 1; i < len(nd.props); i++ {
		if nd.props[i].required {
			return false
		}
	}
	return true
}

// extrasOK reports whether the object of frame f may take additional
// properties now: it has a schema for them and every required declared
// property is written.
func (g *Grammar) extrasOK(nd *node, f *frame) bool {
	return !nd.freeKeys && nd.extra >= 0 && g.canClose(nd, int(f.a))
}

// matchKey finds the property that continues a key: the first property
// from cand to limit whose key has the b bytes already matched (those of
// cand) followed by c; -1 when there is none.
func matchKey(nd *node, cand, limit, b int, c byte) int {
	prefix := nd.props[cand].key[:b]
	for i := cand; i <= limit; i++ {
		k := nd.props[i].key
		if len(k) > b && k[b] == c && string(k[:b]) == string(prefix) {
			return i
		}
	}
	return -1
}

// number advances a number frame by c. When c does not continue the
// number, it returns reject, and done reports whether the number was
// complete before c (so that c belongs to the parent).
// A bounded number (nd.bounded) keeps its integer part in f.v and its
// fraction digits in f.w, and every byte must keep it able to end within
// the bounds (numberOK).
func (g *Grammar) number(f *frame, nd *node, c byte) (r stepResult, done bool) {
	old := *f
	r, done = g.numberStep(f, nd, c)
	if r == changed && nd.bounded && !numberOK(nd, f, false) {
		*f = old
		return reject, false
	}
	return r, done
}

func (g *Grammar) numberStep(f *frame, nd *node, c byte) (r stepResult, done bool) {
	integer, bounded := nd.kind == kInteger, nd.bounded
	digit := c >= '0' && c <= '9'
	d := int64(c - '0')
	switch f.st {
	case stNumStart, stNumSign:
		switch {
		case c == '-' && f.st == stNumStart:
			f.st, f.a = stNumSign, 1
		case c == '0':
			f.st, f.v = stNumZero, 0
		case digit:
			f.st, f.b, f.v = stNumInt, 1, d
		default:
			return reject, false
		}
		return changed, false
	case stNumZero, stNumInt:
		switch {
		case digit && f.st == stNumInt && f.b < maxIntDigits:
			f.b++
			if bounded {
				f.v = f.v*10 + d
			}
		case c == '.' && !integer:
			f.st, f.b = stNumDot, 0
		case (c == 'e' || c == 'E') && !integer && !bounded:
			f.st, f.b = stNumE, 0
		default:
			return reject, !digit
		}
		return changed, false
	case stNumDot:
		if !digit {
			return reject, false
		}
		f.st, f.b = stNumFrac, 1
		if bounded {
			f.w = d
		}
		return changed, false
	case stNumFrac:
		switch {
		case digit && f.b < maxFracDigits:
			f.b++
			if bounded {
				f.w = f.w*10 + d
			}
		case (c == 'e' || c == 'E') && !bounded:
			f.st, f.b = stNumE, 0
		default:
			return reject, !digit
		}
		return changed, false
	case stNumE:
		switch {
		case c == '+' || c == '-':
			f.st = stNumESign
		case digit:
			f.st, f.b = stNumExp, 1
		default:
			return reject, false
		}
		return changed, false
	case stNumESign:
		if !digit {
			return reject, false
		}
		f.st, f.b = stNumExp, 1
		return changed, false
	case stNumExp:
		if digit && f.b < maxExpDigits {
			f.b++
			return changed, false
		}
		return reject, !digit
	}
	return reject, false
}

// canEnd reports whether the output may stop in state s: some stack is
// finished, or has only a complete number or literal open.
func (g *Grammar) canEnd(s state) bool {
	ok := false
	s.each(func(st stack) bool {
		ok = g.canEndStack(st)
		return !ok
	})
	return ok
}

func (g *Grammar) canEndStack(s stack) bool {
	st := append(stack(nil), s...)
	for len(st) > 0 {
		top := st[len(st)-1]
		switch top.st {
		case stNumZero, stNumInt, stNumFrac, stNumExp:
			if !numberOK(&g.nodes[top.n], &top, true) {
				return false
			}
		case stLit:
			if g.lit[top.c].end < 0 {
				return false
			}
		default:
			return false
		}
		st = g.pop(st)
	}
	return true
}

// escaped is the character each one-letter JSON escape stands for.
var escaped = [256]rune{'"': '"', '\\': '\\', '/': '/', 'b': '\b', 'f': '\f', 'n': '\n', 'r': '\r', 't': '\t'}

// patternRune moves a pattern string's state by the code point r, or
// reports that the pattern cannot take it there.
func (g *Grammar) patternRune(nd *node, f *frame, r rune) bool {
	next := nd.re.next(int32(f.v), r)
	if next < 0 {
		return false
	}
	f.v = int64(next)
	return true
}

func hexValue(c byte) byte {
	switch {
	case c >= 'a':
		return c - 'a' + 10
	case c >= 'A':
		return c - 'A' + 10
	}
	return c - '0'
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}
