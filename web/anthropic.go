package web

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/npuchat/npuchat/service/backend"
)

// The Anthropic Messages API (POST /v1/messages), as Ollama and LM Studio
// serve it, so that Anthropic's SDKs and tools (Claude Code among them)
// work unchanged: a system prompt, text and tool_use / tool_result
// content blocks, tools with input_schema, tool_choice, and the
// streaming events message_start, content_block_start/delta/stop,
// message_delta and message_stop. It is one more format of the one
// driver: a decoder into backend.Request and an answerWriter.

// anthropicRequest is the body of POST /v1/messages.
type anthropicRequest struct {
	Model         string             `json:"model"`
	MaxTokens     *int               `json:"max_tokens"`
	System        json.RawMessage    `json:"system"`
	Messages      []anthropicMessage `json:"messages"`
	Stream        bool               `json:"stream"`
	Temperature   *float64           `json:"temperature"`
	TopP          *float64           `json:"top_p"`
	TopK          *int               `json:"top_k"`
	StopSequences []string           `json:"stop_sequences"`
	Tools         []anthropicTool    `json:"tools"`
	ToolChoice    *struct {
		Type                   string `json:"type"`
		Name                   string `json:"name"`
		DisableParallelToolUse bool   `json:"disable_parallel_tool_use"`
	} `json:"tool_choice"`
	// Thinking is extended thinking: {"type": "enabled", "budget_tokens":
	// N} or {"type": "disabled"}; here it switches a reasoning model's
	// thinking on or off (the budget is not enforced).
	Thinking *struct {
		Type string `json:"type"`
	} `json:"thinking"`
	// Speculative is NPU Chat's own (extra_body in the SDKs):
	// parseSpeculative.
	Speculative json.RawMessage `json:"speculative"`
}

type anthropicMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

type anthropicTool struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"input_schema"`
	Type        string          `json:"type"`
}

// anthropicBlock is a content block of a request or an answer.
type anthropicBlock struct {
	Type string `json:"type"`
	Text string `json:"text,omitempty"`
	// tool_use
	ID    string          `json:"id,omitempty"`
	Name  string          `json:"name,omitempty"`
	Input json.RawMessage `json:"input,omitempty"`
	// tool_result
	ToolUseID string          `json:"tool_use_id,omitempty"`
	Content   json.RawMessage `json:"content,omitempty"`
	IsError   bool            `json:"is_error,omitempty"`
}

// anthropicText reads a string or a list of text blocks.
func anthropicText(raw json.RawMessage, param string) (string, error) {
	if len(bytes.TrimSpace(raw)) == 0 || string(raw) == "null" {
		return "", nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var blocks []anthropicBlock
	if json.Unmarshal(raw, &blocks) != nil {
		return "", badRequest(param, "%s must be a string or a list of text blocks", param)
	}
	var sb strings.Builder
	for i, b := range blocks {
		if b.Type != "text" {
			return "", badRequest(fmt.Sprintf("%s[%d].type", param, i), "%s[%d] has type %q; only text is supported here", param, i, b.Type)
		}
		sb.WriteString(b.Text)
	}
	return sb.String(), nil
}

// parseAnthropic decodes and validates a Messages request.
func parseAnthropic(body []byte) (*backend.Request, *anthropicRequest, error) {
	var in anthropicRequest
	if err := unmarshalBody(body, &in); err != nil {
		return nil, nil, err
	}
	req := &backend.Request{Model: trimModel(in.Model)}
	if req.Model == "" {
		return nil, nil, badRequest("model", "model is required (for example \"minicpm5:2b\")")
	}
	var err error
	if req.Speculative, err = parseSpeculative("speculative", in.Speculative); err != nil {
		return nil, nil, err
	}
	if in.MaxTokens == nil {
		return nil, nil, badRequest("max_tokens", "max_tokens is required")
	}
	if in.Thinking != nil {
		switch in.Thinking.Type {
		case "enabled":
			req.Think = new(bool)
			*req.Think = true
		case "disabled":
			req.Think = new(bool)
		default:
			return nil, nil, badRequest("thinking.type", "thinking.type must be \"enabled\" or \"disabled\", got %q", in.Thinking.Type)
		}
	}
	if req.MaxTokens, err = checkMaxTokens("max_tokens", in.MaxTokens); err != nil {
		return nil, nil, err
	}
	if req.Stop, err = checkStops("stop_sequences", in.StopSequences); err != nil {
		return nil, nil, err
	}
	sp := samplingParams{Temperature: in.Temperature, TopP: in.TopP, TopK: in.TopK}
	if req.Sampling, err = sp.toSampling(nil); err != nil {
		return nil, nil, err
	}
	system, err := anthropicText(in.System, "system")
	if err != nil {
		return nil, nil, err
	}
	if system != "" {
		req.Messages = append(req.Messages, backend.Message{Role: "system", Content: system})
	}
	if len(in.Messages) == 0 {
		return nil, nil, badRequest("messages", "messages must hold at least one message")
	}
	for i, m := range in.Messages {
		msgs, err := anthropicToMessages(m, i)
		if err != nil {
			return nil, nil, err
		}
		req.Messages = append(req.Messages, msgs...)
	}
	for i, t := range in.Tools {
		param := fmt.Sprintf("tools[%d]", i)
		if t.Type != "" && t.Type != "custom" {
			return nil, nil, badRequest(param+".type", "%s.type %q is a server tool, which NPU Chat does not have; only custom tools (name, input_schema) are supported", param, t.Type)
		}
		if !validToolName(t.Name) || hasTool(req.Tools, t.Name) {
			return nil, nil, badRequest(param+".name", "%s.name %q must be a unique name of 1 to 64 letters, digits, '_' or '-'", param, t.Name)
		}
		raw, _ := json.Marshal(map[string]any{"type": "function", "function": map[string]any{
			"name": t.Name, "description": t.Description, "parameters": json.RawMessage(orObject(t.InputSchema))}})
		req.Tools = append(req.Tools, backend.Tool{Name: t.Name, Description: t.Description, Parameters: t.InputSchema, Raw: raw})
	}
	req.ParallelToolCalls = true
	if tc := in.ToolChoice; tc != nil {
		req.ParallelToolCalls = !tc.DisableParallelToolUse
		switch tc.Type {
		case "auto":
			req.ToolChoice.Mode = backend.ToolAuto
		case "none":
			req.ToolChoice.Mode = backend.ToolNone
		case "any":
			req.ToolChoice.Mode = backend.ToolRequired
		case "tool":
			if !hasTool(req.Tools, tc.Name) {
				return nil, nil, badRequest("tool_choice.name", "tool_choice names the tool %q, which is not in \"tools\"", tc.Name)
			}
			req.ToolChoice = backend.ToolChoice{Mode: backend.ToolFunction, Name: tc.Name}
		default:
			return nil, nil, badRequest("tool_choice.type", "tool_choice.type %q must be auto, any, tool or none", tc.Type)
		}
		if len(req.Tools) == 0 && (tc.Type == "any" || tc.Type == "tool") {
			return nil, nil, badRequest("tool_choice", "tool_choice %q needs \"tools\"", tc.Type)
		}
	}
	return req, &in, nil
}

func orObject(raw json.RawMessage) json.RawMessage {
	if len(bytes.TrimSpace(raw)) == 0 {
		return json.RawMessage(`{"type":"object"}`)
	}
	return raw
}

// anthropicToMessages turns one Anthropic message into backend messages:
// text and tool_use blocks make one user or assistant turn; each
// tool_result block is a tool turn of its own (as OpenAI-style templates
// expect them).
func anthropicToMessages(m anthropicMessage, i int) ([]backend.Message, error) {
	param := fmt.Sprintf("messages[%d]", i)
	if m.Role != "user" && m.Role != "assistant" {
		return nil, badRequest(param+".role", "%s.role %q must be user or assistant (the system prompt goes in \"system\")", param, m.Role)
	}
	var s string
	if json.Unmarshal(m.Content, &s) == nil {
		return []backend.Message{{Role: m.Role, Content: s}}, nil
	}
	var blocks []anthropicBlock
	if json.Unmarshal(m.Content, &blocks) != nil {
		return nil, badRequest(param+".content", "%s.content must be a string or a list of content blocks", param)
	}
	var out []backend.Message
	turn := backend.Message{Role: m.Role}
	var text strings.Builder
	for j, b := range blocks {
		bp := fmt.Sprintf("%s.content[%d]", param, j)
		switch b.Type {
		case "text":
			text.WriteString(b.Text)
		case "tool_use":
			if m.Role != "assistant" {
				return nil, badRequest(bp, "%s: tool_use blocks belong to assistant messages", bp)
			}
			input := bytes.TrimSpace(b.Input)
			var probe map[string]json.RawMessage
			if len(input) == 0 {
				input = []byte("{}")
			}
			if json.Unmarshal(input, &probe) != nil {
				return nil, badRequest(bp+".input", "%s.input must be a JSON object", bp)
			}
			turn.ToolCalls = append(turn.ToolCalls, backend.ToolCall{ID: b.ID, Name: b.Name, Arguments: json.RawMessage(input)})
		case "tool_result":
			result, err := anthropicText(b.Content, bp+".content")
			if err != nil {
				return nil, err
			}
			if b.IsError {
				result = "Error: " + result
			}
			out = append(out, backend.Message{Role: "tool", Content: result, ToolCallID: b.ToolUseID})
		case "thinking", "redacted_thinking":
			// Earlier thinking is not sent back to the model.
		default:
			return nil, badRequest(bp+".type", "%s has type %q; only text, tool_use and tool_result are supported (this model reads text only)", bp, b.Type)
		}
	}
	turn.Content = text.String()
	if turn.Content != "" || len(turn.ToolCalls) > 0 || len(out) == 0 {
		out = append(out, turn)
	}
	return out, nil
}

// anthropicAnswer is a whole Messages answer, or the message of a
// message_start event.
type anthropicAnswer struct {
	ID           string             `json:"id"`
	Type         string             `json:"type"`
	Role         string             `json:"role"`
	Model        string             `json:"model"`
	Content      []anthropicContent `json:"content"`
	StopReason   *string            `json:"stop_reason"`
	StopSequence *string            `json:"stop_sequence"`
	Usage        anthropicUsage     `json:"usage"`
}

// anthropicContent is a content block of an answer. Each type has its
// constructor (textBlock, toolUseBlock, thinkingBlock) and its own
// fields, pointers where an empty value must still be sent ("text": ""
// opens a text block).
type anthropicContent struct {
	Type string `json:"type"`
	// thinking: a reasoning model's thoughts before its answer. The
	// signature is empty: this server signs nothing, and it does not send
	// thinking blocks a client returns back to the model.
	Thinking  *string `json:"thinking,omitempty"`
	Signature *string `json:"signature,omitempty"`
	// text
	Text *string `json:"text,omitempty"`
	// tool_use
	ID    string          `json:"id,omitempty"`
	Name  string          `json:"name,omitempty"`
	Input json.RawMessage `json:"input,omitempty"`
}

func textBlock(text string) anthropicContent { return anthropicContent{Type: "text", Text: &text} }

func thinkingBlock(thinking string, signed bool) anthropicContent {
	b := anthropicContent{Type: "thinking", Thinking: &thinking}
	if signed {
		b.Signature = new(string)
	}
	return b
}

func toolUseBlock(c backend.ToolCall) anthropicContent {
	id := c.ID
	if strings.HasPrefix(id, "call_") {
		id = "toolu_" + strings.TrimPrefix(id, "call_")
	}
	input := c.Arguments
	if len(input) == 0 {
		input = json.RawMessage("{}")
	}
	return anthropicContent{Type: "tool_use", ID: id, Name: c.Name, Input: input}
}

type anthropicUsage struct {
	InputTokens  int `json:"input_tokens"`
	OutputTokens int `json:"output_tokens"`
	// CacheReadInputTokens are the prompt tokens whose keys and values
	// came from the KV cache (not in InputTokens, as Anthropic counts
	// its prompt caching).
	CacheReadInputTokens int `json:"cache_read_input_tokens"`
}

// anthropicUsageOf is a finished answer's usage.
func anthropicUsageOf(res backend.Result) anthropicUsage {
	return anthropicUsage{InputTokens: res.PromptTokens - res.CachedTokens, OutputTokens: res.CompletionTokens, CacheReadInputTokens: res.CachedTokens}
}

// The streaming events, one struct each, in the order they come:
// message_start, ping, then per block content_block_start, its deltas
// and content_block_stop, then message_delta and message_stop (or an
// error event when the answer is cut).

// anthropicMessageStart is message_start.
type anthropicMessageStart struct {
	Type    string          `json:"type"`
	Message anthropicAnswer `json:"message"`
}

// anthropicPing is ping, and message_stop (both carry only their type).
type anthropicPing struct {
	Type string `json:"type"`
}

// anthropicBlockStart is content_block_start.
type anthropicBlockStart struct {
	Type         string           `json:"type"`
	Index        int              `json:"index"`
	ContentBlock anthropicContent `json:"content_block"`
}

// anthropicBlockDelta is content_block_delta.
type anthropicBlockDelta struct {
	Type  string         `json:"type"`
	Index int            `json:"index"`
	Delta anthropicDelta `json:"delta"`
}

// anthropicDelta is a block's delta: text_delta (Text), input_json_delta
// (PartialJSON), thinking_delta (Thinking) or signature_delta
// (Signature, the last delta of a thinking block).
type anthropicDelta struct {
	Type        string  `json:"type"`
	Text        *string `json:"text,omitempty"`
	PartialJSON *string `json:"partial_json,omitempty"`
	Thinking    *string `json:"thinking,omitempty"`
	Signature   *string `json:"signature,omitempty"`
}

// anthropicBlockStop is content_block_stop.
type anthropicBlockStop struct {
	Type  string `json:"type"`
	Index int    `json:"index"`
}

// anthropicMessageDelta is message_delta: why the answer stopped, and
// the final usage.
type anthropicMessageDelta struct {
	Type  string `json:"type"`
	Delta struct {
		StopReason   string  `json:"stop_reason"`
		StopSequence *string `json:"stop_sequence"`
	} `json:"delta"`
	Usage anthropicUsage `json:"usage"`
}

// anthropicStop is why an answer stopped, as Anthropic says it:
// stop_reason, and the stop sequence that ended it (nil unless one did).
func anthropicStop(a *answer) (string, *string) {
	switch {
	case len(a.ToolCalls) > 0:
		return "tool_use", nil
	case a.Result.FinishReason == backend.FinishLength:
		return "max_tokens", nil
	case a.Result.StopSequence != "":
		seq := a.Result.StopSequence
		return "stop_sequence", &seq
	}
	return "end_turn", nil
}

// anthropicErrorBody is Anthropic's error shape.
type anthropicErrorBody struct {
	Type  string `json:"type"`
	Error struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
}

func anthropicError(ae *apiError) anthropicErrorBody {
	var e anthropicErrorBody
	e.Type = "error"
	switch {
	case ae.status == http.StatusUnauthorized:
		e.Error.Type = "authentication_error"
	case ae.status == http.StatusNotFound:
		e.Error.Type = "not_found_error"
	case ae.status == http.StatusRequestEntityTooLarge:
		e.Error.Type = "request_too_large"
	case ae.status == http.StatusTooManyRequests:
		e.Error.Type = "rate_limit_error"
	case ae.status == http.StatusServiceUnavailable:
		e.Error.Type = "overloaded_error"
	case ae.status == http.StatusGatewayTimeout:
		e.Error.Type = "timeout_error"
	case ae.status >= 500:
		e.Error.Type = "api_error"
	default:
		e.Error.Type = "invalid_request_error"
	}
	e.Error.Message = ae.msg
	return e
}

func (s *Server) anthropicMessages(w http.ResponseWriter, r *http.Request) {
	s.generate(w, r, api{idPrefix: "msg_", decode: func(w http.ResponseWriter, r *http.Request, body []byte) (*call, error) {
		req, in, err := parseAnthropic(body)
		if err != nil {
			return nil, err
		}
		var out answerWriter = &anthropicWhole{s: s, w: w, r: r}
		if in.Stream {
			out = &anthropicStream{s: s, w: w, r: r, sse: s.newSSE(w)}
		}
		return &call{req: req, out: out, model: in.Model, split: true}, nil
	}})
}

// anthropicWhole writes a whole Messages answer.
type anthropicWhole struct {
	s *Server
	w http.ResponseWriter
	r *http.Request
}

func (o *anthropicWhole) piece(*answer, backend.Token) error { return nil }

func (o *anthropicWhole) finish(a *answer) error {
	content := []anthropicContent{}
	if th := a.Thinking.String(); th != "" {
		content = append(content, thinkingBlock(th, true))
	}
	if text := a.Text.String(); text != "" || len(a.ToolCalls) == 0 {
		content = append(content, textBlock(text))
	}
	for _, c := range a.ToolCalls {
		content = append(content, toolUseBlock(c))
	}
	reason, seq := anthropicStop(a)
	writeJSON(o.w, http.StatusOK, anthropicAnswer{ID: a.ID, Type: "message", Role: "assistant", Model: a.Model,
		Content: content, StopReason: &reason, StopSequence: seq, Usage: anthropicUsageOf(a.Result)})
	return nil
}

func (o *anthropicWhole) fail(_ *answer, ae *apiError) { o.s.writeAPIError(o.w, o.r, ae) }

// anthropicStream writes the Messages streaming events. Text goes in a
// text block opened at the first piece; each tool call is a tool_use
// block of its own whose input arrives as one input_json_delta.
type anthropicStream struct {
	s          *Server
	w          http.ResponseWriter
	r          *http.Request
	sse        *sse
	began      bool
	index      int  // the next block's index
	inText     bool // a text block is open
	inThinking bool // a thinking block is open
}

func (o *anthropicStream) begin(a *answer) error {
	if o.began {
		return nil
	}
	o.began = true
	// The prompt's size as the backend told it with the first piece (or,
	// for an answer with no pieces, as its result says), counted as the
	// final usage counts it.
	prompt := backend.Result{PromptTokens: a.PromptTokens, CachedTokens: a.CachedTokens}
	if prompt.PromptTokens == 0 {
		prompt = a.Result
	}
	usage := anthropicUsageOf(backend.Result{PromptTokens: prompt.PromptTokens, CachedTokens: prompt.CachedTokens})
	msg := anthropicAnswer{ID: a.ID, Type: "message", Role: "assistant", Model: a.Model, Content: []anthropicContent{},
		Usage: usage}
	if err := o.sse.event("message_start", anthropicMessageStart{"message_start", msg}); err != nil {
		return err
	}
	return o.sse.event("ping", anthropicPing{"ping"})
}

// open starts block b at the next index.
func (o *anthropicStream) open(b anthropicContent) error {
	return o.sse.event("content_block_start", anthropicBlockStart{"content_block_start", o.index, b})
}

// close ends the open block.
func (o *anthropicStream) close() error {
	o.index++
	return o.sse.event("content_block_stop", anthropicBlockStop{"content_block_stop", o.index - 1})
}

func (o *anthropicStream) delta(d anthropicDelta) error {
	return o.sse.event("content_block_delta", anthropicBlockDelta{"content_block_delta", o.index, d})
}

func (o *anthropicStream) closeText() error {
	if !o.inText {
		return nil
	}
	o.inText = false
	return o.close()
}

// closeThinking ends an open thinking block with its (empty) signature.
func (o *anthropicStream) closeThinking() error {
	if !o.inThinking {
		return nil
	}
	o.inThinking = false
	if err := o.delta(anthropicDelta{Type: "signature_delta", Signature: new(string)}); err != nil {
		return err
	}
	return o.close()
}

func (o *anthropicStream) piece(a *answer, t backend.Token) error {
	if err := o.begin(a); err != nil {
		return err
	}
	if t.Thinking != "" {
		if !o.inThinking {
			o.inThinking = true
			if err := o.open(thinkingBlock("", false)); err != nil {
				return err
			}
		}
		th := t.Thinking
		if err := o.delta(anthropicDelta{Type: "thinking_delta", Thinking: &th}); err != nil {
			return err
		}
	}
	if t.Text != "" || len(t.ToolCalls) > 0 {
		if err := o.closeThinking(); err != nil {
			return err
		}
	}
	if t.Text != "" {
		if !o.inText {
			o.inText = true
			if err := o.open(textBlock("")); err != nil {
				return err
			}
		}
		text := t.Text
		if err := o.delta(anthropicDelta{Type: "text_delta", Text: &text}); err != nil {
			return err
		}
	}
	for _, c := range t.ToolCalls {
		if err := o.closeText(); err != nil {
			return err
		}
		b := toolUseBlock(c)
		input := compactJSON(b.Input)
		b.Input = json.RawMessage("{}")
		if err := o.open(b); err != nil {
			return err
		}
		if err := o.delta(anthropicDelta{Type: "input_json_delta", PartialJSON: &input}); err != nil {
			return err
		}
		if err := o.close(); err != nil {
			return err
		}
	}
	return nil
}

func (o *anthropicStream) finish(a *answer) error {
	if err := o.begin(a); err != nil {
		return err
	}
	if err := o.closeThinking(); err != nil {
		return err
	}
	if !o.inText && len(a.ToolCalls) == 0 && a.Text.Len() == 0 {
		// An empty answer still has its (empty) text block.
		if err := o.open(textBlock("")); err != nil {
			return err
		}
		o.inText = true
	}
	if err := o.closeText(); err != nil {
		return err
	}
	md := anthropicMessageDelta{Type: "message_delta", Usage: anthropicUsageOf(a.Result)}
	md.Delta.StopReason, md.Delta.StopSequence = anthropicStop(a)
	if err := o.sse.event("message_delta", md); err != nil {
		return err
	}
	return o.sse.event("message_stop", anthropicPing{"message_stop"})
}

func (o *anthropicStream) fail(_ *answer, ae *apiError) {
	if !o.sse.started {
		o.s.writeAPIError(o.w, o.r, ae)
		return
	}
	o.sse.event("error", anthropicError(ae))
}
