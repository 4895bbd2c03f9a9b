package web

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strings"

	"github.com/npuchat/npuchat/service/backend"
)

// Sampling defaults when a request leaves a parameter out. They are the
// usual ones for small chat models (llama.cpp server, Ollama) and are
// documented in the README.
const (
	defaultTemperature = 0.7
	defaultTopP        = 0.95
	defaultTopK        = 40
	defaultMinP        = 0.05
	maxStops           = 16
	maxStopLen         = 512
	maxTokensLimit     = 1 << 20
)

// samplingParams are the sampling fields common to every API, as
// pointers so that "absent" differs from zero.
type samplingParams struct {
	Temperature       *float64
	TopP              *float64
	TopK              *int
	MinP              *float64
	RepetitionPenalty *float64
	FrequencyPenalty  *float64
	PresencePenalty   *float64
	Seed              *int64
}

// toSampling validates the parameters and fills defaults. Field names in
// errors are those of the API the client used (names maps them).
func (p samplingParams) toSampling(names map[string]string) (backend.Sampling, error) {
	name := func(k string) string {
		if n, ok := names[k]; ok {
			return n
		}
		return k
	}
	s := backend.Sampling{Temperature: defaultTemperature, TopP: defaultTopP, TopK: defaultTopK, MinP: defaultMinP, RepeatPenalty: 1}
	check := func(key string, v *float64, lo, hi float64, dst *float64) error {
		if v == nil {
			return nil
		}
		if math.IsNaN(*v) || *v < lo || *v > hi {
			return badRequest(name(key), "%s must be between %g and %g, got %g", name(key), lo, hi, *v)
		}
		*dst = *v
		return nil
	}
	if err := check("temperature", p.Temperature, 0, 2, &s.Temperature); err != nil {
		return s, err
	}
	if err := check("top_p", p.TopP, 0, 1, &s.TopP); err != nil {
		return s, err
	}
	if err := check("min_p", p.MinP, 0, 1, &s.MinP); err != nil {
		return s, err
	}
	if err := check("repetition_penalty", p.RepetitionPenalty, 0, 10, &s.RepeatPenalty); err != nil {
		return s, err
	}
	if err := check("frequency_penalty", p.FrequencyPenalty, -2, 2, &s.FrequencyPenalty); err != nil {
		return s, err
	}
	if err := check("presence_penalty", p.PresencePenalty, -2, 2, &s.PresencePenalty); err != nil {
		return s, err
	}
	if p.TopK != nil {
		if *p.TopK < 0 || *p.TopK > 1<<20 {
			return s, badRequest(name("top_k"), "%s must be 0 (off) or a positive number of tokens, got %d", name("top_k"), *p.TopK)
		}
		s.TopK = *p.TopK
	}
	if p.Seed != nil {
		s.Seed, s.HasSeed = *p.Seed, true
	}
	return s, nil
}

// checkMaxTokens validates a token limit (nil: none).
func checkMaxTokens(param string, v *int) (int, error) {
	if v == nil {
		return 0, nil
	}
	if *v < 1 || *v > maxTokensLimit {
		return 0, badRequest(param, "%s must be between 1 and %d, got %d", param, maxTokensLimit, *v)
	}
	return *v, nil
}

// stopList is OpenAI's "stop": a string, an array of strings, or null.
type stopList []string

func (s *stopList) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if bytes.Equal(b, []byte("null")) {
		*s = nil
		return nil
	}
	if len(b) > 0 && b[0] == '"' {
		var one string
		if err := json.Unmarshal(b, &one); err != nil {
			return err
		}
		*s = stopList{one}
		return nil
	}
	var many []string
	if err := json.Unmarshal(b, &many); err != nil {
		return badRequest("stop", "stop must be a string or an array of strings")
	}
	*s = many
	return nil
}

func checkStops(param string, stops []string) ([]string, error) {
	if len(stops) > maxStops {
		return nil, badRequest(param, "%s has %d strings; at most %d are allowed", param, len(stops), maxStops)
	}
	out := make([]string, 0, len(stops))
	for _, st := range stops {
		if len(st) > maxStopLen {
			return nil, badRequest(param, "a stop string is %d bytes long; at most %d are allowed", len(st), maxStopLen)
		}
		if st != "" {
			out = append(out, st)
		}
	}
	return out, nil
}

// content is a message's content: a string, null, or an array of parts
// of which only text parts are supported.
type content string

func (c *content) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	switch {
	case bytes.Equal(b, []byte("null")):
		*c = ""
		return nil
	case len(b) > 0 && b[0] == '"':
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*c = content(s)
		return nil
	case len(b) > 0 && b[0] == '[':
		var parts []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}
		if err := json.Unmarshal(b, &parts); err != nil {
			return badRequest("messages", "message content must be a string or an array of {type, text} parts")
		}
		var sb strings.Builder
		for _, p := range parts {
			switch p.Type {
			case "text", "input_text":
				sb.WriteString(p.Text)
			default:
				return badRequest("messages", "content part type %q is not supported: this model reads text only", p.Type)
			}
		}
		*c = content(sb.String())
		return nil
	}
	return badRequest("messages", "message content must be a string or an array of text parts")
}

// chatMessage is a message in OpenAI or Ollama form.
type chatMessage struct {
	Role    string   `json:"role"`
	Content content  `json:"content"`
	Name    string   `json:"name,omitempty"`
	Images  []string `json:"images,omitempty"` // Ollama
	// ToolCalls are an assistant turn's calls; ToolCallID (OpenAI) or
	// ToolName (Ollama) says which call a tool turn answers.
	ToolCalls  []chatToolCall `json:"tool_calls,omitempty"`
	ToolCallID string         `json:"tool_call_id,omitempty"`
	ToolName   string         `json:"tool_name,omitempty"`
}

// toMessages validates roles and converts messages.
func toMessages(in []chatMessage) ([]backend.Message, error) {
	if len(in) == 0 {
		return nil, badRequest("messages", "messages must hold at least one message")
	}
	out := make([]backend.Message, 0, len(in))
	for i, m := range in {
		role := strings.ToLower(strings.TrimSpace(m.Role))
		switch role {
		case "system", "user", "assistant", "tool":
		case "developer":
			role = "system"
		default:
			return nil, badRequest(fmt.Sprintf("messages[%d].role", i), "messages[%d].role %q is not one of system, user, assistant, tool", i, m.Role)
		}
		if len(m.Images) > 0 {
			return nil, badRequest("messages", "images are not supported: this model reads text only")
		}
		calls, err := toToolCalls(m.ToolCalls, i)
		if err != nil {
			return nil, err
		}
		name := m.Name
		if name == "" {
			name = m.ToolName
		}
		out = append(out, backend.Message{Role: role, Content: string(m.Content), Name: name, ToolCalls: calls, ToolCallID: m.ToolCallID})
	}
	return out, nil
}

// parseSpeculative reads a request's speculative choice (the OpenAI,
// Responses and Anthropic bodies' top-level "speculative", which the
// SDKs' extra_body merges in; Ollama's options.speculative): "auto"
// guesses tokens ahead from the text so far and checks them in one
// pass (the same answer), "off" decodes plainly; true and false are
// "auto" and "off"; absent or null leaves the server's setting ("").
// param names the field in the error.
func parseSpeculative(param string, raw json.RawMessage) (string, error) {
	s := strings.TrimSpace(string(raw))
	switch s {
	case "", "null":
		return "", nil
	case `"auto"`, "true":
		return "auto", nil
	case `"off"`, "false":
		return "off", nil
	}
	if len(s) > 40 {
		s = s[:40] + "…"
	}
	return "", badRequest(param, "%s must be \"auto\" (guess tokens ahead and check them in one pass: the same answer) or \"off\" (plain decoding), or true or false; got %s", param, s)
}
