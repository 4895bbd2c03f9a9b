package oaicompat

import (
	"bytes"
	"encoding/json"
	"sort"

	"github.com/npuchat/npuchat/service/backend"
)

// Tools, response formats and log-probabilities are passed to the server
// in OpenAI's wire format, and its tool calls and log-probabilities read
// back. A remote OpenAI-compatible server (llama.cpp's, vLLM, Ollama,
// LM Studio, OpenAI) takes them; one that does not answers 400, which the
// client sees. Backends built on this client that cannot honour them
// (FastFlowLM) say so in their capabilities and refuse before a request
// is sent.

// remoteCapabilities are what a remote server is assumed to do.
var remoteCapabilities = []string{backend.CapCompletion, backend.CapTools, backend.CapJSON, backend.CapLogprobs}

// RemoteCapabilities is what a remote server is assumed to do (the
// remote backend's Info), for /api/show before it is asked.
func RemoteCapabilities() []string { return append([]string(nil), remoteCapabilities...) }

// wireMessage is a chat message in OpenAI's wire format.
type wireMessage struct {
	Role       string         `json:"role"`
	Content    *string        `json:"content"`
	Name       string         `json:"name,omitempty"`
	ToolCalls  []wireToolCall `json:"tool_calls,omitempty"`
	ToolCallID string         `json:"tool_call_id,omitempty"`
}

type wireToolCall struct {
	Index    *int   `json:"index,omitempty"`
	ID       string `json:"id,omitempty"`
	Type     string `json:"type,omitempty"`
	Function struct {
		Name      string `json:"name,omitempty"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

func wireMessages(in []backend.Message) []wireMessage {
	out := make([]wireMessage, len(in))
	for i, m := range in {
		content := m.Content
		out[i] = wireMessage{Role: m.Role, Content: &content, Name: m.Name, ToolCallID: m.ToolCallID}
		if m.Role == "assistant" && content == "" && len(m.ToolCalls) > 0 {
			out[i].Content = nil
		}
		for _, c := range m.ToolCalls {
			var w wireToolCall
			w.ID, w.Type = c.ID, "function"
			w.Function.Name, w.Function.Arguments = c.Name, string(c.Arguments)
			out[i].ToolCalls = append(out[i].ToolCalls, w)
		}
	}
	return out
}

// addFeatures sets the request's tools, format and logprobs fields.
func (w *wireRequest) addFeatures(req *backend.Request) {
	chat := req.Messages != nil
	if len(req.Tools) > 0 && chat {
		for _, t := range req.Tools {
			raw := t.Raw
			if len(raw) == 0 {
				raw, _ = json.Marshal(map[string]any{"type": "function", "function": map[string]any{"name": t.Name, "description": t.Description, "parameters": t.Parameters}})
			}
			w.Tools = append(w.Tools, raw)
		}
		switch req.ToolChoice.Mode {
		case backend.ToolAuto, backend.ToolNone, backend.ToolRequired:
			w.ToolChoice = req.ToolChoice.Mode
		case backend.ToolFunction:
			w.ToolChoice = map[string]any{"type": "function", "function": map[string]string{"name": req.ToolChoice.Name}}
		}
		if !req.ParallelToolCalls {
			f := false
			w.ParallelToolCalls = &f
		}
	}
	if f := req.Format; f != nil {
		switch f.Type {
		case backend.FormatJSON:
			w.ResponseFormat = map[string]string{"type": "json_object"}
		case backend.FormatSchema:
			name := f.Name
			if name == "" {
				name = "answer"
			}
			w.ResponseFormat = map[string]any{"type": "json_schema", "json_schema": map[string]any{"name": name, "schema": f.Schema}}
		}
	}
	if req.Logprobs || req.TopLogprobs > 0 {
		if chat {
			w.Logprobs = true
			if req.TopLogprobs > 0 {
				n := req.TopLogprobs
				w.TopLogprobs = &n
			}
		} else {
			w.Logprobs = req.TopLogprobs
		}
	}
}

// wireLogprobs is a choice's logprobs: chat's content list, or the
// legacy completions arrays.
type wireLogprobs struct {
	Content []struct {
		Token       string  `json:"token"`
		Logprob     float64 `json:"logprob"`
		Bytes       []int   `json:"bytes"`
		TopLogprobs []struct {
			Token   string  `json:"token"`
			Logprob float64 `json:"logprob"`
			Bytes   []int   `json:"bytes"`
		} `json:"top_logprobs"`
	} `json:"content"`
	Tokens        []string             `json:"tokens"`
	TokenLogprobs []float64            `json:"token_logprobs"`
	TopLogprobs   []map[string]float64 `json:"top_logprobs"`
}

func bytesOf(b []int, text string) []byte {
	if b == nil {
		return []byte(text)
	}
	out := make([]byte, len(b))
	for i, x := range b {
		out[i] = byte(x)
	}
	return out
}

func (l *wireLogprobs) convert() []backend.Logprob {
	if l == nil {
		return nil
	}
	var out []backend.Logprob
	for _, c := range l.Content {
		lp := backend.Logprob{Token: c.Token, Bytes: bytesOf(c.Bytes, c.Token), Logprob: c.Logprob}
		for _, t := range c.TopLogprobs {
			lp.Top = append(lp.Top, backend.TopLogprob{Token: t.Token, Bytes: bytesOf(t.Bytes, t.Token), Logprob: t.Logprob})
		}
		out = append(out, lp)
	}
	for i, tok := range l.Tokens {
		lp := backend.Logprob{Token: tok, Bytes: []byte(tok)}
		if i < len(l.TokenLogprobs) {
			lp.Logprob = l.TokenLogprobs[i]
		}
		if i < len(l.TopLogprobs) {
			for t, v := range l.TopLogprobs[i] {
				lp.Top = append(lp.Top, backend.TopLogprob{Token: t, Bytes: []byte(t), Logprob: v})
			}
			sort.Slice(lp.Top, func(a, b int) bool { return lp.Top[a].Logprob > lp.Top[b].Logprob })
		}
		out = append(out, lp)
	}
	return out
}

// callParts accumulates streamed tool-call deltas by index.
type callParts struct {
	order []int
	byIdx map[int]*backend.ToolCall
	args  map[int]*bytes.Buffer
}

func (p *callParts) add(calls []wireToolCall) {
	if p.byIdx == nil {
		p.byIdx, p.args = map[int]*backend.ToolCall{}, map[int]*bytes.Buffer{}
	}
	for n, c := range calls {
		idx := n
		if c.Index != nil {
			idx = *c.Index
		}
		tc := p.byIdx[idx]
		if tc == nil {
			tc = &backend.ToolCall{}
			p.byIdx[idx], p.args[idx] = tc, &bytes.Buffer{}
			p.order = append(p.order, idx)
		}
		if c.ID != "" {
			tc.ID = c.ID
		}
		if c.Function.Name != "" {
			tc.Name = c.Function.Name
		}
		p.args[idx].WriteString(c.Function.Arguments)
	}
}

// calls returns the complete calls; arguments that are not a JSON object
// become {} (the server's text is kept nowhere else, so a broken call is
// still a call by name).
func (p *callParts) calls() []backend.ToolCall {
	var out []backend.ToolCall
	for _, idx := range p.order {
		tc := *p.byIdx[idx]
		args := bytes.TrimSpace(p.args[idx].Bytes())
		var probe map[string]json.RawMessage
		if json.Unmarshal(args, &probe) != nil {
			args = []byte("{}")
		}
		tc.Arguments = append(json.RawMessage(nil), args...)
		if tc.Name != "" {
			out = append(out, tc)
		}
	}
	return out
}
