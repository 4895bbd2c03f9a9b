package backend

import (
	"context"
	"encoding/json"
)

// Tool is a function the model may call (OpenAI and Ollama "tools").
type Tool struct {
	Name        string
	Description string
	// Parameters is the JSON Schema of the arguments (nil: any object).
	Parameters json.RawMessage
	// Raw is the definition as the client sent it
	// ({"type": "function", "function": {...}}): chat templates render it
	// as it is, and a remote backend passes it on.
	Raw json.RawMessage
}

// Tool choices (OpenAI "tool_choice").
const (
	ToolAuto     = "auto"     // the model decides (the default when tools are given)
	ToolNone     = "none"     // no call: the answer is text
	ToolRequired = "required" // at least one call: decoding is constrained to a call
	ToolFunction = "function" // a call of ToolChoice.Name
)

// ToolChoice says whether and which tool the model must call.
type ToolChoice struct {
	Mode string // "" (auto), ToolAuto, ToolNone, ToolRequired or ToolFunction
	Name string // the function, for ToolFunction
}

// ToolCall is a call the model made, or made in an earlier turn.
type ToolCall struct {
	ID        string
	Name      string
	Arguments json.RawMessage // a JSON object
}

// Output formats (OpenAI response_format, Ollama format).
const (
	FormatJSON   = "json"        // any JSON object
	FormatSchema = "json_schema" // JSON that follows Format.Schema
)

// Format asks for structured output.
type Format struct {
	Type   string          // FormatJSON or FormatSchema
	Schema json.RawMessage // the JSON Schema, for FormatSchema
	Name   string          // the schema's name, when the client gave one
}

// Logprob is the log-probability of one generated token, with the most
// likely alternatives when they were asked for.
type Logprob struct {
	Token   string  // the token's text ("" when its bytes are not whole characters)
	Bytes   []byte  // the token's bytes
	Logprob float64 // natural log of the probability the model gave it
	Top     []TopLogprob
}

// TopLogprob is one of the most likely tokens at a step.
type TopLogprob struct {
	Token   string
	Bytes   []byte
	Logprob float64
}

// FinishToolCalls is the finish reason of an answer that ends in tool
// calls.
const FinishToolCalls = "tool_calls"

// Capabilities a backend may have, as Ollama's /api/show lists them.
const (
	CapCompletion = "completion"
	CapTools      = "tools"
	CapJSON       = "json"
	CapLogprobs   = "logprobs"
	// CapThinking: the chat template takes enable_thinking, so that
	// Request.Think switches the model's thinking on or off.
	CapThinking = "thinking"
	// CapEmbedding: the backend implements Embedder (/v1/embeddings,
	// /api/embed).
	CapEmbedding = "embedding"
)

// Embedder is a backend that computes embeddings: for each input its
// last hidden state, mean-pooled and L2-normalised (as llama.cpp and
// Ollama give for a decoder model). tokens is how many tokens the inputs
// took in all. An input longer than the context is ErrPromptTooLong.
type Embedder interface {
	Embed(ctx context.Context, inputs []string) (vectors [][]float32, tokens int, err error)
}

// UnsupportedError is a feature the backend cannot honour: the server
// answers 400 naming the parameter (errors.Is(err, ErrBadRequest) holds).
type UnsupportedError struct {
	Param   string // the OpenAI parameter: "tools", "response_format", "logprobs"
	What    string // the feature in words
	Backend string // who cannot do it, for the message
	// Reason, when set, says more: why no other engine took the request
	// instead, and what to change.
	Reason string
}

func (e *UnsupportedError) Error() string {
	msg := e.What + " is not supported by " + e.Backend
	if e.Reason != "" {
		msg += ", and " + e.Reason
	}
	return msg + "; send the request without \"" + e.Param + "\""
}

// Is makes an UnsupportedError a bad request.
func (e *UnsupportedError) Is(target error) bool { return target == ErrBadRequest }

// CheckSupported refuses the features of req that caps (a backend's
// capabilities) lack; who names the backend in the message ("the remote
// server", "FastFlowLM").
func CheckSupported(req *Request, caps []string, who string) error {
	has := func(c string) bool {
		for _, x := range caps {
			if x == c {
				return true
			}
		}
		return false
	}
	switch {
	case len(req.Tools) > 0 && req.ToolChoice.Mode != ToolNone && !has(CapTools):
		return &UnsupportedError{Param: "tools", What: "tool calling", Backend: who}
	case req.Format != nil && !has(CapJSON):
		return &UnsupportedError{Param: "response_format", What: "structured output (response_format, or Ollama's format)", Backend: who}
	case (req.Logprobs || req.TopLogprobs > 0) && !has(CapLogprobs):
		return &UnsupportedError{Param: "logprobs", What: "log-probabilities (logprobs)", Backend: who}
	case req.Embed && !has(CapEmbedding):
		return &UnsupportedError{Param: "model", What: "embeddings", Backend: who}
	}
	return nil
}
