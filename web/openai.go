package web

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strings"

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
	// Features beyond text, read by requestFeatures.apply.
	Tools          json.RawMessage `json:"tools"`
	ToolChoice     json.RawMessage `json:"tool_choice"`
	ResponseFormat json.RawMessage `json:"response_format"`
	Logprobs       json.RawMessage `json:"logprobs"`
	TopLogprobs    json.RawMessage `json:"top_logprobs"`
	// ParallelToolCalls is parallel_tool_calls (nil: true).
	ParallelToolCalls *bool `json:"parallel_tool_calls"`
	// Speculative is NPU Chat's own (extra_body in the SDKs):
	// parseSpeculative.
	Speculative json.RawMessage `json:"speculative"`
}

// features is what the request asks for beyond text.
func (c *openAICommon) features() requestFeatures {
	return requestFeatures{Tools: c.Tools, ToolChoice: c.ToolChoice, ResponseFormat: c.ResponseFormat,
		Logprobs: c.Logprobs, TopLogprobs: c.TopLogprobs, ParallelToolCalls: c.ParallelToolCalls}
}

// includeUsage reports whether a stream ends with a usage chunk.
func (c *openAICommon) includeUsage() bool {
	return c.StreamOptions != nil && c.StreamOptions.IncludeUsage
}

// toRequest validates the shared fields into req (everything but the
// prompt or messages and the token limit).
func (c *openAICommon) toRequest(req *backend.Request, completions bool) error {
	req.Model = trimModel(c.Model)
	if req.Model == "" {
		return badRequest("model", "model is required (for example \"minicpm5:2b\")")
	}
	if c.N != nil && *c.N != 1 {
		return badRequest("n", "n must be 1: NPU Chat generates one answer per request")
	}
	if err := c.features().apply(req, completions); err != nil {
		return err
	}
	var err error
	if req.Speculative, err = parseSpeculative("speculative", c.Speculative); err != nil {
		return err
	}
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
	if err := in.toRequest(req, false); err != nil {
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
	if err := in.toRequest(req, true); err != nil {
		return nil, nil, err
	}
	if len(req.Tools) > 0 || req.ToolChoice.Mode != "" {
		return nil, nil, badRequest("tools", "tools are for /v1/chat/completions; a completion continues raw text")
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
			field := jsonPath(reflect.TypeOf(v), te.Field)
			if field == "" {
				return badRequest("", "the request body must be %s, got JSON %s", kindName(te.Type), te.Value)
			}
			return badRequest(field, "field %q: expected %s, got JSON %s", field, kindName(te.Type), te.Value)
		}
		return badRequest("", "request body is not valid JSON: %v", err)
	}
	return nil
}

// jsonPath is a decoding error's field path as the client wrote it:
// encoding/json names embedded structs by their Go type
// ("openAICommon.model"), which means nothing to a client.
func jsonPath(t reflect.Type, field string) string {
	if field == "" {
		return ""
	}
	var out []string
	for _, seg := range strings.Split(field, ".") {
		for t != nil && (t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Array || t.Kind() == reflect.Map) {
			t = t.Elem()
		}
		if t != nil && t.Kind() == reflect.Struct {
			if f, ok := t.FieldByName(seg); ok && f.Anonymous {
				t = f.Type
				continue // a Go embedding, not a JSON key
			}
			next := reflect.Type(nil)
			for i := 0; i < t.NumField(); i++ {
				f := t.Field(i)
				if name, _, _ := strings.Cut(f.Tag.Get("json"), ","); name == seg {
					next = f.Type
				}
			}
			if next == nil { // the key is in an embedded struct
				next = embeddedField(t, seg)
			}
			t = next
		}
		out = append(out, seg)
	}
	return strings.Join(out, ".")
}

// embeddedField finds the type of the field tagged key in t's embedded
// structs.
func embeddedField(t reflect.Type, key string) reflect.Type {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.Anonymous || f.Type.Kind() != reflect.Struct {
			continue
		}
		for j := 0; j < f.Type.NumField(); j++ {
			g := f.Type.Field(j)
			if name, _, _ := strings.Cut(g.Tag.Get("json"), ","); name == key {
				return g.Type
			}
		}
	}
	return nil
}

// kindName says what JSON a Go type wants, for people.
func kindName(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Struct, reflect.Map:
		return "a JSON object"
	}
	return "another JSON type"
}

func newID(prefix string) string {
	var b [12]byte
	rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

func (s *Server) openAIChat(w http.ResponseWriter, r *http.Request) {
	s.generate(w, r, api{idPrefix: "chatcmpl-", decode: func(w http.ResponseWriter, r *http.Request, body []byte) (*call, error) {
		req, in, err := parseOpenAIChat(body)
		if err != nil {
			return nil, err
		}
		var out answerWriter = &openAIChatWhole{s: s, w: w, r: r, logprobs: req.Logprobs}
		if in.Stream {
			out = &openAIChatStream{s: s, r: r, sse: s.newSSE(w), usage: in.includeUsage(), logprobs: req.Logprobs}
		}
		return &call{req: req, out: out, model: in.Model, split: true}, nil
	}})
}

func (s *Server) openAICompletions(w http.ResponseWriter, r *http.Request) {
	s.generate(w, r, api{idPrefix: "cmpl-", decode: func(w http.ResponseWriter, r *http.Request, body []byte) (*call, error) {
		req, in, err := parseOpenAICompletion(body)
		if err != nil {
			return nil, err
		}
		echo := ""
		if in.Echo {
			echo = req.Prompt
		}
		var out answerWriter = &openAICompletionWhole{s: s, w: w, r: r, echo: echo, logprobs: req.Logprobs}
		if in.Stream {
			out = &openAICompletionStream{s: s, r: r, sse: s.newSSE(w), usage: in.includeUsage(), echo: echo, logprobs: req.Logprobs}
		}
		return &call{req: req, out: out, model: in.Model}, nil
	}})
}

// openAIModel is an entry of GET /v1/models.
type openAIModel struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
}

// openAIModelList is the body of GET /v1/models.
type openAIModelList struct {
	Object string        `json:"object"`
	Data   []openAIModel `json:"data"`
}

func toOpenAIModel(d service.ModelDesc) openAIModel {
	created := d.ModifiedAt.Unix()
	if d.ModifiedAt.IsZero() {
		created = 0
	}
	return openAIModel{ID: d.Name, Object: "model", Created: created, OwnedBy: "npuchat"}
}

func (s *Server) openAIModels(w http.ResponseWriter, r *http.Request) {
	// What can answer now: installed models, not the catalog's offers
	// (as /api/tags lists them).
	data := []openAIModel{}
	for _, d := range s.mgr.Models() {
		if d.Installed {
			data = append(data, toOpenAIModel(d))
		}
	}
	writeJSON(w, http.StatusOK, openAIModelList{Object: "list", Data: data})
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
