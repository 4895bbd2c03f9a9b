// Package think splits a reasoning model's streamed answer into its
// thinking and its answer. Models such as Qwen3 and DeepSeek-R1 write
// their reasoning first, between <think> and </think>, then the answer;
// the chat page shows the thinking in a folded section and the APIs
// return it in their own fields (OpenAI-compatible reasoning_content,
// Ollama's thinking, Anthropic's thinking blocks), so no client sees the
// tags in the answer's text.
//
// The split is made on the text as it streams: a tag may arrive cut
// across pieces ("<thi", "nk>"), so the Splitter holds back only the
// few bytes that may be the start of a tag, and lets every other byte
// through at once. Only a <think> at the very start of the answer
// (after white space) opens thinking: a model that writes about the tag
// in its answer, or quotes it in code, is not split. Some chat templates
// end the prompt with <think> themselves (the model then starts inside
// its thoughts); Options.Open is for those.
package think

import "strings"

// The tags, as Qwen3, DeepSeek-R1 and MiniCPM write them.
const (
	OpenTag  = "<think>"
	CloseTag = "</think>"
)

type state int

const (
	atStart  state = iota // nothing but white space seen yet
	thinking              // inside <think>…
	afterEnd              // just after </think>: white space is dropped
	answer                // the rest is the answer
)

// Options configure a Splitter.
type Options struct {
	// Open starts inside the thinking, for a prompt that ends with
	// <think> (the model then writes only the closing tag).
	Open bool
}

// Splitter splits one answer. Its zero value is ready for an answer
// that may start with <think>. It is not safe for concurrent use.
type Splitter struct {
	st      state
	held    string // bytes that may be the start of a tag
	started bool   // some thinking text was emitted (leading white space is dropped before)
}

// New returns a Splitter for one answer.
func New(o Options) *Splitter {
	s := &Splitter{}
	if o.Open {
		s.st = thinking
	}
	return s
}

// Thinking reports whether the answer is (so far) inside its thinking.
func (s *Splitter) Thinking() bool { return s.st == thinking }

// Write takes the next piece of the answer and returns what of it (and
// of what was held before) is now known to be thinking and answer text.
// Either may be empty while a possible tag is held back.
func (s *Splitter) Write(piece string) (think, text string) {
	buf := s.held + piece
	s.held = ""
	var tb, ab strings.Builder
	for buf != "" {
		switch s.st {
		case atStart:
			trimmed := strings.TrimLeft(buf, " \t\r\n")
			switch {
			case strings.HasPrefix(trimmed, OpenTag):
				s.st = thinking
				buf = trimmed[len(OpenTag):]
			case trimmed == "" || strings.HasPrefix(OpenTag, trimmed):
				s.held = buf // white space, or the tag's start: wait
				buf = ""
			default:
				s.st = answer
			}
		case thinking:
			if !s.started {
				buf = strings.TrimLeft(buf, " \t\r\n")
				if buf == "" {
					break
				}
			}
			if i := strings.Index(buf, CloseTag); i >= 0 {
				s.emitThink(&tb, buf[:i])
				s.st = afterEnd
				buf = buf[i+len(CloseTag):]
				continue
			}
			keep := partialSuffix(buf, CloseTag)
			s.emitThink(&tb, buf[:len(buf)-keep])
			s.held = buf[len(buf)-keep:]
			buf = ""
		case afterEnd:
			buf = strings.TrimLeft(buf, " \t\r\n")
			if buf != "" {
				s.st = answer
			}
		case answer:
			ab.WriteString(buf)
			buf = ""
		}
	}
	return tb.String(), ab.String()
}

func (s *Splitter) emitThink(b *strings.Builder, t string) {
	if t == "" {
		return
	}
	s.started = true
	b.WriteString(t)
}

// Flush returns what is still held when the answer ends: a tag's start
// that never became one is text of the part it was in.
func (s *Splitter) Flush() (think, text string) {
	h := s.held
	s.held = ""
	switch s.st {
	case thinking:
		if !s.started {
			h = strings.TrimLeft(h, " \t\r\n")
		}
		return h, ""
	case atStart:
		if strings.TrimSpace(h) == "" {
			return "", ""
		}
		s.st = answer
		return "", h
	}
	return "", ""
}

// Split splits a whole answer at once.
func Split(text string, o Options) (think, answer string) {
	s := New(o)
	t, a := s.Write(text)
	t2, a2 := s.Flush()
	return t + t2, a + a2
}

// partialSuffix is the length of the longest end of s that is a proper
// start of tag.
func partialSuffix(s, tag string) int {
	for n := min(len(tag)-1, len(s)); n > 0; n-- {
		if strings.HasSuffix(s, tag[:n]) {
			return n
		}
	}
	return 0
}
