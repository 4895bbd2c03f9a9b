package chat

import (
	"bytes"
	"encoding/json"
	"strings"
)

// ToolFormat is how a model family writes tool calls in its answer, as
// its chat template shows it in earlier assistant turns.
type ToolFormat struct {
	// Family names the format: "hermes" (Qwen2.5, Qwen3, MiniCPM5:
	// <tool_call>{"name": ..., "arguments": ...}</tool_call>), "mistral"
	// ([TOOL_CALLS][{...}, ...]) or "llama3" (<|python_tag|> or a bare
	// {"name": ..., "parameters": ...} answer).
	Family string
	// Open starts a call block; Close ends it ("" for blocks that run to
	// the end of the answer).
	Open, Close string
	// Bare: a whole answer that is a call object, without Open, is a call
	// too (Llama 3.1's JSON tool calling).
	Bare bool
}

// The known tool-call formats.
var (
	HermesTools  = ToolFormat{Family: "hermes", Open: "<tool_call>", Close: "</tool_call>"}
	MistralTools = ToolFormat{Family: "mistral", Open: "[TOOL_CALLS]"}
	Llama3Tools  = ToolFormat{Family: "llama3", Open: "<|python_tag|>", Bare: true}
)

// ToolFormat returns the tool-call format the template writes, and false
// when the template does not render tools at all (then a request with
// tools cannot be honoured: the model would never see them).
func (t *Template) ToolFormat() (ToolFormat, bool) {
	src := t.src
	if !strings.Contains(src, "tools") {
		return ToolFormat{}, false
	}
	switch {
	case strings.Contains(src, "<tool_call>"):
		return HermesTools, true
	case strings.Contains(src, "[TOOL_CALLS]"):
		return MistralTools, true
	case strings.Contains(src, "<|python_tag|>"), strings.Contains(src, "ipython"):
		return Llama3Tools, true
	}
	return ToolFormat{}, false
}

// ParsedCall is one tool call read from an answer. Arguments is a JSON
// object.
type ParsedCall struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

// ToolCallParser reads tool calls out of an answer as it streams: Feed
// takes each piece of text and returns the text that is surely not
// markup and the calls completed so far; Flush ends the answer. Markup
// that does not hold a well-formed call (bad JSON, no name) comes back as
// text, exactly as the model wrote it: a broken call is never an error.
// A parser is not safe for concurrent use.
type ToolCallParser struct {
	f      ToolFormat
	held   strings.Builder // text that may be the start of Open, or a bare answer
	inside bool            // after Open
	body   strings.Builder // the block's text after Open
	begun  bool            // some text was returned (a bare call must be the whole answer)
	calls  int
	// afterCall: a call was just read; blank space after it is dropped.
	afterCall bool
}

// NewToolCallParser returns a parser for format f.
func NewToolCallParser(f ToolFormat) *ToolCallParser { return &ToolCallParser{f: f} }

// Calls is how many calls were parsed so far.
func (p *ToolCallParser) Calls() int { return p.calls }

// Feed reads the next piece of the answer.
func (p *ToolCallParser) Feed(text string) (string, []ParsedCall) {
	var out strings.Builder
	var calls []ParsedCall
	for text != "" {
		if p.inside {
			p.body.WriteString(text)
			text = ""
			if p.f.Close == "" {
				break // the block runs to the end of the answer
			}
			body := p.body.String()
			i := strings.Index(body, p.f.Close)
			if i < 0 {
				break
			}
			inner, rest := body[:i], body[i+len(p.f.Close):]
			if got, ok := parseCalls(inner); ok {
				calls = append(calls, got...)
				p.calls += len(got)
				p.afterCall = true
			} else {
				p.write(&out, p.f.Open+inner+p.f.Close)
			}
			p.inside = false
			p.body.Reset()
			text = rest
			continue
		}
		p.held.WriteString(text)
		text = ""
		held := p.held.String()
		if p.f.Bare && !p.begun && p.calls == 0 {
			if t := strings.TrimLeft(held, " \t\r\n"); t == "" || t[0] == '{' {
				break // perhaps a bare call: hold it all to the end
			}
		}
		if i := strings.Index(held, p.f.Open); i >= 0 {
			p.write(&out, held[:i])
			p.begun = p.begun || i > 0
			p.held.Reset()
			p.inside = true
			text = held[i+len(p.f.Open):]
			continue
		}
		// Keep back a tail that could be the start of Open.
		keep := partialSuffix(held, p.f.Open)
		p.write(&out, held[:len(held)-keep])
		p.begun = p.begun || len(held) > keep
		p.held.Reset()
		p.held.WriteString(held[len(held)-keep:])
	}
	return out.String(), calls
}

// write adds answer text to out, dropping the blank space between and
// after calls.
func (p *ToolCallParser) write(out *strings.Builder, s string) {
	if p.afterCall {
		s = strings.TrimLeft(s, " \t\r\n")
		if s == "" {
			return
		}
		p.afterCall = false
	}
	out.WriteString(s)
}

// Flush ends the answer: a block left open is a call if it parses (a
// model may end without the closing tag), else text; held text is text.
func (p *ToolCallParser) Flush() (string, []ParsedCall) {
	var out strings.Builder
	var calls []ParsedCall
	if p.inside {
		if got, ok := parseCalls(p.body.String()); ok {
			calls = got
			p.calls += len(got)
		} else {
			p.write(&out, p.f.Open+p.body.String())
		}
		p.inside = false
		p.body.Reset()
	}
	held := p.held.String()
	p.held.Reset()
	if p.f.Bare && !p.begun && strings.TrimSpace(held) != "" && p.calls == 0 {
		if got, ok := parseCalls(held); ok {
			calls = append(calls, got...)
			p.calls += len(got)
			held = ""
		}
	}
	p.write(&out, held)
	return out.String(), calls
}

// partialSuffix is the length of the longest tail of s that is a proper
// prefix of tag.
func partialSuffix(s, tag string) int {
	for n := min(len(s), len(tag)-1); n > 0; n-- {
		if strings.HasSuffix(s, tag[:n]) {
			return n
		}
	}
	return 0
}

// parseCalls reads a block: one call object, a list of them, or objects
// separated by ";" (Llama 3's python_tag blocks). Arguments may be an
// object or a string holding one, under "arguments" or "parameters".
func parseCalls(s string) ([]ParsedCall, bool) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, false
	}
	var raws []json.RawMessage
	if s[0] == '[' {
		if json.Unmarshal([]byte(s), &raws) != nil || len(raws) == 0 {
			return nil, false
		}
	} else {
		dec := json.NewDecoder(strings.NewReader(s))
		for {
			var r json.RawMessage
			if err := dec.Decode(&r); err != nil {
				return nil, false
			}
			raws = append(raws, r)
			rest := strings.TrimSpace(s[dec.InputOffset():])
			if rest == "" {
				break
			}
			if rest[0] != ';' {
				return nil, false
			}
			s = strings.TrimSpace(rest[1:])
			dec = json.NewDecoder(strings.NewReader(s))
		}
	}
	var calls []ParsedCall
	for _, r := range raws {
		c, ok := parseCall(r)
		if !ok {
			return nil, false
		}
		calls = append(calls, c)
	}
	return calls, true
}

func parseCall(raw json.RawMessage) (ParsedCall, bool) {
	var obj struct {
		Name       *string         `json:"name"`
		Arguments  json.RawMessage `json:"arguments"`
		Parameters json.RawMessage `json:"parameters"`
	}
	if json.Unmarshal(raw, &obj) != nil || obj.Name == nil || *obj.Name == "" {
		return ParsedCall{}, false
	}
	args := obj.Arguments
	if len(args) == 0 {
		args = obj.Parameters
	}
	args = bytes.TrimSpace(args)
	if len(args) == 0 || string(args) == "null" {
		args = json.RawMessage("{}")
	}
	if args[0] == '"' { // a string that holds the object
		var s string
		if json.Unmarshal(args, &s) != nil {
			return ParsedCall{}, false
		}
		args = json.RawMessage(strings.TrimSpace(s))
	}
	var probe map[string]json.RawMessage
	if json.Unmarshal(args, &probe) != nil {
		return ParsedCall{}, false
	}
	return ParsedCall{Name: *obj.Name, Arguments: append(json.RawMessage(nil), args...)}, true
}
