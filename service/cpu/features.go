package cpu

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/npuchat/npuchat/engine/chat"
	"github.com/npuchat/npuchat/engine/grammar"
	"github.com/npuchat/npuchat/engine/sample"
	"github.com/npuchat/npuchat/service/backend"
)

// grammarCacheSize is how many compiled schemas (with their masks) the
// backend keeps.
const grammarCacheSize = 16

// capabilitiesLocked lists what the loaded model can do here. b.mu must
// be held.
func (b *Backend) capabilitiesLocked() []string { return templateCapabilities(b.tmpl) }

// templateCapabilities is what a model with chat template tmpl can do
// here: tools when the template shows them to the model in a format the
// backend reads back, JSON and logprobs always.
func templateCapabilities(tmpl *chat.Template) []string {
	caps := []string{backend.CapCompletion}
	if tmpl != nil {
		if _, ok := tmpl.ToolFormat(); ok {
			caps = append(caps, backend.CapTools)
		}
		if strings.Contains(tmpl.Source(), "enable_thinking") {
			caps = append(caps, backend.CapThinking)
		}
	}
	return append(caps, backend.CapJSON, backend.CapLogprobs, backend.CapEmbedding)
}

// renderTools is what the chat template gets for req: the tool
// definitions (none when the client said tool_choice "none") and the
// messages with their tool calls. It refuses tools the template cannot
// show the model.
func (b *Backend) renderTools(req *backend.Request) ([]json.RawMessage, error) {
	if len(req.Tools) == 0 || req.ToolChoice.Mode == backend.ToolNone {
		return nil, nil
	}
	if _, ok := b.tmpl.ToolFormat(); !ok {
		return nil, fmt.Errorf("this model's chat template (%s) does not show tools to the model, so it cannot call them; send the request without \"tools\": %w", b.tmpl.Origin(), backend.ErrBadRequest)
	}
	out := make([]json.RawMessage, len(req.Tools))
	for i, t := range req.Tools {
		if len(t.Raw) > 0 {
			out[i] = t.Raw
			continue
		}
		raw, err := json.Marshal(map[string]any{"type": "function", "function": map[string]any{
			"name": t.Name, "description": t.Description, "parameters": json.RawMessage(orEmptyObject(t.Parameters))}})
		if err != nil {
			return nil, fmt.Errorf("tool %q: %v: %w", t.Name, err, backend.ErrBadRequest)
		}
		out[i] = raw
	}
	return out, nil
}

func orEmptyObject(raw json.RawMessage) json.RawMessage {
	if len(bytes.TrimSpace(raw)) == 0 {
		return json.RawMessage(`{"type":"object","properties":{}}`)
	}
	return raw
}

// chatMessages converts the request's messages for the template.
func chatMessages(in []backend.Message) []chat.Message {
	msgs := make([]chat.Message, len(in))
	for i, m := range in {
		msgs[i] = chat.Message{Role: m.Role, Content: m.Content, Name: m.Name, ToolCallID: m.ToolCallID}
		for _, c := range m.ToolCalls {
			msgs[i].ToolCalls = append(msgs[i].ToolCalls, chat.ToolCall{ID: c.ID, Type: "function",
				Function: chat.FunctionCall{Name: c.Name, Arguments: c.Arguments}})
		}
	}
	return msgs
}

// extras is one generation's features beyond plain text: the grammar
// that constrains it, the tool-call parser that reads calls out of it,
// and the log-probabilities waiting for their text.
type extras struct {
	b       *Backend
	matcher *grammar.Matcher
	tools   *chat.ToolCallParser
	// parallel: more than one call may be made; else the answer ends at
	// the first.
	parallel bool
	calls    int
	logprobs bool
	top      int
	pending  []backend.Logprob // for tokens whose text is not out yet
}

// extrasLocked prepares req's features. b.mu must be held (for reading).
func (b *Backend) extrasLocked(req *backend.Request) (*extras, error) {
	ex := &extras{b: b, parallel: req.ParallelToolCalls, logprobs: req.Logprobs || req.TopLogprobs > 0, top: req.TopLogprobs}
	if ex.top > sample.MaxTopLogprobs {
		return nil, fmt.Errorf("top_logprobs is %d; at most %d: %w", ex.top, sample.MaxTopLogprobs, backend.ErrBadRequest)
	}
	mode := req.ToolChoice.Mode
	useTools := len(req.Tools) > 0 && mode != backend.ToolNone && req.Messages != nil
	var format chat.ToolFormat
	if useTools {
		var ok bool
		if format, ok = b.tmpl.ToolFormat(); !ok {
			return nil, fmt.Errorf("this model's chat template does not show tools to the model: %w", backend.ErrBadRequest)
		}
		ex.tools = chat.NewToolCallParser(format)
	}
	forced := useTools && (mode == backend.ToolRequired || mode == backend.ToolFunction)
	if forced && req.Format != nil {
		return nil, fmt.Errorf("tool_choice %q and a response format cannot both be honoured: the answer is either a call or JSON: %w", mode, backend.ErrBadRequest)
	}
	var key string
	var build func() (*grammar.Grammar, error)
	switch {
	case forced:
		tools := req.Tools
		if mode == backend.ToolFunction {
			tools = nil
			for _, t := range req.Tools {
				if t.Name == req.ToolChoice.Name {
					tools = append(tools, t)
				}
			}
			if len(tools) == 0 {
				return nil, fmt.Errorf("tool_choice names the function %q, which is not in tools: %w", req.ToolChoice.Name, backend.ErrBadRequest)
			}
		}
		var callFormat grammar.ToolCallFormat
		switch format.Family {
		case "hermes":
			callFormat = grammar.ToolCallFormat{Prefix: format.Open + "\n", Suffix: "\n" + format.Close}
		case "llama3":
			callFormat = grammar.ToolCallFormat{ArgsKey: "parameters"}
		default:
			return nil, fmt.Errorf("tool_choice %q needs constrained decoding, which NPU Chat does not do for %s-style tool calls (their markers are control tokens); use \"auto\": %w", mode, format.Family, backend.ErrBadRequest)
		}
		gt := make([]grammar.Tool, len(tools))
		for i, t := range tools {
			gt[i] = grammar.Tool{Name: t.Name, Parameters: t.Parameters}
		}
		k, _ := json.Marshal(struct {
			F grammar.ToolCallFormat
			T []grammar.Tool
		}{callFormat, gt})
		key = "tools:" + string(k)
		build = func() (*grammar.Grammar, error) { return grammar.ToolCall(gt, callFormat) }
	case req.Format != nil && req.Format.Type == backend.FormatJSON:
		key, build = "json", func() (*grammar.Grammar, error) { return grammar.JSONObject(), nil }
	case req.Format != nil && req.Format.Type == backend.FormatSchema:
		var compact bytes.Buffer
		if err := json.Compact(&compact, req.Format.Schema); err != nil {
			return nil, fmt.Errorf("the JSON schema is not valid JSON: %v: %w", err, backend.ErrBadRequest)
		}
		key = "schema:" + compact.String()
		build = func() (*grammar.Grammar, error) { return grammar.FromSchema(req.Format.Schema) }
	case req.Format != nil:
		return nil, fmt.Errorf("unknown response format %q: %w", req.Format.Type, backend.ErrBadRequest)
	}
	if build != nil {
		b.gmu.Lock()
		if b.grammars == nil {
			v, err := grammar.TokenizerVocab(b.tok, b.tcfg.EOS)
			if err != nil {
				b.gmu.Unlock()
				return nil, fmt.Errorf("constrained decoding: %w", err)
			}
			b.grammars = grammar.NewCache(v, grammarCacheSize)
		}
		gc := b.grammars
		b.gmu.Unlock()
		mk, err := gc.Get(key, build)
		if err != nil {
			return nil, fmt.Errorf("%v: %w", err, backend.ErrBadRequest)
		}
		ex.matcher = mk.NewMatcher()
	}
	return ex, nil
}

// sample draws the next token within the grammar, if there is one, and
// records its log-probability. ok is false when the grammar allows no
// token at all (the answer then ends).
func (ex *extras) sample(s *sample.Sampler, logits []float32, history []int) (id int, ok bool) {
	if ex.matcher == nil {
		id = s.Sample(logits, history)
	} else {
		var err error
		if id, err = s.SampleConstrained(logits, history, ex.matcher); err != nil {
			return -1, false
		}
		if err := ex.matcher.Accept(id); err != nil {
			return -1, false // the sampler only draws allowed tokens
		}
	}
	if ex.logprobs && !ex.b.tcfg.IsEOS(id) {
		lp, top := sample.Logprobs(logits, id, ex.top)
		entry := ex.token(id, lp)
		for _, t := range top {
			e := ex.token(t.ID, t.Logprob)
			entry.Top = append(entry.Top, backend.TopLogprob{Token: e.Token, Bytes: e.Bytes, Logprob: e.Logprob})
		}
		ex.pending = append(ex.pending, entry)
	}
	return id, true
}

func (ex *extras) token(id int, lp float64) backend.Logprob {
	b, _ := ex.b.tok.TokenBytes(id)
	text := ""
	if utf8.Valid(b) {
		text = string(b)
	} else {
		text = string(bytes.ToValidUTF8(b, []byte("\uFFFD")))
	}
	return backend.Logprob{Token: text, Bytes: append([]byte(nil), b...), Logprob: lp}
}

// emit sends text (and the calls the parser finds in it) with the
// log-probabilities of the tokens so far. final is the end of the
// answer. done reports that the answer should end here (a call was
// made and parallel calls are off).
func (ex *extras) emit(emit func(backend.Token) error, text string, id int, final bool) (done bool, err error) {
	var calls []chat.ParsedCall
	if ex.tools != nil {
		var more []chat.ParsedCall
		text, calls = ex.tools.Feed(text)
		if final {
			var rest string
			rest, more = ex.tools.Flush()
			text += rest
			calls = append(calls, more...)
		}
	}
	if !ex.parallel && ex.calls+len(calls) > 1 {
		calls = calls[:max(0, 1-ex.calls)]
	}
	if text == "" && len(calls) == 0 && (len(ex.pending) == 0 || !final) {
		return false, nil
	}
	t := backend.Token{Text: text, ID: id, Logprobs: ex.pending}
	ex.pending = nil
	for _, c := range calls {
		t.ToolCalls = append(t.ToolCalls, backend.ToolCall{ID: callID(), Name: c.Name, Arguments: c.Arguments})
	}
	ex.calls += len(calls)
	if err := emit(t); err != nil {
		return false, err
	}
	return ex.calls > 0 && !ex.parallel, nil
}

// callID is a fresh tool-call id in OpenAI's style.
func callID() string {
	var b [12]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(errors.New("crypto/rand failed")) // never on supported systems
	}
	return "call_" + hex.EncodeToString(b[:])
}
