package web

import (
	"net/http"

	"github.com/npuchat/npuchat/service/backend"
)

// The OpenAI answer formats: /v1/chat/completions and /v1/completions,
// whole (one JSON object) or streamed (server-sent events ending with
// "data: [DONE]"). One set of typed structs serves both, so that a field
// cannot differ between a streamed and a whole answer.

// openAIChatCompletion is a chat answer ("chat.completion") or one chunk
// of a streamed one ("chat.completion.chunk").
type openAIChatCompletion struct {
	ID                string             `json:"id"`
	Object            string             `json:"object"`
	Created           int64              `json:"created"`
	Model             string             `json:"model"`
	SystemFingerprint string             `json:"system_fingerprint"`
	Choices           []openAIChatChoice `json:"choices"`
	Usage             *openAIUsage       `json:"usage,omitempty"`
	// OmittedMessages is NPU Chat's own: how many of the chat's oldest
	// messages (after the system prompt) the model did not see because
	// the chat is longer than the context (in the whole answer and the
	// stream's finish chunk; absent when none).
	OmittedMessages int `json:"omitted_messages,omitempty"`
	// Timings carries the speculative decoding counts as llama.cpp's
	// server names them (in the whole answer and the stream's finish
	// chunk; absent when nothing was guessed).
	Timings *openAITimings `json:"timings,omitempty"`
}

// openAITimings is the part of llama.cpp's "timings" object NPU Chat
// fills: draft_n tokens were guessed ahead and checked, draft_n_accepted
// of them were what the model wrote.
type openAITimings struct {
	DraftN         int `json:"draft_n"`
	DraftNAccepted int `json:"draft_n_accepted"`
}

// timingsOf is an answer's timings, nil when nothing was guessed.
func timingsOf(res backend.Result) *openAITimings {
	if res.DraftTokens <= 0 {
		return nil
	}
	return &openAITimings{DraftN: res.DraftTokens, DraftNAccepted: res.DraftAccepted}
}

// openAIChatChoice is the one choice of a chat answer: Message in a whole
// answer, Delta in a chunk.
type openAIChatChoice struct {
	Index        int                `json:"index"`
	Message      *openAIChatMessage `json:"message,omitempty"`
	Delta        *openAIChatMessage `json:"delta,omitempty"`
	Logprobs     *openAILogprobs    `json:"logprobs"`
	FinishReason *string            `json:"finish_reason"`
}

// openAIChatMessage is the assistant's message, or the part of it a chunk
// adds. Content is a pointer so that a delta without text ({} in the last
// chunk) differs from an empty one.
type openAIChatMessage struct {
	Role    string  `json:"role,omitempty"`
	Content *string `json:"content,omitempty"`
	// ReasoningContent is a reasoning model's thinking, apart from
	// Content, as DeepSeek's API and vLLM return it (in the message and
	// in stream deltas).
	ReasoningContent *string          `json:"reasoning_content,omitempty"`
	ToolCalls        []openAIToolCall `json:"tool_calls,omitempty"`
}

// openAILogprobs is a chat choice's log probabilities (null unless the
// request asked for them; see tools.go).
type openAILogprobs struct {
	Content []openAITokenLogprob `json:"content"`
}

// openAITextCompletion is a completion answer or chunk ("text_completion").
type openAITextCompletion struct {
	ID                string             `json:"id"`
	Object            string             `json:"object"`
	Created           int64              `json:"created"`
	Model             string             `json:"model"`
	SystemFingerprint string             `json:"system_fingerprint"`
	Choices           []openAITextChoice `json:"choices"`
	Usage             *openAIUsage       `json:"usage,omitempty"`
	// Timings: as openAIChatCompletion's.
	Timings *openAITimings `json:"timings,omitempty"`
}

// openAITextChoice is the one choice of a completion.
type openAITextChoice struct {
	Index        int                 `json:"index"`
	Text         string              `json:"text"`
	Logprobs     *openAITextLogprobs `json:"logprobs"`
	FinishReason *string             `json:"finish_reason"`
}

// openAIUsage is OpenAI's token accounting; prompt_tokens_details
// cached_tokens counts the prompt tokens whose keys and values came from
// the KV cache, as OpenAI reports its prompt caching.
type openAIUsage struct {
	PromptTokens        int                `json:"prompt_tokens"`
	CompletionTokens    int                `json:"completion_tokens"`
	TotalTokens         int                `json:"total_tokens"`
	PromptTokensDetails openAIPromptDetail `json:"prompt_tokens_details"`
	// CompletionTokensDetails says, when tokens were guessed ahead
	// (speculative decoding), how many guesses the model kept and how
	// many it did not, under the names OpenAI uses for its Predicted
	// Outputs; absent otherwise.
	CompletionTokensDetails *openAICompletionDetail `json:"completion_tokens_details,omitempty"`
	// DraftN and DraftNAccepted are the same counts under llama.cpp's
	// timings names (the tokens guessed and checked, those kept); absent
	// when nothing was guessed.
	DraftN         *int `json:"draft_n,omitempty"`
	DraftNAccepted *int `json:"draft_n_accepted,omitempty"`
}

// openAICompletionDetail is usage.completion_tokens_details.
type openAICompletionDetail struct {
	AcceptedPredictionTokens int `json:"accepted_prediction_tokens"`
	RejectedPredictionTokens int `json:"rejected_prediction_tokens"`
}

// openAIPromptDetail is usage.prompt_tokens_details.
type openAIPromptDetail struct {
	CachedTokens int `json:"cached_tokens"`
}

// openAIStreamError is the event that ends a stream cut by an error, as
// OpenAI's streaming API sends it.
type openAIStreamError struct {
	Error openAIErrorBody `json:"error"`
}

func usageOf(res backend.Result) *openAIUsage {
	u := &openAIUsage{PromptTokens: res.PromptTokens, CompletionTokens: res.CompletionTokens,
		TotalTokens: res.PromptTokens + res.CompletionTokens, PromptTokensDetails: openAIPromptDetail{res.CachedTokens}}
	if res.DraftTokens > 0 {
		u.CompletionTokensDetails = &openAICompletionDetail{AcceptedPredictionTokens: res.DraftAccepted,
			RejectedPredictionTokens: res.DraftTokens - res.DraftAccepted}
		u.DraftN, u.DraftNAccepted = &res.DraftTokens, &res.DraftAccepted
	}
	return u
}

func strPtr(s string) *string { return &s }

// openAIStreamFail ends an OpenAI stream: an error response when nothing
// was sent yet, else an error event (no [DONE], so that clients see the
// answer was cut).
func (s *Server) openAIStreamFail(r *http.Request, out *sse, ae *apiError) {
	if !out.started {
		s.writeAPIError(out.w, r, ae)
		return
	}
	out.data(openAIStreamError{Error: openAIErrorBody{Message: ae.msg, Type: errorType(ae.status), Code: ae.code, Param: paramOf(ae.param)}})
}

// openAIChatWhole writes a whole chat answer.
type openAIChatWhole struct {
	s        *Server
	w        http.ResponseWriter
	r        *http.Request
	logprobs bool // the request asked for them
}

func (o *openAIChatWhole) piece(*answer, backend.Token) error { return nil }

func (o *openAIChatWhole) finish(a *answer) error {
	text := a.Text.String()
	msg := &openAIChatMessage{Role: "assistant", Content: &text}
	if th := a.Thinking.String(); th != "" {
		msg.ReasoningContent = &th
	}
	if len(a.ToolCalls) > 0 {
		msg.ToolCalls = toOpenAIToolCalls(a.ToolCalls, 0, false)
		if text == "" {
			msg.Content = nil
		}
	}
	writeJSON(o.w, http.StatusOK, openAIChatCompletion{
		ID: a.ID, Object: "chat.completion", Created: a.Created(), Model: a.Model,
		SystemFingerprint: a.fingerprint(),
		Choices: []openAIChatChoice{{
			Message:      msg,
			Logprobs:     chatLogprobs(o.logprobs, a.Logprobs),
			FinishReason: strPtr(finishReason(a)),
		}},
		Usage:           usageOf(a.Result),
		OmittedMessages: a.Result.OmittedMessages,
		Timings:         timingsOf(a.Result),
	})
	return nil
}

func (o *openAIChatWhole) fail(_ *answer, ae *apiError) { o.s.writeAPIError(o.w, o.r, ae) }

// openAIChatStream streams a chat answer: a first chunk with the role,
// one chunk per piece, a last chunk with the finish reason, an optional
// usage chunk, then [DONE].
type openAIChatStream struct {
	s     *Server
	r     *http.Request
	sse   *sse
	usage bool // stream_options.include_usage
	began bool // the role chunk was sent
	// logprobs: the request asked for them; calls counts the tool calls
	// sent (their delta index).
	logprobs bool
	calls    int
}

func (o *openAIChatStream) chunk(a *answer, delta *openAIChatMessage, finish *string) openAIChatCompletion {
	return openAIChatCompletion{
		ID: a.ID, Object: "chat.completion.chunk", Created: a.Created(), Model: a.Model,
		SystemFingerprint: a.fingerprint(),
		Choices:           []openAIChatChoice{{Delta: delta, FinishReason: finish}},
	}
}

func (o *openAIChatStream) begin(a *answer) error {
	if o.began {
		return nil
	}
	o.began = true
	return o.sse.data(o.chunk(a, &openAIChatMessage{Role: "assistant", Content: strPtr("")}, nil))
}

func (o *openAIChatStream) piece(a *answer, t backend.Token) error {
	if err := o.begin(a); err != nil {
		return err
	}
	if t.Thinking != "" {
		if err := o.sse.data(o.chunk(a, &openAIChatMessage{ReasoningContent: strPtr(t.Thinking)}, nil)); err != nil {
			return err
		}
	}
	if t.Text != "" || len(t.Logprobs) > 0 || (len(t.ToolCalls) == 0 && t.Thinking == "") {
		c := o.chunk(a, &openAIChatMessage{Content: strPtr(t.Text)}, nil)
		c.Choices[0].Logprobs = chatLogprobs(o.logprobs, t.Logprobs)
		if err := o.sse.data(c); err != nil {
			return err
		}
	}
	if len(t.ToolCalls) > 0 {
		delta := &openAIChatMessage{ToolCalls: toOpenAIToolCalls(t.ToolCalls, o.calls, true)}
		o.calls += len(t.ToolCalls)
		return o.sse.data(o.chunk(a, delta, nil))
	}
	return nil
}

func (o *openAIChatStream) finish(a *answer) error {
	if err := o.begin(a); err != nil {
		return err
	}
	last := o.chunk(a, &openAIChatMessage{}, strPtr(finishReason(a)))
	last.OmittedMessages, last.Timings = a.Result.OmittedMessages, timingsOf(a.Result)
	if err := o.sse.data(last); err != nil {
		return err
	}
	if o.usage {
		c := o.chunk(a, nil, nil)
		c.Choices, c.Usage = []openAIChatChoice{}, usageOf(a.Result)
		if err := o.sse.data(c); err != nil {
			return err
		}
	}
	return o.sse.raw("data: [DONE]\n\n")
}

func (o *openAIChatStream) fail(_ *answer, ae *apiError) { o.s.openAIStreamFail(o.r, o.sse, ae) }

// openAICompletionWhole writes a whole completion; echo is the prompt
// when the request asked for it back.
type openAICompletionWhole struct {
	s        *Server
	w        http.ResponseWriter
	r        *http.Request
	echo     string
	logprobs bool
}

func (o *openAICompletionWhole) piece(*answer, backend.Token) error { return nil }

func (o *openAICompletionWhole) finish(a *answer) error {
	writeJSON(o.w, http.StatusOK, openAITextCompletion{
		ID: a.ID, Object: "text_completion", Created: a.Created(), Model: a.Model,
		SystemFingerprint: a.fingerprint(),
		Choices: []openAITextChoice{{Text: o.echo + a.Text.String(), FinishReason: strPtr(a.Result.FinishReason),
			Logprobs: textLogprobs(o.logprobs, a.Logprobs, len(o.echo))}},
		Usage:   usageOf(a.Result),
		Timings: timingsOf(a.Result),
	})
	return nil
}

func (o *openAICompletionWhole) fail(_ *answer, ae *apiError) { o.s.writeAPIError(o.w, o.r, ae) }

// openAICompletionStream streams a completion: one chunk per piece (the
// first with the echoed prompt before it), a last chunk with the finish
// reason, an optional usage chunk, then [DONE].
type openAICompletionStream struct {
	s     *Server
	r     *http.Request
	sse   *sse
	usage bool
	echo  string // sent before the first piece, then cleared
	// logprobs: the request asked for them; offset is where the next
	// piece starts in the answer's text.
	logprobs bool
	offset   int
}

func (o *openAICompletionStream) chunk(a *answer, text string, finish *string) openAITextCompletion {
	return openAITextCompletion{
		ID: a.ID, Object: "text_completion", Created: a.Created(), Model: a.Model,
		SystemFingerprint: a.fingerprint(),
		Choices:           []openAITextChoice{{Text: text, FinishReason: finish}},
	}
}

func (o *openAICompletionStream) piece(a *answer, t backend.Token) error {
	text := o.echo + t.Text
	c := o.chunk(a, text, nil)
	c.Choices[0].Logprobs = textLogprobs(o.logprobs, t.Logprobs, o.offset+len(o.echo))
	o.offset += len(text)
	o.echo = ""
	return o.sse.data(c)
}

func (o *openAICompletionStream) finish(a *answer) error {
	last := o.chunk(a, o.echo, strPtr(a.Result.FinishReason))
	last.Timings = timingsOf(a.Result)
	if err := o.sse.data(last); err != nil {
		return err
	}
	if o.usage {
		c := o.chunk(a, "", nil)
		c.Choices, c.Usage = []openAITextChoice{}, usageOf(a.Result)
		if err := o.sse.data(c); err != nil {
			return err
		}
	}
	return o.sse.raw("data: [DONE]\n\n")
}

func (o *openAICompletionStream) fail(_ *answer, ae *apiError) { o.s.openAIStreamFail(o.r, o.sse, ae) }
