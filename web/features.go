package web

import (
	"bytes"
	"encoding/json"
	"strings"
)

// requestFeatures are the optional features a generation request may ask
// for beyond plain text, as the raw JSON of their parameters (nil when
// absent). Every API's decoder fills one and calls check: it is the one
// place that decides what is supported, so that a client asking for JSON
// output or a tool call gets a clear 400 instead of a normal-looking
// answer that ignored it (issue 13, item 8). When a feature becomes
// supported, check lets it through and the decoder passes it on in the
// backend request.
type requestFeatures struct {
	Tools          json.RawMessage // OpenAI and Ollama "tools"
	ToolChoice     json.RawMessage // OpenAI "tool_choice"
	ResponseFormat json.RawMessage // OpenAI "response_format"
	Logprobs       json.RawMessage // OpenAI "logprobs" (bool in chat, number in completions)
	TopLogprobs    json.RawMessage // OpenAI "top_logprobs"
	Format         json.RawMessage // Ollama "format" ("json" or a JSON schema)
	// Prefix is put before parameter names in errors ("" for top level).
	Prefix string
}

// check refuses the features NPU Chat does not support yet, naming the
// parameter and what to do instead.
func (f requestFeatures) check() error {
	switch {
	case asked(f.Tools) && !isEmptyArray(f.Tools):
		return f.unsupported("tools", "tool calls are not supported yet; send the request without \"tools\"")
	case asked(f.ToolChoice) && !isJSONString(f.ToolChoice, "none"):
		return f.unsupported("tool_choice", "tool calls are not supported yet; send the request without \"tool_choice\" (or with \"none\")")
	case asked(f.ResponseFormat) && !isTextFormat(f.ResponseFormat):
		return f.unsupported("response_format", "structured output (JSON mode, JSON schema) is not supported yet; send the request without \"response_format\" (or with {\"type\":\"text\"})")
	case asked(f.Logprobs):
		return f.unsupported("logprobs", "log probabilities are not supported yet; send the request without \"logprobs\"")
	case asked(f.TopLogprobs):
		return f.unsupported("top_logprobs", "log probabilities are not supported yet; send the request without \"top_logprobs\"")
	case asked(f.Format) && !isJSONString(f.Format, ""):
		return f.unsupported("format", "structured output (\"format\": \"json\" or a schema) is not supported yet; send the request without \"format\"")
	}
	return nil
}

func (f requestFeatures) unsupported(param, msg string) error {
	ae := badRequest(f.Prefix+param, "%s", msg)
	ae.code = "unsupported_parameter"
	return ae
}

// asked reports whether a parameter asks for something: present and not
// null, false, 0 or "".
func asked(raw json.RawMessage) bool {
	switch strings.TrimSpace(string(raw)) {
	case "", "null", "false", "0", `""`:
		return false
	}
	return true
}

func isEmptyArray(raw json.RawMessage) bool {
	var a []json.RawMessage
	return json.Unmarshal(raw, &a) == nil && len(a) == 0
}

func isJSONString(raw json.RawMessage, want string) bool {
	var s string
	return json.Unmarshal(raw, &s) == nil && s == want
}

// isTextFormat: response_format {"type":"text"}, the default.
func isTextFormat(raw json.RawMessage) bool {
	var rf struct {
		Type string `json:"type"`
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	return d.Decode(&rf) == nil && rf.Type == "text"
}
