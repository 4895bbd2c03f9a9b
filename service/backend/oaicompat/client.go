// Package oaicompat is a backend.Backend that runs a model on any server
// that speaks the OpenAI chat completions API: vLLM, the llama.cpp server,
// FastFlowLM's server, another NPU Chat, or OpenAI itself. It is the
// "remote" engine when pointed at a URL a person gives, and the transport
// of the FastFlowLM backend (npu/flm), which points it at the `flm serve`
// child it supervises.
//
// Generate always streams (`"stream": true`, with
// `"stream_options": {"include_usage": true}`) and reads the answer as
// server-sent events, so that text reaches the caller as it is made and a
// cancelled context closes the upstream connection (every server named
// above stops generating when its client goes away). The shapes it reads,
// and what each server sends, are in docs/flm-backend.md; the tests replay
// them from testdata/.
//
// Errors: an upstream failure is returned as *Error, which wraps the
// backend sentinel chosen by Classify (FastFlowLM's device failures such as
// ERT_CMD_STATE_TIMEOUT and a stream that breaks off mid-answer are
// backend.ErrDeviceFailed) and records how much text was already emitted.
//
// It uses only the standard library.
package oaicompat

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/npuchat/npuchat/enginekind"
	"github.com/npuchat/npuchat/service/backend"
)

// Options configure a Client.
type Options struct {
	// BaseURL is the server's address, with or without the "/v1" suffix:
	// "http://127.0.0.1:52625" and "http://127.0.0.1:52625/v1" are the same.
	BaseURL string
	// APIKey, when set, is sent as "Authorization: Bearer <APIKey>".
	APIKey string
	// Model is the upstream model name sent in every request (the
	// request's own Model is ignored: the service resolved it to this
	// backend). Empty means the first model the server lists.
	Model string
	// HTTPClient sends the requests; nil means a client with no overall
	// timeout (answers stream for minutes), since cancellation comes from
	// the context.
	HTTPClient *http.Client
	// Kind is what Kind returns; empty means enginekind.Remote.
	Kind enginekind.Kind
	// Info describes the model for Info; Name defaults to Model and Format
	// to "remote".
	Info backend.ModelInfo
	// IdleTimeout, when > 0, ends a request on which the server has sent
	// nothing (no headers, no event, no keep-alive) for this long, as a
	// device failure: a hung accelerator. It must exceed the longest
	// prefill. 0 means wait as long as the context allows.
	IdleTimeout time.Duration
	// ContextLength is the server's context in tokens (FastFlowLM's
	// --ctx-len); 0 means the one it reports at Load (vLLM's
	// max_model_len, the llama.cpp server's n_ctx: reportedContext), if
	// any. When known, a chat that does not fit it is sent without its
	// oldest turns, as the CPU engine does (fit.go).
	ContextLength int
	// Count gives a chat's length in tokens with the model's own
	// tokenizer and chat template (the FLM backend's, read from the
	// model's folder); nil means an estimate from its bytes.
	Count Counter
}

// Client is a backend.Backend for an OpenAI-compatible server. Make one
// with New.
type Client struct {
	base   string // ends in "/v1", no trailing slash
	apiKey string
	http   *http.Client
	kind   enginekind.Kind
	info   backend.ModelInfo

	mu       sync.Mutex
	model    string
	loaded   bool
	inflight map[*int]context.CancelCauseFunc // cancels of running Generates, for Unload
	idle     time.Duration
	ctxLen   int     // the server's context (Options.ContextLength, or reported at Load); 0 unknown
	fixedCtx bool    // ctxLen was given, not reported
	count    Counter // nil: estimate
}

// New checks opts and returns an unloaded Client.
func New(opts Options) (*Client, error) {
	base, err := normalizeBase(opts.BaseURL)
	if err != nil {
		return nil, err
	}
	c := &Client{
		base:     base,
		apiKey:   opts.APIKey,
		http:     opts.HTTPClient,
		kind:     opts.Kind,
		info:     opts.Info,
		model:    opts.Model,
		inflight: map[*int]context.CancelCauseFunc{},
		idle:     opts.IdleTimeout,
		ctxLen:   max(opts.ContextLength, 0),
		fixedCtx: opts.ContextLength > 0,
		count:    opts.Count,
	}
	if c.http == nil {
		c.http = &http.Client{}
	}
	if c.kind == "" {
		c.kind = enginekind.Remote
	}
	if c.info.Format == "" {
		c.info.Format = "remote"
	}
	return c, nil
}

// normalizeBase turns a server address into its "/v1" base URL.
func normalizeBase(raw string) (string, error) {
	raw = strings.TrimSpace(raw)
	if raw == "" {
		return "", errors.New("remote server: no URL given (e.g. http://127.0.0.1:8080)")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("remote server URL %q: %w", raw, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return "", fmt.Errorf("remote server URL %q: must start with http:// or https://", raw)
	}
	if u.Host == "" {
		return "", fmt.Errorf("remote server URL %q: no host", raw)
	}
	u.RawQuery, u.Fragment = "", ""
	p := strings.TrimRight(u.Path, "/")
	if !strings.HasSuffix(p, "/v1") {
		p += "/v1"
	}
	u.Path = p
	return u.String(), nil
}

// BaseURL is the "/v1" base URL requests go to.
func (c *Client) BaseURL() string { return c.base }

// Kind names the backend ("remote" unless Options.Kind said otherwise).
func (c *Client) Kind() enginekind.Kind { return c.kind }

// Model is the upstream model name in use (known after Load when
// Options.Model was empty).
func (c *Client) Model() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.model
}

// Info describes the model.
func (c *Client) Info() backend.ModelInfo {
	c.mu.Lock()
	defer c.mu.Unlock()
	info := c.info
	if info.Name == "" {
		info.Name = c.model
	}
	if c.ctxLen > 0 {
		info.ContextLength = c.ctxLen
	}
	if info.Capabilities == nil {
		info.Capabilities = []string{backend.CapCompletion}
		if c.kind == enginekind.Remote {
			info.Capabilities = remoteCapabilities
		}
	}
	return info
}

// Load checks that the server answers GET /v1/models and lists the model.
func (c *Client) Load(ctx context.Context, progress func(backend.Progress)) error {
	if progress != nil {
		progress(backend.Progress{Stage: "connecting to " + c.base})
	}
	entries, err := c.modelEntries(ctx)
	if err != nil {
		return err
	}
	ids := make([]string, 0, len(entries))
	for _, e := range entries {
		ids = append(ids, e.ID)
	}
	c.mu.Lock()
	model, fixed := c.model, c.fixedCtx
	c.mu.Unlock()
	reported := 0
	if !fixed && (model == "" || contains(ids, model)) {
		m := model
		if m == "" && len(ids) > 0 {
			m = ids[0]
		}
		reported = c.reportedContext(ctx, entries, m)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !fixed {
		c.ctxLen = reported
	}
	switch {
	case c.model == "" && len(ids) == 0:
		return fmt.Errorf("%s/models lists no model; name one in the settings", c.base)
	case c.model == "":
		c.model = ids[0]
	case !contains(ids, c.model):
		return fmt.Errorf("%s does not serve model %q (it serves: %s)", c.base, c.model, strings.Join(ids, ", "))
	}
	c.loaded = true
	if progress != nil {
		progress(backend.Progress{Stage: "connected", Frac: 1})
	}
	return nil
}

// Models lists the model ids the server serves (GET /v1/models).
func (c *Client) Models(ctx context.Context) ([]string, error) {
	entries, err := c.modelEntries(ctx)
	if err != nil {
		return nil, err
	}
	ids := make([]string, 0, len(entries))
	for _, e := range entries {
		ids = append(ids, e.ID)
	}
	return ids, nil
}

// modelEntries lists the models the server serves (GET /v1/models), with
// the context each entry gives, if any.
func (c *Client) modelEntries(ctx context.Context) ([]modelEntry, error) {
	endpoint := c.base + "/models"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, endpoint, nil)
	if err != nil {
		return nil, fmt.Errorf("list models: %w", err)
	}
	c.authorize(req)
	resp, err := c.http.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("cannot reach %s: %w", endpoint, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, fmt.Errorf("list models at %s: %w", endpoint, err)
	}
	switch {
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		return nil, fmt.Errorf("%s refused the API key (HTTP %d): set the right key in the settings", endpoint, resp.StatusCode)
	case resp.StatusCode != http.StatusOK:
		msg, _, _ := parseError(body, true)
		if msg == "" {
			msg = snippet(body)
		}
		return nil, fmt.Errorf("%s answered HTTP %d: %s (is this an OpenAI-compatible server?)", endpoint, resp.StatusCode, msg)
	}
	var list struct {
		Data []json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(body, &list); err != nil {
		return nil, fmt.Errorf("%s: not an OpenAI model list: %w", endpoint, err)
	}
	out := make([]modelEntry, 0, len(list.Data))
	for _, raw := range list.Data {
		var e modelEntry
		if json.Unmarshal(raw, &e) != nil {
			// a context field of another type: the id alone
			var id struct {
				ID string `json:"id"`
			}
			json.Unmarshal(raw, &id)
			e = modelEntry{ID: id.ID}
		}
		if e.ID != "" {
			out = append(out, e)
		}
	}
	return out, nil
}

// Unload forgets the connection and makes running Generate calls return.
func (c *Client) Unload(ctx context.Context) error {
	c.mu.Lock()
	c.loaded = false
	for _, cancel := range c.inflight {
		cancel(errUnloaded)
	}
	c.mu.Unlock()
	c.http.CloseIdleConnections()
	return nil
}

// Generate runs one request: it posts /v1/chat/completions (or
// /v1/completions when req.Messages is nil) with stream true, passes each
// text delta to emit, and returns the usage and finish reason.
func (c *Client) Generate(ctx context.Context, req *backend.Request, emit func(backend.Token) error) (backend.Result, error) {
	if req == nil {
		return backend.Result{}, fmt.Errorf("generate: no request: %w", backend.ErrBadRequest)
	}
	if req.Messages == nil && req.Prompt == "" {
		return backend.Result{}, fmt.Errorf("generate: neither messages nor a prompt: %w", backend.ErrBadRequest)
	}
	if req.Messages != nil && len(req.Messages) == 0 {
		return backend.Result{}, fmt.Errorf("generate: no messages: %w", backend.ErrBadRequest)
	}
	// What the backend says it cannot do is refused before it is sent
	// (features.go).
	if err := backend.CheckSupported(req, c.Info().Capabilities, "the "+string(c.kind)+" backend"); err != nil {
		return backend.Result{}, err
	}
	c.mu.Lock()
	if !c.loaded {
		c.mu.Unlock()
		return backend.Result{}, fmt.Errorf("generate on %s: %w", c.base, backend.ErrNotLoaded)
	}
	model := c.model
	reqCtx, cancel := context.WithCancelCause(ctx)
	key := new(int)
	c.inflight[key] = cancel
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.inflight, key)
		c.mu.Unlock()
		cancel(nil)
	}()

	endpoint := c.base + "/chat/completions"
	if req.Messages == nil {
		endpoint = c.base + "/completions"
	}
	// a chat that does not fit the context goes without its oldest turns
	req, fit, limit, err := c.fit(req)
	if err != nil {
		return backend.Result{ContextLength: limit}, err
	}
	if req.Messages != nil && limit > 0 && c.count != nil {
		emit = backend.StampPrompt(emit, fit.Tokens, 0) // the prompt's size is known before the server answers
	}
	body, err := json.Marshal(newWireRequest(model, req))
	if err != nil {
		return backend.Result{}, fmt.Errorf("generate: encode request: %w", err)
	}
	hreq, err := http.NewRequestWithContext(reqCtx, http.MethodPost, endpoint, bytes.NewReader(body))
	if err != nil {
		return backend.Result{}, fmt.Errorf("generate: %w", err)
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Accept", "text/event-stream")
	c.authorize(hreq)

	g := &generation{
		endpoint: endpoint,
		emit:     emit,
		stop:     newStopFilter(req.Stop),
		start:    time.Now(),
	}
	if c.idle > 0 {
		// The watchdog: every read from the server pushes it back.
		timer := time.AfterFunc(c.idle, func() { cancel(errIdle) })
		defer timer.Stop()
		g.alive = func() { timer.Reset(c.idle) }
	}
	res, err := g.run(c.http, hreq)
	res.OmittedMessages, res.ContextLength = fit.Omitted, limit
	if err != nil {
		// Report why the request really ended: the caller's context, an
		// Unload, the watchdog, or the upstream.
		if ctx.Err() != nil {
			return res, ctx.Err()
		}
		switch context.Cause(reqCtx) {
		case errUnloaded:
			return res, fmt.Errorf("generate on %s: unloaded while generating: %w", c.base, backend.ErrNotLoaded)
		case errIdle:
			return res, &Error{URL: endpoint, Message: fmt.Sprintf("the server sent nothing for %v", c.idle),
				Emitted: g.emitted, EmittedText: g.text.String(), Kind: backend.ErrDeviceFailed}
		}
		var ue *Error
		if errors.As(err, &ue) && errors.Is(err, backend.ErrPromptTooLong) && req.Messages != nil && ue.Emitted == 0 {
			// the server's "does not fit" in the words of the CPU engine's
			tokens, estimated := fit.Tokens, c.count == nil || limit <= 0
			if limit <= 0 { // nothing was counted: no context known
				tokens, _ = estimate(req.Messages)
			}
			return res, overflow(ue, tokens, limit, estimated)
		}
		return res, err
	}
	return res, nil
}

// Causes of a request's cancellation other than the caller's context.
var (
	errUnloaded = errors.New("unloaded")
	errIdle     = errors.New("idle timeout")
)

func (c *Client) authorize(req *http.Request) {
	if c.apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.apiKey)
	}
}

// maxUpstreamStops is how many stop strings are sent upstream (OpenAI's
// limit); all of them are enforced here anyway.
const maxUpstreamStops = 4

// wireRequest is the JSON body of a completion request. Sampling fields
// are sent only when they differ from "off", so that strict servers
// (OpenAI) do not reject fields they lack, except temperature, which is
// always sent because 0 (greedy) differs from every server's default.
type wireRequest struct {
	Model         string         `json:"model"`
	Messages      []wireMessage  `json:"messages,omitempty"`
	Prompt        *string        `json:"prompt,omitempty"`
	Stream        bool           `json:"stream"`
	StreamOptions *streamOptions `json:"stream_options,omitempty"`
	MaxTokens     int            `json:"max_tokens,omitempty"`
	Temperature   float64        `json:"temperature"`
	TopP          float64        `json:"top_p,omitempty"`
	TopK          int            `json:"top_k,omitempty"`
	MinP          float64        `json:"min_p,omitempty"`
	// RepetitionPenalty is vLLM's and FastFlowLM's name, RepeatPenalty
	// llama.cpp's; both are sent.
	RepetitionPenalty float64  `json:"repetition_penalty,omitempty"`
	RepeatPenalty     float64  `json:"repeat_penalty,omitempty"`
	FrequencyPenalty  float64  `json:"frequency_penalty,omitempty"`
	PresencePenalty   float64  `json:"presence_penalty,omitempty"`
	Seed              *int64   `json:"seed,omitempty"`
	Stop              []string `json:"stop,omitempty"`
	// Tools and the rest (features.go).
	Tools             []json.RawMessage `json:"tools,omitempty"`
	ToolChoice        any               `json:"tool_choice,omitempty"`
	ParallelToolCalls *bool             `json:"parallel_tool_calls,omitempty"`
	ResponseFormat    any               `json:"response_format,omitempty"`
	Logprobs          any               `json:"logprobs,omitempty"`
	TopLogprobs       *int              `json:"top_logprobs,omitempty"`
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

func newWireRequest(model string, req *backend.Request) *wireRequest {
	s := req.Sampling
	w := &wireRequest{
		Model:            model,
		Stream:           true,
		StreamOptions:    &streamOptions{IncludeUsage: true},
		MaxTokens:        req.MaxTokens,
		Temperature:      s.Temperature,
		TopK:             s.TopK,
		MinP:             s.MinP,
		FrequencyPenalty: s.FrequencyPenalty,
		PresencePenalty:  s.PresencePenalty,
	}
	if req.Messages != nil {
		w.Messages = wireMessages(req.Messages)
	} else {
		p := req.Prompt
		w.Prompt = &p
	}
	if s.TopP > 0 && s.TopP < 1 {
		w.TopP = s.TopP
	}
	if s.RepeatPenalty > 0 && s.RepeatPenalty != 1 {
		w.RepetitionPenalty = s.RepeatPenalty
		w.RepeatPenalty = s.RepeatPenalty
	}
	if s.HasSeed {
		seed := s.Seed
		w.Seed = &seed
	}
	for _, st := range req.Stop {
		if st != "" && len(w.Stop) < maxUpstreamStops {
			w.Stop = append(w.Stop, st)
		}
	}
	w.addFeatures(req)
	return w
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// snippet is the start of a body, for error messages.
func snippet(body []byte) string {
	s := strings.TrimSpace(string(body))
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	if s == "" {
		s = "(empty body)"
	}
	return s
}

// isEventStream says whether a Content-Type is text/event-stream.
func isEventStream(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	return err == nil && mt == "text/event-stream"
}

var _ backend.Backend = (*Client)(nil)
