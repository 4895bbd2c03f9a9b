package web

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/npuchat/npuchat/service"
	"github.com/npuchat/npuchat/service/backend"
)

// openAICommon holds the fields /v1/chat/completions and /v1/completions
// share. Fields not listed are ignored, as OpenAI-compatible servers do.
type openAICommon struct {
	Model         string `json:"model"`
	Stream        bool   `json:"stream"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	MaxTokens         *int     `json:"max_tokens"`
	Temperature       *float64 `json:"temperature"`
	TopP              *float64 `json:"top_p"`
	TopK              *int     `json:"top_k"`
	MinP              *float64 `json:"min_p"`
	Seed              *int64   `json:"seed"`
	RepetitionPenalty *float64 `json:"repetition_penalty"`
	FrequencyPenalty  *float64 `json:"frequency_penalty"`
	PresencePenalty   *float64 `json:"presence_penalty"`
	Stop              stopList `json:"stop"`
	N                 *int     `json:"n"`
}

// includeUsage reports whether a stream ends with a usage chunk.
func (c *openAICommon) includeUsage() bool {
	return c.StreamOptions != nil && c.StreamOptions.IncludeUsage
}

// toRequest validates the shared fields into req (everything but the
// prompt or messages and the token limit).
func (c *openAICommon) toRequest(req *backend.Request) error {
	req.Model = trimModel(c.Model)
	if req.Model == "" {
		return badRequest("model", "model is required (for example \"minicpm5:2b\")")
	}
	if c.N != nil && *c.N != 1 {
		return badRequest("n", "n must be 1: NPU Chat generates one answer per request")
	}
	var err error
	if req.Stop, err = checkStops("stop", c.Stop); err != nil {
		return err
	}
	sp := samplingParams{c.Temperature, c.TopP, c.TopK, c.MinP, c.RepetitionPenalty, c.FrequencyPenalty, c.PresencePenalty, c.Seed}
	req.Sampling, err = sp.toSampling(nil)
	return err
}

// openAIChatRequest is the body of POST /v1/chat/completions.
type openAIChatRequest struct {
	openAICommon
	Messages            []chatMessage `json:"messages"`
	MaxCompletionTokens *int          `json:"max_completion_tokens"`
}

// openAICompletionRequest is the body of POST /v1/completions.
type openAICompletionRequest struct {
	openAICommon
	Prompt json.RawMessage `json:"prompt"`
	Echo   bool            `json:"echo"`
}

// parseOpenAIChat decodes and validates a chat request body.
func parseOpenAIChat(body []byte) (*backend.Request, *openAIChatRequest, error) {
	var in openAIChatRequest
	if err := unmarshalBody(body, &in); err != nil {
		return nil, nil, err
	}
	req := &backend.Request{}
	if err := in.toRequest(req); err != nil {
		return nil, nil, err
	}
	var err error
	if req.Messages, err = toMessages(in.Messages); err != nil {
		return nil, nil, err
	}
	limit, param := in.MaxCompletionTokens, "max_completion_tokens"
	if limit == nil {
		limit, param = in.MaxTokens, "max_tokens"
	}
	if req.MaxTokens, err = checkMaxTokens(param, limit); err != nil {
		return nil, nil, err
	}
	return req, &in, nil
}

// parseOpenAICompletion decodes and validates a completion request body.
func parseOpenAICompletion(body []byte) (*backend.Request, *openAICompletionRequest, error) {
	var in openAICompletionRequest
	if err := unmarshalBody(body, &in); err != nil {
		return nil, nil, err
	}
	req := &backend.Request{}
	if err := in.toRequest(req); err != nil {
		return nil, nil, err
	}
	var err error
	if req.Prompt, err = parsePrompt(in.Prompt); err != nil {
		return nil, nil, err
	}
	if req.MaxTokens, err = checkMaxTokens("max_tokens", in.MaxTokens); err != nil {
		return nil, nil, err
	}
	if in.MaxTokens == nil {
		req.MaxTokens = 16 // OpenAI's default for completions
	}
	return req, &in, nil
}

// parsePrompt accepts a string or an array holding one string.
func parsePrompt(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", badRequest("prompt", "prompt is required")
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, nil
	}
	var many []string
	if err := json.Unmarshal(raw, &many); err == nil {
		if len(many) != 1 {
			return "", badRequest("prompt", "prompt must be one string (got %d); send one request per prompt", len(many))
		}
		return many[0], nil
	}
	return "", badRequest("prompt", "prompt must be a string (token-id prompts are not supported)")
}

// unmarshalBody decodes JSON with errors a person can act on.
func unmarshalBody(body []byte, v any) error {
	if len(strings.TrimSpace(string(body))) == 0 {
		return badRequest("", "request body is empty; send JSON")
	}
	if err := json.Unmarshal(body, v); err != nil {
		var ae *apiError
		if errors.As(err, &ae) {
			return ae
		}
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return badRequest(te.Field, "field %q: expected %s, got JSON %s", te.Field, te.Type, te.Value)
		}
		return badRequest("", "request body is not valid JSON: %v", err)
	}
	return nil
}

// readBody reads the whole (size-limited) body.
func readBody(r *http.Request) ([]byte, error) {
	if r.Body == nil {
		return nil, nil
	}
	return io.ReadAll(r.Body)
}

func newID(prefix string) string {
	var b [12]byte
	rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

type openAIUsage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

func usageOf(res backend.Result) *openAIUsage {
	return &openAIUsage{res.PromptTokens, res.CompletionTokens, res.PromptTokens + res.CompletionTokens}
}

// sse writes server-sent events, flushing each one.
type sse struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	started bool
}

func newSSE(w http.ResponseWriter) *sse { return &sse{w: w, rc: http.NewResponseController(w)} }

func (s *sse) start() {
	if s.started {
		return
	}
	s.started = true
	h := s.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("Connection", "keep-alive")
	h.Set("X-Accel-Buffering", "no")
	s.w.WriteHeader(http.StatusOK)
}

// data sends one "data:" event holding v as JSON.
func (s *sse) data(v any) error {
	s.start()
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintf(s.w, "data: %s\n\n", b); err != nil {
		return err
	}
	return s.rc.Flush()
}

// raw sends a preformatted event.
func (s *sse) raw(text string) error {
	s.start()
	if _, err := io.WriteString(s.w, text); err != nil {
		return err
	}
	return s.rc.Flush()
}

// streamError ends a stream that has started with an error event, as
// OpenAI's streaming API does.
func (s *sse) streamError(ae *apiError) {
	s.data(map[string]any{"error": map[string]any{"message": ae.msg, "type": "server_error", "code": ae.code}})
}

func (s *Server) openAIChat(w http.ResponseWriter, r *http.Request) {
	body, err := readBody(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	req, in, err := parseOpenAIChat(body)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	id, created := newID("chatcmpl-"), time.Now().Unix()
	if !in.Stream {
		var text strings.Builder
		res, err := s.mgr.Generate(r.Context(), req, service.GenerateOptions{}, func(t backend.Token) error {
			text.WriteString(t.Text)
			return nil
		})
		if err != nil {
			s.fail(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{
			"id": id, "object": "chat.completion", "created": created, "model": in.Model,
			"system_fingerprint": "npuchat-" + res.Backend,
			"choices": []any{map[string]any{
				"index": 0, "finish_reason": res.FinishReason, "logprobs": nil,
				"message": map[string]any{"role": "assistant", "content": text.String()},
			}},
			"usage": usageOf(res),
		})
		return
	}
	out := newSSE(w)
	chunk := func(delta map[string]any, finish any) map[string]any {
		return map[string]any{
			"id": id, "object": "chat.completion.chunk", "created": created, "model": in.Model,
			"system_fingerprint": "npuchat",
			"choices":            []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": nil}},
		}
	}
	first := true
	res, err := s.mgr.Generate(r.Context(), req, service.GenerateOptions{}, func(t backend.Token) error {
		if first {
			first = false
			if err := out.data(chunk(map[string]any{"role": "assistant", "content": ""}, nil)); err != nil {
				return err
			}
		}
		return out.data(chunk(map[string]any{"content": t.Text}, nil))
	})
	if err != nil {
		if !out.started {
			s.fail(w, r, err)
			return
		}
		if ae := s.classify(err); ae.status != 499 {
			out.streamError(ae)
		}
		return
	}
	if first {
		out.data(chunk(map[string]any{"role": "assistant", "content": ""}, nil))
	}
	out.data(chunk(map[string]any{}, res.FinishReason))
	if in.includeUsage() {
		out.data(map[string]any{
			"id": id, "object": "chat.completion.chunk", "created": created, "model": in.Model,
			"choices": []any{}, "usage": usageOf(res),
		})
	}
	out.raw("data: [DONE]\n\n")
}

func (s *Server) openAICompletions(w http.ResponseWriter, r *http.Request) {
	body, err := readBody(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	req, in, err := parseOpenAICompletion(body)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	id, created := newID("cmpl-"), time.Now().Unix()
	prefix := ""
	if in.Echo {
		prefix = req.Prompt
	}
	if !in.Stream {
		var text strings.Builder
		text.WriteString(prefix)
		res, err := s.mgr.Generate(r.Context(), req, service.GenerateOptions{}, func(t backend.Token) error {
			text.WriteString(t.Text)
			return nil
		})
		if err != nil {
			s.fail(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{
			"id": id, "object": "text_completion", "created": created, "model": in.Model,
			"choices": []any{map[string]any{"index": 0, "text": text.String(), "finish_reason": res.FinishReason, "logprobs": nil}},
			"usage":   usageOf(res),
		})
		return
	}
	out := newSSE(w)
	chunk := func(text string, finish any) map[string]any {
		return map[string]any{
			"id": id, "object": "text_completion", "created": created, "model": in.Model,
			"choices": []any{map[string]any{"index": 0, "text": text, "finish_reason": finish, "logprobs": nil}},
		}
	}
	res, err := s.mgr.Generate(r.Context(), req, service.GenerateOptions{}, func(t backend.Token) error {
		text := t.Text
		if prefix != "" {
			text, prefix = prefix+text, ""
		}
		return out.data(chunk(text, nil))
	})
	if err != nil {
		if !out.started {
			s.fail(w, r, err)
			return
		}
		if ae := s.classify(err); ae.status != 499 {
			out.streamError(ae)
		}
		return
	}
	out.data(chunk(prefix, res.FinishReason))
	if in.includeUsage() {
		out.data(map[string]any{"id": id, "object": "text_completion", "created": created, "model": in.Model, "choices": []any{}, "usage": usageOf(res)})
	}
	out.raw("data: [DONE]\n\n")
}

// openAIModel is an entry of GET /v1/models.
type openAIModel struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
}

func toOpenAIModel(d service.ModelDesc) openAIModel {
	created := d.ModifiedAt.Unix()
	if d.ModifiedAt.IsZero() {
		created = 0
	}
	return openAIModel{ID: d.Name, Object: "model", Created: created, OwnedBy: "npuchat"}
}

func (s *Server) openAIModels(w http.ResponseWriter, r *http.Request) {
	data := []openAIModel{}
	for _, d := range s.mgr.Models() {
		data = append(data, toOpenAIModel(d))
	}
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": data})
}

func (s *Server) openAIModel(w http.ResponseWriter, r *http.Request) {
	want, err := s.mgr.Resolve(r.PathValue("id"))
	if err == nil {
		for _, d := range s.mgr.Models() {
			if d.Name == want {
				writeJSON(w, http.StatusOK, toOpenAIModel(d))
				return
			}
		}
		err = fmt.Errorf("model %q: %w", r.PathValue("id"), service.ErrUnknownModel)
	}
	s.fail(w, r, err)
}
