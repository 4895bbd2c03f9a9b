package web

import (
	"net/http"
	"time"

	"github.com/npuchat/npuchat/service/backend"
)

// The Ollama answer formats: /api/chat and /api/generate, whole (one
// JSON object with done:true) or streamed (NDJSON lines with done:false,
// then one with done:true and the statistics; a cut stream ends with an
// {"error": …} line instead).

// ollamaChunk is a line of an Ollama stream, or a whole answer. Exactly
// one of Message (/api/chat) and Response (/api/generate) is set.
type ollamaChunk struct {
	Model     string         `json:"model"`
	CreatedAt string         `json:"created_at"`
	Message   *ollamaMessage `json:"message,omitempty"`
	Response  *string        `json:"response,omitempty"`
	// Thinking is /api/generate's reasoning text (Ollama's "thinking";
	// /api/chat has it in the message).
	Thinking   string `json:"thinking,omitempty"`
	Done       bool   `json:"done"`
	DoneReason string `json:"done_reason,omitempty"`
	// Logprobs are the tokens' log-probabilities (when asked for).
	Logprobs []ollamaLogprob `json:"logprobs,omitempty"`
	*ollamaStats
}

// ollamaMessage is the assistant's message in /api/chat.
type ollamaMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
	// Thinking is a reasoning model's thoughts, apart from Content.
	Thinking  string           `json:"thinking,omitempty"`
	ToolCalls []ollamaToolCall `json:"tool_calls,omitempty"`
}

// ollamaStats are the final object's statistics, in nanoseconds.
type ollamaStats struct {
	TotalDuration      int64 `json:"total_duration"`
	LoadDuration       int64 `json:"load_duration"`
	PromptEvalCount    int   `json:"prompt_eval_count"`
	PromptEvalDuration int64 `json:"prompt_eval_duration"`
	EvalCount          int   `json:"eval_count"`
	EvalDuration       int64 `json:"eval_duration"`
	// OmittedMessages is NPU Chat's own: how many of the chat's oldest
	// messages (after the system prompt) the model did not see because
	// the chat is longer than the context (absent when none).
	OmittedMessages int `json:"omitted_messages,omitempty"`
	// DraftCount and DraftAcceptedCount are NPU Chat's own: how many
	// tokens were guessed ahead and checked (speculative decoding) and
	// how many of those the model kept (absent when none was guessed).
	DraftCount         int  `json:"draft_count,omitempty"`
	DraftAcceptedCount *int `json:"draft_accepted_count,omitempty"`
}

// ollamaFormat builds the chunks of /api/chat (chat) or /api/generate.
type ollamaFormat struct{ chat bool }

func (f ollamaFormat) chunk(a *answer, text string) ollamaChunk {
	c := ollamaChunk{Model: a.Model, CreatedAt: ollamaTime(time.Now())}
	if f.chat {
		c.Message = &ollamaMessage{Role: "assistant", Content: text}
	} else {
		c.Response = &text
	}
	return c
}

// think puts thinking text into a chunk: the message's in /api/chat,
// the top level's in /api/generate.
func (f ollamaFormat) think(c *ollamaChunk, thinking string) {
	if c.Message != nil {
		c.Message.Thinking = thinking
	} else {
		c.Thinking = thinking
	}
}

// done is the final object, holding text (all of it in a whole answer,
// "" at the end of a stream).
func (f ollamaFormat) done(a *answer, text string) ollamaChunk {
	c := f.chunk(a, text)
	res := a.Result
	c.Done, c.DoneReason = true, ollamaDoneReason(a)
	c.ollamaStats = &ollamaStats{
		TotalDuration:      a.Total.Nanoseconds(),
		LoadDuration:       max(a.Total-res.PrefillDuration-res.DecodeDuration, 0).Nanoseconds(),
		PromptEvalCount:    res.PromptTokens,
		PromptEvalDuration: res.PrefillDuration.Nanoseconds(),
		EvalCount:          res.CompletionTokens,
		EvalDuration:       res.DecodeDuration.Nanoseconds(),
		OmittedMessages:    res.OmittedMessages,
		DraftCount:         res.DraftTokens,
	}
	if res.DraftTokens > 0 {
		c.ollamaStats.DraftAcceptedCount = &res.DraftAccepted
	}
	return c
}

// ollamaWhole writes a whole Ollama answer (stream:false).
type ollamaWhole struct {
	ollamaFormat
	s *Server
	w http.ResponseWriter
	r *http.Request
}

func (o *ollamaWhole) piece(*answer, backend.Token) error { return nil }

func (o *ollamaWhole) finish(a *answer) error {
	c := o.done(a, a.Text.String())
	o.think(&c, a.Thinking.String())
	if c.Message != nil && len(a.ToolCalls) > 0 {
		c.Message.ToolCalls = toOllamaToolCalls(a.ToolCalls, 0)
	}
	c.Logprobs = toOllamaLogprobs(a.Logprobs)
	writeJSON(o.w, http.StatusOK, c)
	return nil
}

func (o *ollamaWhole) fail(_ *answer, ae *apiError) { o.s.writeAPIError(o.w, o.r, ae) }

// ollamaStream streams an Ollama answer as NDJSON.
type ollamaStream struct {
	ollamaFormat
	s     *Server
	r     *http.Request
	nd    *ndjson
	calls int // tool calls sent
}

func (o *ollamaStream) piece(a *answer, t backend.Token) error {
	c := o.chunk(a, t.Text)
	o.think(&c, t.Thinking)
	if c.Message != nil && len(t.ToolCalls) > 0 {
		c.Message.ToolCalls = toOllamaToolCalls(t.ToolCalls, o.calls)
		o.calls += len(t.ToolCalls)
	}
	c.Logprobs = toOllamaLogprobs(t.Logprobs)
	return o.nd.send(c)
}

func (o *ollamaStream) finish(a *answer) error { return o.nd.send(o.done(a, "")) }

func (o *ollamaStream) fail(_ *answer, ae *apiError) {
	if !o.nd.started {
		o.s.writeAPIError(o.nd.w, o.r, ae)
		return
	}
	o.nd.send(ollamaError{Error: ae.msg})
}
