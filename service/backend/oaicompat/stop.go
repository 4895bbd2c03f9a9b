package oaicompat

import "strings"

// stopFilter enforces stop strings on streamed text on this side, because
// some servers ignore the request's "stop" (FastFlowLM reads no stop
// field) and OpenAI accepts at most four. It holds back text that may be
// the start of a stop string until the next piece decides.
type stopFilter struct {
	stops []string
	held  string
	seen  string // the stop string that was reached
}

func newStopFilter(stops []string) *stopFilter {
	f := &stopFilter{}
	for _, s := range stops {
		if s != "" {
			f.stops = append(f.stops, s)
		}
	}
	return f
}

// push adds a piece of text and returns what may be emitted now, and
// whether a stop string was reached (then the answer ends with out and the
// stop string itself is dropped).
func (f *stopFilter) push(piece string) (out string, stopped bool) {
	if len(f.stops) == 0 {
		return piece, false
	}
	buf := f.held + piece
	first := -1
	for _, s := range f.stops {
		if i := strings.Index(buf, s); i >= 0 && (first < 0 || i < first) {
			first = i
		}
	}
	if first >= 0 {
		for _, s := range f.stops {
			if strings.HasPrefix(buf[first:], s) {
				f.seen = s
				break
			}
		}
		f.held = ""
		return buf[:first], true
	}
	// Hold back the longest tail of buf that begins some stop string. The
	// tail starts where a stop string starts, so the cut never splits a
	// UTF-8 character.
	keep := 0
	for _, s := range f.stops {
		for k := min(len(s)-1, len(buf)); k > keep; k-- {
			if strings.HasPrefix(s, buf[len(buf)-k:]) {
				keep = k
				break
			}
		}
	}
	f.held = buf[len(buf)-keep:]
	return buf[:len(buf)-keep], false
}

// flush returns the text still held back, at the end of the answer.
func (f *stopFilter) flush() string {
	s := f.held
	f.held = ""
	return s
}
