package web

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/npuchat/npuchat/engine/sample"
	"github.com/npuchat/npuchat/service/backend"
)

// This file reads the request features beyond plain text (tools, tool
// choice, response formats, log-probabilities) into the backend request,
// and holds the answer shapes they add. Every API's decoder goes through
// requestFeatures.apply, so that OpenAI, Ollama, Anthropic and Responses
// requests mean the same thing to the backends.

// apply validates the features and sets them on req. completions is
// true for /v1/completions, whose logprobs is a number (the legacy API)
// rather than a boolean.
func (f requestFeatures) apply(req *backend.Request, completions bool) error {
	var err error
	if asked(f.Tools) {
		if req.Tools, err = parseTools(f.Tools, f.Prefix+"tools"); err != nil {
			return err
		}
	}
	if asked(f.ToolChoice) {
		if req.ToolChoice, err = parseToolChoice(f.ToolChoice, f.Prefix+"tool_choice"); err != nil {
			return err
		}
		if len(req.Tools) == 0 && (req.ToolChoice.Mode == backend.ToolRequired || req.ToolChoice.Mode == backend.ToolFunction) {
			return badRequest(f.Prefix+"tool_choice", "tool_choice %q needs \"tools\" to choose from", req.ToolChoice.Mode)
		}
		if req.ToolChoice.Mode == backend.ToolFunction && !hasTool(req.Tools, req.ToolChoice.Name) {
			return badRequest(f.Prefix+"tool_choice", "tool_choice names the function %q, which is not in \"tools\"", req.ToolChoice.Name)
		}
	}
	req.ParallelToolCalls = f.ParallelToolCalls == nil || *f.ParallelToolCalls
	if asked(f.ResponseFormat) {
		if req.Format, err = parseResponseFormat(f.ResponseFormat, f.Prefix+"response_format"); err != nil {
			return err
		}
	}
	if asked(f.Format) {
		if req.Format, err = parseOllamaFormat(f.Format, f.Prefix+"format"); err != nil {
			return err
		}
	}
	if asked(f.Logprobs) {
		if completions {
			var n int
			if json.Unmarshal(f.Logprobs, &n) != nil || n < 0 || n > sample.MaxTopLogprobs {
				return badRequest(f.Prefix+"logprobs", "logprobs must be a whole number from 0 to %d (the alternatives per token)", sample.MaxTopLogprobs)
			}
			req.Logprobs, req.TopLogprobs = true, n
		} else {
			var b bool
			if json.Unmarshal(f.Logprobs, &b) != nil {
				return badRequest(f.Prefix+"logprobs", "logprobs must be true or false")
			}
			req.Logprobs = b
		}
	}
	if asked(f.TopLogprobs) {
		var n int
		if json.Unmarshal(f.TopLogprobs, &n) != nil || n < 0 || n > sample.MaxTopLogprobs {
			return badRequest(f.Prefix+"top_logprobs", "top_logprobs must be a whole number from 0 to %d", sample.MaxTopLogprobs)
		}
		if !req.Logprobs && !completions {
			return badRequest(f.Prefix+"top_logprobs", "top_logprobs needs \"logprobs\": true")
		}
		req.TopLogprobs = n
	}
	return nil
}

func hasTool(tools []backend.Tool, name string) bool {
	for _, t := range tools {
		if t.Name == name {
			return true
		}
	}
	return false
}

// toolDef is a tool as OpenAI and Ollama send it.
type toolDef struct {
	Type     string `json:"type"`
	Function *struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
	} `json:"function"`
}

// parseTools reads [{"type": "function", "function": {name, description,
// parameters}}].
func parseTools(raw json.RawMessage, param string) ([]backend.Tool, error) {
	var defs []json.RawMessage
	if json.Unmarshal(raw, &defs) != nil {
		return nil, badRequest(param, "%s must be a list of {\"type\": \"function\", \"function\": {...}}", param)
	}
	var tools []backend.Tool
	for i, d := range defs {
		var td toolDef
		if json.Unmarshal(d, &td) != nil || td.Function == nil {
			return nil, badRequest(fmt.Sprintf("%s[%d]", param, i), "%s[%d] must be {\"type\": \"function\", \"function\": {\"name\": ..., \"parameters\": {...}}}", param, i)
		}
		if td.Type != "" && td.Type != "function" {
			return nil, badRequest(fmt.Sprintf("%s[%d].type", param, i), "%s[%d].type %q is not supported; only \"function\" tools are", param, i, td.Type)
		}
		name := td.Function.Name
		if !validToolName(name) {
			return nil, badRequest(fmt.Sprintf("%s[%d].function.name", param, i), "%s[%d].function.name %q must be 1 to 64 letters, digits, '_' or '-'", param, i, name)
		}
		if hasTool(tools, name) {
			return nil, badRequest(fmt.Sprintf("%s[%d].function.name", param, i), "two tools are named %q", name)
		}
		params := bytes.TrimSpace(td.Function.Parameters)
		if len(params) > 0 && string(params) != "null" && params[0] != '{' {
			return nil, badRequest(fmt.Sprintf("%s[%d].function.parameters", param, i), "%s[%d].function.parameters must be a JSON Schema object", param, i)
		}
		tools = append(tools, backend.Tool{Name: name, Description: td.Function.Description, Parameters: td.Function.Parameters, Raw: d})
	}
	return tools, nil
}

// validToolName is OpenAI's rule for function names.
func validToolName(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' || r == '.') {
			return false
		}
	}
	return true
}

// parseToolChoice reads "auto", "none", "required" or {"type":
// "function", "function": {"name": ...}}.
func parseToolChoice(raw json.RawMessage, param string) (backend.ToolChoice, error) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		switch s {
		case backend.ToolAuto, backend.ToolNone, backend.ToolRequired:
			return backend.ToolChoice{Mode: s}, nil
		}
		return backend.ToolChoice{}, badRequest(param, "%s %q must be \"auto\", \"none\", \"required\" or {\"type\": \"function\", \"function\": {\"name\": ...}}", param, s)
	}
	var obj struct {
		Type     string `json:"type"`
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
		Name string `json:"name"` // the Responses API's flat form
	}
	if json.Unmarshal(raw, &obj) != nil || obj.Type != "function" || obj.Function.Name == "" && obj.Name == "" {
		return backend.ToolChoice{}, badRequest(param, "%s must be \"auto\", \"none\", \"required\" or {\"type\": \"function\", \"function\": {\"name\": ...}}", param)
	}
	name := obj.Function.Name
	if name == "" {
		name = obj.Name
	}
	return backend.ToolChoice{Mode: backend.ToolFunction, Name: name}, nil
}

// parseResponseFormat reads OpenAI's {"type": "text" | "json_object" |
// "json_schema", "json_schema": {"name", "schema", "strict"}}.
func parseResponseFormat(raw json.RawMessage, param string) (*backend.Format, error) {
	var rf struct {
		Type       string `json:"type"`
		JSONSchema *struct {
			Name   string          `json:"name"`
			Schema json.RawMessage `json:"schema"`
		} `json:"json_schema"`
	}
	if json.Unmarshal(raw, &rf) != nil {
		return nil, badRequest(param, "%s must be {\"type\": \"text\"}, {\"type\": \"json_object\"} or {\"type\": \"json_schema\", \"json_schema\": {\"name\": ..., \"schema\": {...}}}", param)
	}
	switch rf.Type {
	case "text":
		return nil, nil
	case "json_object":
		return &backend.Format{Type: backend.FormatJSON}, nil
	case "json_schema":
		if rf.JSONSchema == nil || !asked(rf.JSONSchema.Schema) {
			return nil, badRequest(param+".json_schema.schema", "%s.json_schema.schema is required with type json_schema", param)
		}
		return &backend.Format{Type: backend.FormatSchema, Schema: rf.JSONSchema.Schema, Name: rf.JSONSchema.Name}, nil
	}
	return nil, badRequest(param+".type", "%s.type %q must be \"text\", \"json_object\" or \"json_schema\"", param, rf.Type)
}

// parseOllamaFormat reads Ollama's format: "json" or a JSON Schema.
func parseOllamaFormat(raw json.RawMessage, param string) (*backend.Format, error) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		if s == "json" {
			return &backend.Format{Type: backend.FormatJSON}, nil
		}
		if s == "" {
			return nil, nil
		}
		return nil, badRequest(param, "%s must be \"json\" or a JSON Schema object, not %q", param, s)
	}
	if t := bytes.TrimSpace(raw); len(t) == 0 || t[0] != '{' {
		return nil, badRequest(param, "%s must be \"json\" or a JSON Schema object", param)
	}
	return &backend.Format{Type: backend.FormatSchema, Schema: raw}, nil
}

// chatToolCall is a tool call in an assistant message a client sends
// back: OpenAI's arguments are a string holding JSON, Ollama's an object.
type chatToolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	} `json:"function"`
}

// toToolCalls converts the calls of message i.
func toToolCalls(in []chatToolCall, i int) ([]backend.ToolCall, error) {
	var out []backend.ToolCall
	for j, c := range in {
		param := fmt.Sprintf("messages[%d].tool_calls[%d]", i, j)
		if c.Function.Name == "" {
			return nil, badRequest(param+".function.name", "%s.function.name is required", param)
		}
		args := bytes.TrimSpace(c.Function.Arguments)
		if len(args) > 0 && args[0] == '"' {
			var s string
			if json.Unmarshal(args, &s) != nil {
				return nil, badRequest(param+".function.arguments", "%s.function.arguments must be a JSON object or a string holding one", param)
			}
			args = bytes.TrimSpace([]byte(s))
		}
		if len(args) == 0 || string(args) == "null" {
			args = []byte("{}")
		}
		var probe map[string]json.RawMessage
		if json.Unmarshal(args, &probe) != nil {
			return nil, badRequest(param+".function.arguments", "%s.function.arguments must be a JSON object or a string holding one", param)
		}
		out = append(out, backend.ToolCall{ID: c.ID, Name: c.Function.Name, Arguments: json.RawMessage(args)})
	}
	return out, nil
}

// openAIToolCall is a call in an answer: whole in a message, or (with
// Index) in a stream's delta. Arguments is a string holding JSON.
type openAIToolCall struct {
	Index    *int   `json:"index,omitempty"`
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

func toOpenAIToolCalls(calls []backend.ToolCall, first int, stream bool) []openAIToolCall {
	out := make([]openAIToolCall, len(calls))
	for i, c := range calls {
		out[i].ID, out[i].Type = c.ID, "function"
		out[i].Function.Name, out[i].Function.Arguments = c.Name, compactJSON(c.Arguments)
		if stream {
			n := first + i
			out[i].Index = &n
		}
	}
	return out
}

func compactJSON(raw json.RawMessage) string {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return string(raw)
	}
	return b.String()
}

// openAITokenLogprob is one token's entry in a chat answer's
// logprobs.content.
type openAITokenLogprob struct {
	Token       string             `json:"token"`
	Logprob     float64            `json:"logprob"`
	Bytes       []int              `json:"bytes"`
	TopLogprobs []openAITopLogprob `json:"top_logprobs"`
}

type openAITopLogprob struct {
	Token   string  `json:"token"`
	Logprob float64 `json:"logprob"`
	Bytes   []int   `json:"bytes"`
}

func byteInts(b []byte) []int {
	out := make([]int, len(b))
	for i, c := range b {
		out[i] = int(c)
	}
	return out
}

// chatLogprobs is a chat choice's logprobs object, nil when none were
// asked for.
func chatLogprobs(asked bool, lps []backend.Logprob) *openAILogprobs {
	if !asked {
		return nil
	}
	out := &openAILogprobs{Content: []openAITokenLogprob{}}
	for _, lp := range lps {
		e := openAITokenLogprob{Token: lp.Token, Logprob: lp.Logprob, Bytes: byteInts(lp.Bytes), TopLogprobs: []openAITopLogprob{}}
		for _, t := range lp.Top {
			e.TopLogprobs = append(e.TopLogprobs, openAITopLogprob{Token: t.Token, Logprob: t.Logprob, Bytes: byteInts(t.Bytes)})
		}
		out.Content = append(out.Content, e)
	}
	return out
}

// openAITextLogprobs is the legacy completions logprobs object.
type openAITextLogprobs struct {
	Tokens        []string             `json:"tokens"`
	TokenLogprobs []float64            `json:"token_logprobs"`
	TopLogprobs   []map[string]float64 `json:"top_logprobs"`
	TextOffset    []int                `json:"text_offset"`
}

// textLogprobs is a completion choice's logprobs; offset is where the
// text of lps starts in the choice's text.
func textLogprobs(asked bool, lps []backend.Logprob, offset int) *openAITextLogprobs {
	if !asked {
		return nil
	}
	out := &openAITextLogprobs{Tokens: []string{}, TokenLogprobs: []float64{}, TopLogprobs: []map[string]float64{}, TextOffset: []int{}}
	for _, lp := range lps {
		out.Tokens = append(out.Tokens, lp.Token)
		out.TokenLogprobs = append(out.TokenLogprobs, lp.Logprob)
		top := map[string]float64{}
		for _, t := range lp.Top {
			if _, dup := top[t.Token]; !dup {
				top[t.Token] = t.Logprob
			}
		}
		out.TopLogprobs = append(out.TopLogprobs, top)
		out.TextOffset = append(out.TextOffset, offset)
		offset += len(lp.Bytes)
	}
	return out
}

// ollamaToolCall is a call in an Ollama answer (arguments an object).
type ollamaToolCall struct {
	Function struct {
		Index     int             `json:"index"`
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	} `json:"function"`
}

func toOllamaToolCalls(calls []backend.ToolCall, first int) []ollamaToolCall {
	out := make([]ollamaToolCall, len(calls))
	for i, c := range calls {
		out[i].Function.Index = first + i
		out[i].Function.Name, out[i].Function.Arguments = c.Name, c.Arguments
	}
	return out
}

// ollamaLogprob is one token's entry in an Ollama answer's logprobs
// (Ollama 0.12's shape: token, logprob, bytes, top_logprobs).
type ollamaLogprob struct {
	Token       string             `json:"token"`
	Logprob     float64            `json:"logprob"`
	Bytes       []int              `json:"bytes,omitempty"`
	TopLogprobs []openAITopLogprob `json:"top_logprobs,omitempty"`
}

func toOllamaLogprobs(lps []backend.Logprob) []ollamaLogprob {
	if len(lps) == 0 {
		return nil
	}
	out := make([]ollamaLogprob, len(lps))
	for i, lp := range lps {
		out[i] = ollamaLogprob{Token: lp.Token, Logprob: lp.Logprob, Bytes: byteInts(lp.Bytes)}
		for _, t := range lp.Top {
			out[i].TopLogprobs = append(out[i].TopLogprobs, openAITopLogprob{Token: t.Token, Logprob: t.Logprob, Bytes: byteInts(t.Bytes)})
		}
	}
	return out
}

// finishReason is the OpenAI finish reason of an answer.
func finishReason(a *answer) string {
	if len(a.ToolCalls) > 0 {
		return backend.FinishToolCalls
	}
	return a.Result.FinishReason
}

// ollamaDoneReason: Ollama says "stop" for an answer that ended in calls.
func ollamaDoneReason(a *answer) string {
	if a.Result.FinishReason == backend.FinishToolCalls {
		return backend.FinishStop
	}
	return a.Result.FinishReason
}

// capabilities is /api/show's list for a model: what the service says
// it can do, the same before and after it loads.
func (s *Server) capabilities(name string) []string { return s.mgr.Capabilities(name) }
