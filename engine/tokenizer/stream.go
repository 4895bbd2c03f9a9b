package tokenizer

import "strings"

// Stream turns generated token ids into text as they arrive. It emits only
// whole UTF-8 characters (a character split across tokens comes out when
// its last byte arrives) and holds back text that could be the start of a
// stop string until it is known not to be one. Everything Add and Flush
// return, joined, is exactly the decode of all ids up to the first stop
// string, which is itself left out. A Stream is not safe for concurrent use.
type Stream struct {
	tok   *Tokenizer
	stops []string
	// ShowSpecial makes special tokens (<|im_end|>) part of the text;
	// by default they are left out, as Hugging Face's
	// skip_special_tokens=True does for chat output.
	ShowSpecial bool

	pending []byte // bytes of an unfinished UTF-8 character
	held    string // decoded text that may begin a stop string
	started bool   // some text was produced (for the decoder's leading-space strip)
	stopped bool
	stop    string // the stop string seen
}

// NewStream starts decoding a generation. stops are the stop strings;
// empty ones are ignored.
func NewStream(tok *Tokenizer, stops []string) *Stream {
	s := &Stream{tok: tok}
	for _, x := range stops {
		if x != "" {
			s.stops = append(s.stops, x)
		}
	}
	return s
}

// Add decodes one more id and returns the text that is now final. stopped
// is true once a stop string has been seen: the text before it is
// returned and every later call returns "" and true. Ids outside the
// vocabulary add no text.
func (s *Stream) Add(id int) (text string, stopped bool) {
	if s.stopped {
		return "", true
	}
	if !s.ShowSpecial && s.tok.IsSpecial(id) {
		return "", false
	}
	b, err := s.tok.TokenBytes(id)
	if err != nil {
		return "", false
	}
	s.pending = append(s.pending, b...)
	dec, rest := decodeLossy(s.pending, false)
	s.pending = append(s.pending[:0], s.pending[rest:]...)
	return s.filter(dec, false)
}

// Flush ends the stream and returns what was held back: an unfinished
// character (as U+FFFD) and text that turned out not to be a stop string.
func (s *Stream) Flush() string {
	if s.stopped {
		return ""
	}
	dec, _ := decodeLossy(s.pending, true)
	s.pending = s.pending[:0]
	text, _ := s.filter(dec, true)
	return text
}

// Stopped reports whether a stop string has been seen.
func (s *Stream) Stopped() bool { return s.stopped }

// StopSequence is the stop string that ended the stream ("" before one
// is seen); of several starting at the same place, the first given.
func (s *Stream) StopSequence() string { return s.stop }

// filter passes decoded text through the stop-string check.
func (s *Stream) filter(dec string, final bool) (string, bool) {
	if !s.started && dec != "" {
		s.started = true
		dec = s.tok.trimDecoded(dec)
	}
	s.held += dec
	if i := s.firstStop(); i >= 0 {
		out := s.held[:i]
		for _, x := range s.stops {
			if strings.HasPrefix(s.held[i:], x) {
				s.stop = x
				break
			}
		}
		s.held = ""
		s.stopped = true
		return out, true
	}
	keep := 0
	if !final {
		keep = s.partialStop()
	}
	out := s.held[:len(s.held)-keep]
	s.held = s.held[len(s.held)-keep:]
	return out, false
}

// firstStop returns where the earliest stop string in held begins, or -1.
func (s *Stream) firstStop() int {
	best := -1
	for _, x := range s.stops {
		if i := strings.Index(s.held, x); i >= 0 && (best < 0 || i < best) {
			best = i
		}
	}
	return best
}

// partialStop returns the length of the longest end of held that is the
// beginning of a stop string.
func (s *Stream) partialStop() int {
	keep := 0
	for _, x := range s.stops {
		for n := min(len(x)-1, len(s.held)); n > keep; n-- {
			if strings.HasSuffix(s.held, x[:n]) {
				keep = n
				break
			}
		}
	}
	return keep
}
