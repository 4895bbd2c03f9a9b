package web

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/npuchat/npuchat/config"
	"github.com/npuchat/npuchat/history"
	"github.com/npuchat/npuchat/service"
	"github.com/npuchat/npuchat/service/backend"
)

// ollamaChatRequest is the body of POST /api/chat.
type ollamaChatRequest struct {
	Model     string          `json:"model"`
	Messages  []chatMessage   `json:"messages"`
	Stream    *bool           `json:"stream"`
	Options   map[string]any  `json:"options"`
	KeepAlive json.RawMessage `json:"keep_alive"`
	Format    json.RawMessage `json:"format"`
	Tools     json.RawMessage `json:"tools"`
	Think     json.RawMessage `json:"think"`
	// Logprobs and TopLogprobs are Ollama 0.12's.
	Logprobs    json.RawMessage `json:"logprobs"`
	TopLogprobs json.RawMessage `json:"top_logprobs"`
}

// ollamaGenerateRequest is the body of POST /api/generate.
type ollamaGenerateRequest struct {
	Model     string          `json:"model"`
	Prompt    string          `json:"prompt"`
	System    string          `json:"system"`
	Raw       bool            `json:"raw"`
	Stream    *bool           `json:"stream"`
	Options   map[string]any  `json:"options"`
	KeepAlive json.RawMessage `json:"keep_alive"`
	Images    []string        `json:"images"`
	Format    json.RawMessage `json:"format"`
	Think     json.RawMessage `json:"think"`
	// Logprobs and TopLogprobs are Ollama 0.12's.
	Logprobs    json.RawMessage `json:"logprobs"`
	TopLogprobs json.RawMessage `json:"top_logprobs"`
}

// parseOllamaThink reads Ollama's think: true or false switches a
// reasoning model's thinking on or off (where its template allows), a
// level ("low", "medium", "high") switches it on, null or nothing
// leaves the model's default.
func parseOllamaThink(raw json.RawMessage) (*bool, error) {
	s := strings.TrimSpace(string(raw))
	switch s {
	case "", "null":
		return nil, nil
	case "true", "false":
		v := s == "true"
		return &v, nil
	case `"low"`, `"medium"`, `"high"`:
		v := true
		return &v, nil
	}
	return nil, badRequest("think", "think must be true, false, \"low\", \"medium\" or \"high\", got %s", s)
}

// ollamaParams is what an Ollama request adds to the backend request.
type ollamaParams struct {
	stream    bool
	keepAlive *time.Duration
}

// parseOllamaOptions reads Ollama's "options" map into the request.
func parseOllamaOptions(opts map[string]any, req *backend.Request) error {
	var sp samplingParams
	num := func(key string) (*float64, error) {
		v, ok := opts[key]
		if !ok || v == nil {
			return nil, nil
		}
		f, ok := v.(float64)
		if !ok || math.IsNaN(f) || math.IsInf(f, 0) {
			return nil, badRequest("options."+key, "options.%s must be a number", key)
		}
		return &f, nil
	}
	integer := func(key string) (*int64, error) {
		f, err := num(key)
		if err != nil || f == nil {
			return nil, err
		}
		if *f != math.Trunc(*f) || math.Abs(*f) > 1<<53 {
			return nil, badRequest("options."+key, "options.%s must be a whole number", key)
		}
		i := int64(*f)
		return &i, nil
	}
	var err error
	floats := []struct {
		key string
		dst **float64
	}{
		{"temperature", &sp.Temperature}, {"top_p", &sp.TopP}, {"min_p", &sp.MinP},
		{"repeat_penalty", &sp.RepetitionPenalty}, {"frequency_penalty", &sp.FrequencyPenalty},
		{"presence_penalty", &sp.PresencePenalty},
	}
	for _, f := range floats {
		if *f.dst, err = num(f.key); err != nil {
			return err
		}
	}
	if sp.Seed, err = integer("seed"); err != nil {
		return err
	}
	topK, err := integer("top_k")
	if err != nil {
		return err
	}
	if topK != nil {
		// Checked as sent: a value clamped first would be reported as
		// the clamped number, not the one the client sent.
		if *topK < 0 || *topK > 1<<20 {
			return badRequest("options.top_k", "options.top_k must be 0 (off) or a positive number of tokens up to %d, got %d", 1<<20, *topK)
		}
		k := int(*topK)
		sp.TopK = &k
	}
	names := map[string]string{"temperature": "options.temperature", "top_p": "options.top_p", "min_p": "options.min_p",
		"repetition_penalty": "options.repeat_penalty", "frequency_penalty": "options.frequency_penalty",
		"presence_penalty": "options.presence_penalty", "top_k": "options.top_k"}
	if req.Sampling, err = sp.toSampling(names); err != nil {
		return err
	}
	np, err := integer("num_predict")
	if err != nil {
		return err
	}
	if np != nil {
		switch {
		case *np < 0: // -1 infinite, -2 fill the context
			req.MaxTokens = 0
		case *np == 0 || *np > maxTokensLimit:
			return badRequest("options.num_predict", "options.num_predict must be -1 (no limit) or between 1 and %d, got %d", maxTokensLimit, *np)
		default:
			req.MaxTokens = int(*np)
		}
	}
	// num_ctx: the context this request may use, as Ollama's; at most
	// the loaded model's (the engine clamps a larger one, as Ollama
	// clamps it to the model's own), 0 for the loaded one.
	nc, err := integer("num_ctx")
	if err != nil {
		return err
	}
	if nc != nil {
		if *nc < 0 || *nc > history.MaxContext {
			return badRequest("options.num_ctx", "options.num_ctx must be 0 (the loaded model's context) or a number of tokens up to %d, got %d", history.MaxContext, *nc)
		}
		req.ContextLength = int(*nc)
	}
	if v, ok := opts["speculative"]; ok {
		raw, _ := json.Marshal(v) // a value decoded from JSON encodes
		if req.Speculative, err = parseSpeculative("options.speculative", raw); err != nil {
			return err
		}
	}
	if v, ok := opts["stop"]; ok && v != nil {
		var stops []string
		switch s := v.(type) {
		case string:
			stops = []string{s}
		case []any:
			for _, x := range s {
				str, ok := x.(string)
				if !ok {
					return badRequest("options.stop", "options.stop must be a list of strings")
				}
				stops = append(stops, str)
			}
		default:
			return badRequest("options.stop", "options.stop must be a list of strings")
		}
		if req.Stop, err = checkStops("options.stop", stops); err != nil {
			return err
		}
	}
	return nil
}

// maxKeepAliveSeconds bounds keep_alive either way (about 31 years): a
// larger value, NaN or an infinity is a mistake, and converted to a
// duration it overflowed into a negative one, "never unload".
const maxKeepAliveSeconds = 1e9

// parseKeepAlive reads Ollama's keep_alive: a duration string ("5m",
// "-1m"), a number of seconds (300, -1; as a string too), or absent. As
// in Ollama, a negative value keeps the model loaded, 0 unloads it after
// the request. NaN, infinities and values beyond maxKeepAliveSeconds
// either way are refused with a 400 that says what is allowed.
func parseKeepAlive(raw json.RawMessage) (*time.Duration, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	outOfRange := func(v string) error {
		return badRequest("keep_alive", "keep_alive %s is out of range: give a duration like \"5m\" or a number of seconds between -%g and %g (a negative one keeps the model loaded, 0 unloads it after the request)", clip(v, 40), maxKeepAliveSeconds, maxKeepAliveSeconds)
	}
	seconds := func(f float64, v string) (*time.Duration, error) {
		if math.IsNaN(f) || math.IsInf(f, 0) || math.Abs(f) > maxKeepAliveSeconds {
			return nil, outOfRange(v)
		}
		d := time.Duration(f * float64(time.Second))
		return &d, nil
	}
	var n json.Number
	if err := json.Unmarshal(raw, &n); err == nil {
		f, _ := strconv.ParseFloat(string(n), 64) // out of a float64's range: ±Inf, refused
		return seconds(f, string(raw))
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, badRequest("keep_alive", "keep_alive must be a duration like \"5m\" or a number of seconds")
	}
	if f, err := strconv.ParseFloat(strings.TrimSpace(s), 64); err == nil || errors.Is(err, strconv.ErrRange) {
		return seconds(f, strconv.Quote(s)) // "NaN", "Inf", "1e300" are numbers here, and refused
	}
	d, err := config.ParseKeepAlive(s)
	if err != nil {
		return nil, badRequest("keep_alive", "keep_alive: %v", err)
	}
	if d.Abs() > maxKeepAliveSeconds*time.Second {
		return nil, outOfRange(strconv.Quote(s))
	}
	return &d, nil
}

func parseOllamaChat(body []byte) (*backend.Request, ollamaParams, error) {
	var in ollamaChatRequest
	var p ollamaParams
	if err := unmarshalBody(body, &in); err != nil {
		return nil, p, err
	}
	req := &backend.Request{Model: trimModel(in.Model)}
	if req.Model == "" {
		return nil, p, badRequest("model", "model is required (for example \"minicpm5:2b\")")
	}
	if err := (requestFeatures{Tools: in.Tools, Format: in.Format, Logprobs: in.Logprobs, TopLogprobs: in.TopLogprobs}).apply(req, false); err != nil {
		return nil, p, err
	}
	var err error
	if req.Think, err = parseOllamaThink(in.Think); err != nil {
		return nil, p, err
	}
	if p.keepAlive, err = parseKeepAlive(in.KeepAlive); err != nil {
		return nil, p, err
	}
	p.stream = in.Stream == nil || *in.Stream
	if len(in.Messages) > 0 {
		if req.Messages, err = toMessages(in.Messages); err != nil {
			return nil, p, err
		}
	}
	if err := parseOllamaOptions(in.Options, req); err != nil {
		return nil, p, err
	}
	return req, p, nil
}

func parseOllamaGenerate(body []byte) (*backend.Request, ollamaParams, error) {
	var in ollamaGenerateRequest
	var p ollamaParams
	if err := unmarshalBody(body, &in); err != nil {
		return nil, p, err
	}
	req := &backend.Request{Model: trimModel(in.Model)}
	if req.Model == "" {
		return nil, p, badRequest("model", "model is required (for example \"minicpm5:2b\")")
	}
	if len(in.Images) > 0 {
		return nil, p, badRequest("images", "images are not supported: this model reads text only")
	}
	if err := (requestFeatures{Format: in.Format, Logprobs: in.Logprobs, TopLogprobs: in.TopLogprobs}).apply(req, false); err != nil {
		return nil, p, err
	}
	var err error
	if req.Think, err = parseOllamaThink(in.Think); err != nil {
		return nil, p, err
	}
	if p.keepAlive, err = parseKeepAlive(in.KeepAlive); err != nil {
		return nil, p, err
	}
	p.stream = in.Stream == nil || *in.Stream
	switch {
	case in.Prompt == "" && in.System == "":
		// An empty request loads (or, with keep_alive 0, unloads) the model.
	case in.Raw:
		req.Prompt = in.Prompt
	default:
		if in.System != "" {
			req.Messages = append(req.Messages, backend.Message{Role: "system", Content: in.System})
		}
		req.Messages = append(req.Messages, backend.Message{Role: "user", Content: in.Prompt})
	}
	if err := parseOllamaOptions(in.Options, req); err != nil {
		return nil, p, err
	}
	return req, p, nil
}

func ollamaTime(t time.Time) string { return t.Format(time.RFC3339Nano) }

func (s *Server) ollamaChat(w http.ResponseWriter, r *http.Request) {
	s.ollamaRun(w, r, true)
}

func (s *Server) ollamaGenerate(w http.ResponseWriter, r *http.Request) {
	s.ollamaRun(w, r, false)
}

// ollamaRun serves /api/chat (chat) and /api/generate.
func (s *Server) ollamaRun(w http.ResponseWriter, r *http.Request, chat bool) {
	s.generate(w, r, api{decode: func(w http.ResponseWriter, r *http.Request, body []byte) (*call, error) {
		parse := parseOllamaGenerate
		if chat {
			parse = parseOllamaChat
		}
		req, p, err := parse(body)
		if err != nil {
			return nil, err
		}
		f := ollamaFormat{chat: chat}
		if req.Messages == nil && req.Prompt == "" {
			return &call{req: req, model: req.Model, instead: func(ctx context.Context, ticket *service.Ticket) error {
				return s.ollamaLoad(w, ctx, f, req.Model, p.keepAlive, ticket)
			}}, nil
		}
		var out answerWriter = &ollamaWhole{ollamaFormat: f, s: s, w: w, r: r}
		if p.stream {
			out = &ollamaStream{ollamaFormat: f, s: s, r: r, nd: s.newNDJSON(w)}
		}
		// A chat's thinking is split from its answer; a raw prompt's
		// text is the client's own.
		return &call{req: req, out: out, model: req.Model, opts: service.GenerateOptions{KeepAlive: p.keepAlive}, split: req.Messages != nil}, nil
	}})
}

// ollamaLoad is a chat or generate request without a prompt: it loads
// the model (or, with keep_alive 0, unloads it) and says so.
func (s *Server) ollamaLoad(w http.ResponseWriter, ctx context.Context, f ollamaFormat, model string, keepAlive *time.Duration, ticket *service.Ticket) error {
	reason := "load"
	var err error
	if keepAlive != nil && *keepAlive == 0 {
		err, reason = s.mgr.Unload(ctx, model), "unload"
	} else {
		err = s.mgr.Load(ctx, model, service.GenerateOptions{KeepAlive: keepAlive, Ticket: ticket})
	}
	if err != nil {
		return err
	}
	c := f.chunk(newAnswer("", model, time.Now()), "")
	c.Done, c.DoneReason = true, reason
	writeJSON(w, http.StatusOK, c)
	return nil
}

// ollamaModel is an entry of /api/tags and /api/ps.
type ollamaModel struct {
	Name          string        `json:"name"`
	Model         string        `json:"model"`
	ModifiedAt    string        `json:"modified_at"`
	Size          int64         `json:"size"`
	Digest        string        `json:"digest"`
	Details       ollamaDetails `json:"details"`
	ExpiresAt     string        `json:"expires_at,omitempty"`     // /api/ps
	SizeVRAM      *int64        `json:"size_vram,omitempty"`      // /api/ps
	ContextLength int           `json:"context_length,omitempty"` // /api/ps
	// Cache is NPU Chat's own, in /api/ps: what the KV cache holds
	// (prompts, tokens, bytes in memory and on disk).
	Cache *backend.CacheStats `json:"cache,omitempty"`
	// Drafts is NPU Chat's own, in /api/ps: the tokens the model guessed
	// ahead since it was loaded (speculative decoding), how many it
	// kept, and the acceptance rate; absent before the first guess.
	Drafts *service.DraftStats `json:"drafts,omitempty"`
}

// ollamaDetails is a model's "details".
type ollamaDetails struct {
	ParentModel       string   `json:"parent_model"`
	Format            string   `json:"format"`
	Family            string   `json:"family"`
	Families          []string `json:"families"`
	ParameterSize     string   `json:"parameter_size"`
	QuantizationLevel string   `json:"quantization_level"`
}

// ollamaModelList is the body of /api/tags and /api/ps.
type ollamaModelList struct {
	Models []ollamaModel `json:"models"`
}

func toOllamaModel(d service.ModelDesc) ollamaModel {
	return ollamaModel{
		Name: d.Name, Model: d.Name, ModifiedAt: ollamaTime(d.ModifiedAt),
		Size: d.Size, Digest: d.Digest, Details: toOllamaDetails(d),
	}
}

func toOllamaDetails(d service.ModelDesc) ollamaDetails {
	var fams []string
	if d.Family != "" {
		fams = []string{d.Family}
	}
	return ollamaDetails{Format: d.Format, Family: d.Family, Families: fams,
		ParameterSize: d.ParameterSize, QuantizationLevel: d.Quantization}
}

func (s *Server) ollamaTags(w http.ResponseWriter, r *http.Request) {
	list := []ollamaModel{}
	for _, d := range s.mgr.Models() {
		if d.Installed {
			list = append(list, toOllamaModel(d))
		}
	}
	writeJSON(w, http.StatusOK, ollamaModelList{Models: list})
}

func (s *Server) ollamaPs(w http.ResponseWriter, r *http.Request) {
	st := s.mgr.Status()
	list := []ollamaModel{}
	if st.State == service.StateOn {
		m := toOllamaModel(s.describe(st.Model))
		exp := time.Now().Add(100 * 365 * 24 * time.Hour) // kept loaded
		if st.ExpiresAt != nil {
			exp = *st.ExpiresAt
		}
		m.ExpiresAt = ollamaTime(exp)
		m.SizeVRAM = new(int64)
		if st.Info != nil {
			m.ContextLength = st.Info.ContextLength
		}
		m.Cache, m.Drafts = st.Cache, st.Drafts
		list = append(list, m)
	}
	writeJSON(w, http.StatusOK, ollamaModelList{Models: list})
}

// describe finds a model's description, falling back to the loaded
// backend's info.
func (s *Server) describe(name string) service.ModelDesc {
	st := s.mgr.Status()
	loaded := st.Info != nil && st.Model == name
	for _, d := range s.mgr.Models() {
		if d.Name == name {
			if d.Shape == (backend.Shape{}) && loaded {
				d.Shape = st.Info.Shape // what the files did not say before loading
			}
			return d
		}
	}
	d := service.ModelDesc{Name: name}
	if loaded {
		d.Family, d.ParameterSize, d.Quantization, d.Format = st.Info.Family, st.Info.ParameterSize, st.Info.Quantization, st.Info.Format
		d.ContextLength, d.Shape = st.Info.ContextLength, st.Info.Shape
	}
	return d
}

func (s *Server) ollamaShow(w http.ResponseWriter, r *http.Request) {
	body, err := s.readSmall(w, r, maxSmallBody)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	var in struct {
		Model string `json:"model"`
		Name  string `json:"name"`
	}
	if err := unmarshalBody(body, &in); err != nil {
		s.fail(w, r, err)
		return
	}
	name := trimModel(in.Model)
	if name == "" {
		name = trimModel(in.Name)
	}
	if name == "" {
		s.fail(w, r, badRequest("model", "model is required"))
		return
	}
	canon, err := s.mgr.Resolve(name)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	d := s.describe(canon)
	// Ollama's CLI reads these keys with unchecked type assertions (older
	// versions panic when one is missing): always send them, 0 when unknown.
	arch := d.Family
	if arch == "" {
		arch = "llama"
	}
	sh := d.Shape
	info := map[string]any{
		"general.architecture":     arch,
		"general.name":             d.Name,
		"general.parameter_count":  parameterCount(d.ParameterSize),
		arch + ".context_length":   d.ContextLength,
		arch + ".embedding_length": sh.EmbeddingLength,
	}
	// The rest of the model's size, under GGUF's names as Ollama gives
	// them, where known.
	for k, v := range map[string]int{"block_count": sh.BlockCount, "feed_forward_length": sh.FeedForwardLength,
		"attention.head_count": sh.HeadCount, "attention.head_count_kv": sh.HeadCountKV, "vocab_size": sh.VocabSize} {
		if v > 0 {
			info[arch+"."+k] = v
		}
	}
	if sh.RopeFreqBase > 0 {
		info[arch+".rope.freq_base"] = sh.RopeFreqBase
	}
	if sh.RMSEpsilon > 0 {
		info[arch+".attention.layer_norm_rms_epsilon"] = sh.RMSEpsilon
	}
	writeJSON(w, http.StatusOK, ollamaShowResponse{
		Modelfile:    fmt.Sprintf("# Modelfile generated by NPU Chat\nFROM %s\n", d.Name),
		Parameters:   fmt.Sprintf("temperature %g\ntop_p %g\ntop_k %d\nmin_p %g", defaultTemperature, defaultTopP, defaultTopK, defaultMinP),
		Template:     "{{ .Prompt }}",
		Details:      toOllamaDetails(d),
		ModelInfo:    info,
		Capabilities: s.capabilities(canon),
		ModifiedAt:   ollamaTime(d.ModifiedAt),
	})
}

// ollamaShowResponse is the body of POST /api/show. ModelInfo is a map
// because its keys are named after the architecture ("llama.context_length").
type ollamaShowResponse struct {
	License      string         `json:"license"`
	Modelfile    string         `json:"modelfile"`
	Parameters   string         `json:"parameters"`
	Template     string         `json:"template"`
	Details      ollamaDetails  `json:"details"`
	ModelInfo    map[string]any `json:"model_info"`
	Capabilities []string       `json:"capabilities"`
	ModifiedAt   string         `json:"modified_at"`
}

func (s *Server) ollamaVersion(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, struct {
		Version string `json:"version"`
	}{s.opts.Version})
}

// parameterCount turns a size such as "2B" or "500M" into a number (0
// when it is not one).
func parameterCount(size string) float64 {
	size = strings.TrimSpace(strings.ToUpper(size))
	mult := 1.0
	switch {
	case strings.HasSuffix(size, "B"):
		mult, size = 1e9, strings.TrimSuffix(size, "B")
	case strings.HasSuffix(size, "M"):
		mult, size = 1e6, strings.TrimSuffix(size, "M")
	}
	f, err := strconv.ParseFloat(size, 64)
	if err != nil || f < 0 {
		return 0
	}
	return f * mult
}
