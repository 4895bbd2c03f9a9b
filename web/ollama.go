package web

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/npuchat/npuchat/config"
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
	Think     json.RawMessage `json:"think"`
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
		k := int(max(min(*topK, math.MaxInt32), math.MinInt32))
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

// parseKeepAlive reads Ollama's keep_alive: a duration string, a number
// of seconds, or absent.
func parseKeepAlive(raw json.RawMessage) (*time.Duration, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var f float64
	if err := json.Unmarshal(raw, &f); err == nil {
		if math.IsNaN(f) || math.Abs(f) > 1e9 {
			return nil, badRequest("keep_alive", "keep_alive is out of range")
		}
		d := time.Duration(f * float64(time.Second))
		return &d, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, badRequest("keep_alive", "keep_alive must be a duration like \"5m\" or a number of seconds")
	}
	d, err := config.ParseKeepAlive(s)
	if err != nil {
		return nil, badRequest("keep_alive", "keep_alive: %v", err)
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
	var err error
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
	var err error
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

// ndjson streams newline-delimited JSON objects.
type ndjson struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	started bool
}

func (n *ndjson) send(v any) error {
	if !n.started {
		n.started = true
		n.w.Header().Set("Content-Type", "application/x-ndjson")
		n.w.WriteHeader(http.StatusOK)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if _, err := n.w.Write(append(b, '\n')); err != nil {
		return err
	}
	return n.rc.Flush()
}

func ollamaTime(t time.Time) string { return t.Format(time.RFC3339Nano) }

// ollamaDone is the final object's statistics, in nanoseconds.
func ollamaDone(m map[string]any, res backend.Result, total time.Duration) map[string]any {
	m["done"] = true
	m["done_reason"] = res.FinishReason
	m["total_duration"] = total.Nanoseconds()
	m["load_duration"] = max(total-res.PrefillDuration-res.DecodeDuration, 0).Nanoseconds()
	m["prompt_eval_count"] = res.PromptTokens
	m["prompt_eval_duration"] = res.PrefillDuration.Nanoseconds()
	m["eval_count"] = res.CompletionTokens
	m["eval_duration"] = res.DecodeDuration.Nanoseconds()
	return m
}

func (s *Server) ollamaChat(w http.ResponseWriter, r *http.Request) {
	s.ollamaRun(w, r, true)
}

func (s *Server) ollamaGenerate(w http.ResponseWriter, r *http.Request) {
	s.ollamaRun(w, r, false)
}

// ollamaRun serves /api/chat (chat) and /api/generate.
func (s *Server) ollamaRun(w http.ResponseWriter, r *http.Request, chat bool) {
	start := time.Now()
	body, err := readBody(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	parse := parseOllamaGenerate
	if chat {
		parse = parseOllamaChat
	}
	req, p, err := parse(body)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	msg := func(text string) map[string]any {
		m := map[string]any{"model": req.Model, "created_at": ollamaTime(time.Now())}
		if chat {
			m["message"] = map[string]any{"role": "assistant", "content": text}
		} else {
			m["response"] = text
		}
		return m
	}
	if req.Messages == nil && req.Prompt == "" {
		// Load or unload only.
		reason := "load"
		if p.keepAlive != nil && *p.keepAlive == 0 {
			err, reason = s.mgr.Unload(r.Context(), req.Model), "unload"
		} else {
			err = s.mgr.Load(r.Context(), req.Model, service.GenerateOptions{KeepAlive: p.keepAlive})
		}
		if err != nil {
			s.fail(w, r, err)
			return
		}
		m := msg("")
		m["done"], m["done_reason"] = true, reason
		writeJSON(w, http.StatusOK, m)
		return
	}
	opts := service.GenerateOptions{KeepAlive: p.keepAlive}
	if !p.stream {
		var text strings.Builder
		res, err := s.mgr.Generate(r.Context(), req, opts, func(t backend.Token) error {
			text.WriteString(t.Text)
			return nil
		})
		if err != nil {
			s.fail(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, ollamaDone(msg(text.String()), res, time.Since(start)))
		return
	}
	out := &ndjson{w: w, rc: http.NewResponseController(w)}
	res, err := s.mgr.Generate(r.Context(), req, opts, func(t backend.Token) error {
		m := msg(t.Text)
		m["done"] = false
		return out.send(m)
	})
	if err != nil {
		if !out.started {
			s.fail(w, r, err)
			return
		}
		if ae := s.classify(err); ae.status != 499 {
			out.send(map[string]string{"error": ae.msg})
		}
		return
	}
	out.send(ollamaDone(msg(""), res, time.Since(start)))
}

// ollamaModel is an entry of /api/tags and /api/ps.
func ollamaModel(d service.ModelDesc) map[string]any {
	return map[string]any{
		"name": d.Name, "model": d.Name, "modified_at": ollamaTime(d.ModifiedAt),
		"size": d.Size, "digest": d.Digest, "details": ollamaDetails(d),
	}
}

func ollamaDetails(d service.ModelDesc) map[string]any {
	fam := d.Family
	var fams []string
	if fam != "" {
		fams = []string{fam}
	}
	return map[string]any{
		"parent_model": "", "format": d.Format, "family": fam, "families": fams,
		"parameter_size": d.ParameterSize, "quantization_level": d.Quantization,
	}
}

func (s *Server) ollamaTags(w http.ResponseWriter, r *http.Request) {
	list := []any{}
	for _, d := range s.mgr.Models() {
		if d.Installed {
			list = append(list, ollamaModel(d))
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"models": list})
}

func (s *Server) ollamaPs(w http.ResponseWriter, r *http.Request) {
	st := s.mgr.Status()
	list := []any{}
	if st.State == service.StateOn {
		d := s.describe(st.Model)
		m := ollamaModel(d)
		exp := time.Now().Add(100 * 365 * 24 * time.Hour) // kept loaded
		if st.ExpiresAt != nil {
			exp = *st.ExpiresAt
		}
		m["expires_at"] = ollamaTime(exp)
		m["size_vram"] = 0
		if st.Info != nil {
			m["context_length"] = st.Info.ContextLength
		}
		list = append(list, m)
	}
	writeJSON(w, http.StatusOK, map[string]any{"models": list})
}

// describe finds a model's description, falling back to the loaded
// backend's info.
func (s *Server) describe(name string) service.ModelDesc {
	for _, d := range s.mgr.Models() {
		if d.Name == name {
			return d
		}
	}
	d := service.ModelDesc{Name: name}
	if st := s.mgr.Status(); st.Info != nil && st.Model == name {
		d.Family, d.ParameterSize, d.Quantization, d.Format = st.Info.Family, st.Info.ParameterSize, st.Info.Quantization, st.Info.Format
		d.ContextLength = st.Info.ContextLength
	}
	return d
}

func (s *Server) ollamaShow(w http.ResponseWriter, r *http.Request) {
	body, err := readBody(r)
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
	info := map[string]any{
		"general.architecture":     arch,
		"general.name":             d.Name,
		"general.parameter_count":  parameterCount(d.ParameterSize),
		arch + ".context_length":   d.ContextLength,
		arch + ".embedding_length": 0,
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"license":      "",
		"modelfile":    fmt.Sprintf("# Modelfile generated by NPU Chat\nFROM %s\n", d.Name),
		"parameters":   fmt.Sprintf("temperature %g\ntop_p %g\ntop_k %d\nmin_p %g", defaultTemperature, defaultTopP, defaultTopK, defaultMinP),
		"template":     "{{ .Prompt }}",
		"details":      ollamaDetails(d),
		"model_info":   info,
		"capabilities": []string{"completion"},
		"modified_at":  ollamaTime(d.ModifiedAt),
	})
}

func (s *Server) ollamaVersion(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"version": s.opts.Version})
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
