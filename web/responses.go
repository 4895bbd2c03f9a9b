package web

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/npuchat/npuchat/service/backend"
)

// The OpenAI Responses API (POST /v1/responses), for clients that have
// moved to it: text or message input, instructions, function tools and
// function_call / function_call_output items, text.format for JSON, and
// the streaming events (response.created … response.completed). NPU Chat
// keeps no state between requests, so previous_response_id is refused:
// send the conversation as input items instead. It is one more format of
// the one driver.

// responsesRequest is the body of POST /v1/responses.
type responsesRequest struct {
	Model              string          `json:"model"`
	Input              json.RawMessage `json:"input"`
	Instructions       string          `json:"instructions"`
	Stream             bool            `json:"stream"`
	MaxOutputTokens    *int            `json:"max_output_tokens"`
	Temperature        *float64        `json:"temperature"`
	TopP               *float64        `json:"top_p"`
	Tools              []responsesTool `json:"tools"`
	ToolChoice         json.RawMessage `json:"tool_choice"`
	ParallelToolCalls  *bool           `json:"parallel_tool_calls"`
	PreviousResponseID string          `json:"previous_response_id"`
	Text               *struct {
		Format json.RawMessage `json:"format"`
	} `json:"text"`
	// Speculative is NPU Chat's own (extra_body in the SDKs):
	// parseSpeculative.
	Speculative json.RawMessage `json:"speculative"`
}

type responsesTool struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
}

// responsesItem is an input item: a message, a function call the model
// made, or a call's output.
type responsesItem struct {
	Type      string          `json:"type"`
	Role      string          `json:"role"`
	Content   json.RawMessage `json:"content"`
	CallID    string          `json:"call_id"`
	Name      string          `json:"name"`
	Arguments string          `json:"arguments"`
	Output    json.RawMessage `json:"output"`
}

func parseResponses(body []byte) (*backend.Request, *responsesRequest, error) {
	var in responsesRequest
	if err := unmarshalBody(body, &in); err != nil {
		return nil, nil, err
	}
	req := &backend.Request{Model: trimModel(in.Model)}
	if req.Model == "" {
		return nil, nil, badRequest("model", "model is required (for example \"minicpm5:2b\")")
	}
	if in.PreviousResponseID != "" {
		return nil, nil, badRequest("previous_response_id", "previous_response_id is not supported: NPU Chat stores no responses; send the conversation as input items")
	}
	var err error
	if req.Speculative, err = parseSpeculative("speculative", in.Speculative); err != nil {
		return nil, nil, err
	}
	if req.MaxTokens, err = checkMaxTokens("max_output_tokens", in.MaxOutputTokens); err != nil {
		return nil, nil, err
	}
	sp := samplingParams{Temperature: in.Temperature, TopP: in.TopP}
	if req.Sampling, err = sp.toSampling(nil); err != nil {
		return nil, nil, err
	}
	if in.Instructions != "" {
		req.Messages = append(req.Messages, backend.Message{Role: "system", Content: in.Instructions})
	}
	msgs, err := responsesInput(in.Input)
	if err != nil {
		return nil, nil, err
	}
	req.Messages = append(req.Messages, msgs...)
	// Tools are flat here ({type, name, parameters}); as the chat API's.
	var defs []toolDef
	for i, t := range in.Tools {
		if t.Type != "function" {
			return nil, nil, badRequest(fmt.Sprintf("tools[%d].type", i), "tools[%d].type %q is not supported; only \"function\" tools are", i, t.Type)
		}
		d := toolDef{Type: "function"}
		d.Function = &struct {
			Name        string          `json:"name"`
			Description string          `json:"description"`
			Parameters  json.RawMessage `json:"parameters"`
		}{t.Name, t.Description, t.Parameters}
		defs = append(defs, d)
	}
	f := requestFeatures{ToolChoice: in.ToolChoice, ParallelToolCalls: in.ParallelToolCalls}
	if len(defs) > 0 {
		f.Tools, _ = json.Marshal(defs)
	}
	if in.Text != nil && asked(in.Text.Format) {
		// text.format is response_format with the json_schema fields
		// flattened: {"type": "json_schema", "name", "schema"}.
		var tf struct {
			Type   string          `json:"type"`
			Name   string          `json:"name"`
			Schema json.RawMessage `json:"schema"`
		}
		if json.Unmarshal(in.Text.Format, &tf) != nil {
			return nil, nil, badRequest("text.format", "text.format must be {\"type\": \"text\" | \"json_object\" | \"json_schema\", ...}")
		}
		rf := map[string]any{"type": tf.Type}
		if tf.Type == "json_schema" {
			rf["json_schema"] = map[string]any{"name": tf.Name, "schema": tf.Schema}
		}
		f.ResponseFormat, _ = json.Marshal(rf)
	}
	if err := f.apply(req, false); err != nil {
		return nil, nil, err
	}
	return req, &in, nil
}

// responsesInput reads input: a string (one user message) or a list of
// items.
func responsesInput(raw json.RawMessage) ([]backend.Message, error) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		if s == "" {
			return nil, badRequest("input", "input is empty")
		}
		return []backend.Message{{Role: "user", Content: s}}, nil
	}
	var items []responsesItem
	if json.Unmarshal(raw, &items) != nil || len(items) == 0 {
		return nil, badRequest("input", "input must be a string or a non-empty list of items")
	}
	var out []backend.Message
	for i, it := range items {
		param := fmt.Sprintf("input[%d]", i)
		switch it.Type {
		case "", "message":
			role := it.Role
			switch role {
			case "user", "assistant", "system":
			case "developer":
				role = "system"
			default:
				return nil, badRequest(param+".role", "%s.role %q must be user, assistant, system or developer", param, it.Role)
			}
			var c content
			if err := json.Unmarshal(it.Content, &c); err != nil {
				var parts []struct{ Type, Text string }
				if json.Unmarshal(it.Content, &parts) != nil {
					return nil, badRequest(param+".content", "%s.content must be a string or a list of text parts", param)
				}
				var sb strings.Builder
				for j, p := range parts {
					if p.Type != "input_text" && p.Type != "output_text" && p.Type != "text" {
						return nil, badRequest(fmt.Sprintf("%s.content[%d].type", param, j), "%s.content[%d] has type %q; this model reads text only", param, j, p.Type)
					}
					sb.WriteString(p.Text)
				}
				c = content(sb.String())
			}
			out = append(out, backend.Message{Role: role, Content: string(c)})
		case "function_call":
			calls, err := toToolCalls([]chatToolCall{{ID: it.CallID, Function: struct {
				Name      string          `json:"name"`
				Arguments json.RawMessage `json:"arguments"`
			}{it.Name, mustJSONString(it.Arguments)}}}, i)
			if err != nil {
				return nil, err
			}
			// Consecutive calls are one assistant turn.
			if n := len(out); n > 0 && out[n-1].Role == "assistant" && out[n-1].Content == "" && len(out[n-1].ToolCalls) > 0 {
				out[n-1].ToolCalls = append(out[n-1].ToolCalls, calls...)
			} else {
				out = append(out, backend.Message{Role: "assistant", ToolCalls: calls})
			}
		case "function_call_output":
			var text string
			if json.Unmarshal(it.Output, &text) != nil {
				text = string(it.Output)
			}
			out = append(out, backend.Message{Role: "tool", Content: text, ToolCallID: it.CallID})
		case "reasoning":
			// Earlier reasoning is not sent back to the model.
		default:
			return nil, badRequest(param+".type", "%s.type %q is not supported (message, function_call and function_call_output are)", param, it.Type)
		}
	}
	return out, nil
}

func mustJSONString(s string) json.RawMessage {
	b, _ := json.Marshal(s)
	return b
}

// responsesObject is a response, whole or in the created/completed
// events.
type responsesObject struct {
	ID                string               `json:"id"`
	Object            string               `json:"object"`
	CreatedAt         int64                `json:"created_at"`
	Status            string               `json:"status"`
	Model             string               `json:"model"`
	Output            []responsesOutput    `json:"output"`
	Usage             *responsesUsage      `json:"usage"`
	IncompleteDetails *responsesIncomplete `json:"incomplete_details"`
	Error             *responsesError      `json:"error"`
	ParallelToolCalls bool                 `json:"parallel_tool_calls"`
	ToolChoice        any                  `json:"tool_choice"`
	Tools             []any                `json:"tools"`
}

// responsesOutput is an output item: a message (Content, never omitted,
// [] while it is empty: the SDK's stream helper iterates it) or a
// function call (CallID, Name, Arguments). A reasoning item is another
// Type with its own fields beside these.
type responsesOutput struct {
	Type      string                 `json:"type"`
	ID        string                 `json:"id"`
	Status    string                 `json:"status"`
	Role      string                 `json:"role,omitempty"`
	Content   *[]responsesOutputText `json:"content,omitempty"`
	CallID    string                 `json:"call_id,omitempty"`
	Name      string                 `json:"name,omitempty"`
	Arguments *string                `json:"arguments,omitempty"`
}

// responsesOutputText is a message's output_text content part.
type responsesOutputText struct {
	Type        string `json:"type"`
	Text        string `json:"text"`
	Annotations []any  `json:"annotations"`
	Logprobs    []any  `json:"logprobs"`
}

type responsesIncomplete struct {
	Reason string `json:"reason"`
}

// responsesError is a failed response's error.
type responsesError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

type responsesUsage struct {
	InputTokens        int                   `json:"input_tokens"`
	InputTokensDetails responsesInputDetails `json:"input_tokens_details"`
	OutputTokens       int                   `json:"output_tokens"`
	TotalTokens        int                   `json:"total_tokens"`
}

// responsesInputDetails is usage.input_tokens_details: cached_tokens are
// the prompt tokens whose keys and values came from the KV cache.
type responsesInputDetails struct {
	CachedTokens int `json:"cached_tokens"`
}

// The streaming events, each as its own struct so that a field cannot go
// missing by omitempty (the SDK's types mark them all required). Every
// event carries its type and its sequence number first.

// responsesEventHead is what every event starts with.
type responsesEventHead struct {
	Type           string `json:"type"`
	SequenceNumber int    `json:"sequence_number"`
}

// responsesResponseEvent is response.created, .in_progress, .completed,
// .incomplete and .failed.
type responsesResponseEvent struct {
	responsesEventHead
	Response responsesObject `json:"response"`
}

// responsesItemEvent is response.output_item.added and .done.
type responsesItemEvent struct {
	responsesEventHead
	OutputIndex int             `json:"output_index"`
	Item        responsesOutput `json:"item"`
}

// responsesPartEvent is response.content_part.added and .done.
type responsesPartEvent struct {
	responsesEventHead
	ItemID       string              `json:"item_id"`
	OutputIndex  int                 `json:"output_index"`
	ContentIndex int                 `json:"content_index"`
	Part         responsesOutputText `json:"part"`
}

// responsesTextDeltaEvent is response.output_text.delta.
type responsesTextDeltaEvent struct {
	responsesEventHead
	ItemID       string `json:"item_id"`
	OutputIndex  int    `json:"output_index"`
	ContentIndex int    `json:"content_index"`
	Delta        string `json:"delta"`
	Logprobs     []any  `json:"logprobs"`
}

// responsesTextDoneEvent is response.output_text.done.
type responsesTextDoneEvent struct {
	responsesEventHead
	ItemID       string `json:"item_id"`
	OutputIndex  int    `json:"output_index"`
	ContentIndex int    `json:"content_index"`
	Text         string `json:"text"`
	Logprobs     []any  `json:"logprobs"`
}

// responsesArgsDeltaEvent is response.function_call_arguments.delta.
type responsesArgsDeltaEvent struct {
	responsesEventHead
	ItemID      string `json:"item_id"`
	OutputIndex int    `json:"output_index"`
	Delta       string `json:"delta"`
}

// responsesArgsDoneEvent is response.function_call_arguments.done.
type responsesArgsDoneEvent struct {
	responsesEventHead
	ItemID      string `json:"item_id"`
	OutputIndex int    `json:"output_index"`
	Name        string `json:"name"`
	Arguments   string `json:"arguments"`
}

func (s *Server) openAIResponses(w http.ResponseWriter, r *http.Request) {
	s.generate(w, r, api{idPrefix: "resp_", decode: func(w http.ResponseWriter, r *http.Request, body []byte) (*call, error) {
		req, in, err := parseResponses(body)
		if err != nil {
			return nil, err
		}
		rw := responsesWriter{s: s, w: w, r: r, parallel: req.ParallelToolCalls, msgID: newID("msg_")}
		var out answerWriter = &responsesWhole{rw}
		if in.Stream {
			out = &responsesStream{responsesWriter: rw, sse: s.newSSE(w)}
		}
		return &call{req: req, out: out, model: in.Model}, nil
	}})
}

type responsesWriter struct {
	s        *Server
	w        http.ResponseWriter
	r        *http.Request
	parallel bool
	msgID    string
}

// object is the response as it stands; final adds output and usage.
func (o *responsesWriter) object(a *answer, status string, output []responsesOutput, final bool) responsesObject {
	obj := responsesObject{ID: a.ID, Object: "response", CreatedAt: a.Created(), Status: status, Model: a.Model,
		Output: output, ParallelToolCalls: o.parallel, ToolChoice: "auto", Tools: []any{}}
	if obj.Output == nil {
		obj.Output = []responsesOutput{}
	}
	if final {
		obj.Usage = &responsesUsage{InputTokens: a.Result.PromptTokens, InputTokensDetails: responsesInputDetails{a.Result.CachedTokens},
			OutputTokens: a.Result.CompletionTokens, TotalTokens: a.Result.PromptTokens + a.Result.CompletionTokens}
		if a.Result.FinishReason == backend.FinishLength {
			obj.Status = "incomplete"
			obj.IncompleteDetails = &responsesIncomplete{"max_output_tokens"}
		}
	}
	return obj
}

// outputText is an output_text part holding text.
func outputText(text string) responsesOutputText {
	return responsesOutputText{Type: "output_text", Text: text, Annotations: []any{}, Logprobs: []any{}}
}

// messageItem is the answer's message item; with no text it has no
// parts yet (content [], as the stream's output_item.added sends it).
func (o *responsesWriter) messageItem(status string, parts ...responsesOutputText) responsesOutput {
	if parts == nil {
		parts = []responsesOutputText{}
	}
	return responsesOutput{Type: "message", ID: o.msgID, Status: status, Role: "assistant", Content: &parts}
}

func callItem(c backend.ToolCall, args string) responsesOutput {
	id := strings.TrimPrefix(c.ID, "call_")
	return responsesOutput{Type: "function_call", ID: "fc_" + id, Status: "completed", CallID: c.ID, Name: c.Name, Arguments: &args}
}

// output is the whole answer's items.
func (o *responsesWriter) output(a *answer) []responsesOutput {
	var out []responsesOutput
	if text := a.Text.String(); text != "" || len(a.ToolCalls) == 0 {
		out = append(out, o.messageItem("completed", outputText(text)))
	}
	for _, c := range a.ToolCalls {
		out = append(out, callItem(c, compactJSON(c.Arguments)))
	}
	return out
}

type responsesWhole struct{ responsesWriter }

func (o *responsesWhole) piece(*answer, backend.Token) error { return nil }

func (o *responsesWhole) finish(a *answer) error {
	writeJSON(o.w, http.StatusOK, o.object(a, "completed", o.output(a), true))
	return nil
}

func (o *responsesWhole) fail(_ *answer, ae *apiError) { o.s.writeAPIError(o.w, o.r, ae) }

// responsesStream writes the Responses streaming events.
type responsesStream struct {
	responsesWriter
	sse    *sse
	seq    int
	began  bool
	inText bool // the message item is open
	index  int  // the next output item's index
	text   strings.Builder
	items  []responsesOutput
}

// head is the next event's type and sequence number.
func (o *responsesStream) head(name string) responsesEventHead {
	h := responsesEventHead{Type: name, SequenceNumber: o.seq}
	o.seq++
	return h
}

// send writes one event; ev's head names it.
func (o *responsesStream) send(h responsesEventHead, ev any) error { return o.sse.event(h.Type, ev) }

func (o *responsesStream) begin(a *answer) error {
	if o.began {
		return nil
	}
	o.began = true
	for _, name := range []string{"response.created", "response.in_progress"} {
		h := o.head(name)
		if err := o.send(h, responsesResponseEvent{h, o.object(a, "in_progress", nil, false)}); err != nil {
			return err
		}
	}
	return nil
}

func (o *responsesStream) openText() error {
	if o.inText {
		return nil
	}
	o.inText = true
	h := o.head("response.output_item.added")
	if err := o.send(h, responsesItemEvent{h, o.index, o.messageItem("in_progress")}); err != nil {
		return err
	}
	h = o.head("response.content_part.added")
	return o.send(h, responsesPartEvent{h, o.msgID, o.index, 0, outputText("")})
}

func (o *responsesStream) closeText() error {
	if !o.inText {
		return nil
	}
	o.inText = false
	text := o.text.String()
	h := o.head("response.output_text.done")
	if err := o.send(h, responsesTextDoneEvent{h, o.msgID, o.index, 0, text, []any{}}); err != nil {
		return err
	}
	h = o.head("response.content_part.done")
	if err := o.send(h, responsesPartEvent{h, o.msgID, o.index, 0, outputText(text)}); err != nil {
		return err
	}
	item := o.messageItem("completed", outputText(text))
	o.items = append(o.items, item)
	h = o.head("response.output_item.done")
	if err := o.send(h, responsesItemEvent{h, o.index, item}); err != nil {
		return err
	}
	o.index++
	return nil
}

func (o *responsesStream) piece(a *answer, t backend.Token) error {
	if err := o.begin(a); err != nil {
		return err
	}
	if t.Text != "" {
		if err := o.openText(); err != nil {
			return err
		}
		o.text.WriteString(t.Text)
		h := o.head("response.output_text.delta")
		if err := o.send(h, responsesTextDeltaEvent{h, o.msgID, o.index, 0, t.Text, []any{}}); err != nil {
			return err
		}
	}
	for _, c := range t.ToolCalls {
		if err := o.closeText(); err != nil {
			return err
		}
		args := compactJSON(c.Arguments)
		item := callItem(c, "")
		item.Status = "in_progress"
		h := o.head("response.output_item.added")
		if err := o.send(h, responsesItemEvent{h, o.index, item}); err != nil {
			return err
		}
		h = o.head("response.function_call_arguments.delta")
		if err := o.send(h, responsesArgsDeltaEvent{h, item.ID, o.index, args}); err != nil {
			return err
		}
		h = o.head("response.function_call_arguments.done")
		if err := o.send(h, responsesArgsDoneEvent{h, item.ID, o.index, c.Name, args}); err != nil {
			return err
		}
		done := callItem(c, args)
		o.items = append(o.items, done)
		h = o.head("response.output_item.done")
		if err := o.send(h, responsesItemEvent{h, o.index, done}); err != nil {
			return err
		}
		o.index++
	}
	return nil
}

func (o *responsesStream) finish(a *answer) error {
	if err := o.begin(a); err != nil {
		return err
	}
	if o.index == 0 {
		if err := o.openText(); err != nil { // an empty answer is an empty message
			return err
		}
	}
	if err := o.closeText(); err != nil {
		return err
	}
	obj := o.object(a, "completed", o.items, true)
	name := "response.completed"
	if obj.Status == "incomplete" {
		name = "response.incomplete"
	}
	h := o.head(name)
	return o.send(h, responsesResponseEvent{h, obj})
}

// fail ends a started stream with response.failed: the response as it
// stood, status "failed", and the error in it (as OpenAI sends it).
func (o *responsesStream) fail(a *answer, ae *apiError) {
	if !o.sse.started {
		o.s.writeAPIError(o.w, o.r, ae)
		return
	}
	obj := o.object(a, "failed", o.items, false)
	obj.Error = &responsesError{Code: ae.code, Message: ae.msg}
	h := o.head("response.failed")
	o.send(h, responsesResponseEvent{h, obj})
}
