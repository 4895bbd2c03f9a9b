package web

import (
	"encoding/json"
	"strings"
)

// requestFeatures are the optional features a generation request may ask
// for beyond plain text, as the raw JSON of their parameters (nil when
// absent). Every API's decoder fills one and calls apply (tools.go): it
// is the one place that reads them into the backend request, so that a
// client asking for JSON output or a tool call gets it, or a clear 400
// naming what cannot be done, never a normal-looking answer that ignored
// it (issue 13, item 8; issue 14).
type requestFeatures struct {
	Tools          json.RawMessage // OpenAI and Ollama "tools"
	ToolChoice     json.RawMessage // OpenAI "tool_choice"
	ResponseFormat json.RawMessage // OpenAI "response_format"
	Logprobs       json.RawMessage // OpenAI "logprobs" (bool in chat, number in completions)
	TopLogprobs    json.RawMessage // OpenAI "top_logprobs"
	Format         json.RawMessage // Ollama "format" ("json" or a JSON schema)
	// ParallelToolCalls is OpenAI's parallel_tool_calls (nil: true).
	ParallelToolCalls *bool
	// Prefix is put before parameter names in errors ("" for top level).
	Prefix string
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
