package web

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"

	"github.com/npuchat/npuchat/config"
	"github.com/npuchat/npuchat/enginekind"
)

// PageSettings are the settings the page's settings view shows and
// changes (GET and PUT /api/settings): everything the tray's settings
// window holds, and more. Secrets (the Hugging Face token, the API key)
// go out masked only; a PUT changes one when it names it.
type PageSettings struct {
	// Engine is auto, npu or cpu (remote when the server was started
	// with a remote engine).
	Engine string `json:"engine"`
	// KeepAlive is how long an idle model stays loaded ("5m", "-1" never).
	KeepAlive string `json:"keep_alive"`
	// KeepAliveSeconds (-1: never) and KeepAliveText ("5 minutes") are
	// the keep-alive read, for showing (a PUT ignores them).
	KeepAliveSeconds float64 `json:"keep_alive_seconds"`
	KeepAliveText    string  `json:"keep_alive_text"`
	// ContextLength is the CPU engine's context in tokens, 0 automatic;
	// it applies when the model is next loaded.
	ContextLength int `json:"context_length"`
	// Parallel is how many requests the CPU engine answers at once, 0
	// automatic (KV.AutoParallel says how many that is now); it applies
	// when the model is next loaded.
	Parallel int `json:"parallel"`
	// KVCacheType is how the CPU engine keeps keys and values (one of
	// KVCacheTypes; f32 the default); it applies at the next load.
	KVCacheType  string   `json:"kv_cache_type"`
	KVCacheTypes []string `json:"kv_cache_types,omitempty"`
	// Speculative is how the CPU engine decodes requests that do not say
	// (one of config.SpeculativeModes; off the default): auto guesses
	// tokens from earlier text and checks them in one pass, the same
	// answer. It applies at the next load.
	Speculative string `json:"speculative"`
	// ServeAtStart switches the model on when NPU Chat starts.
	ServeAtStart bool `json:"serve_at_start"`
	// HFEndpoint is the Hugging Face endpoint or mirror set here ("":
	// HFEndpointFallback, from HFEndpointFrom).
	HFEndpoint         string `json:"hf_endpoint"`
	HFEndpointFallback string `json:"hf_endpoint_fallback,omitempty"`
	HFEndpointFrom     string `json:"hf_endpoint_from,omitempty"` // HF_ENDPOINT or default
	// HFToken: in a GET, "" always (never sent); in a PUT, a new token,
	// "" to remove it, absent to keep it.
	HFToken *string `json:"hf_token,omitempty"`
	// HFTokenMasked is the token set here, masked ("hf_…1234").
	HFTokenMasked string `json:"hf_token_masked"`
	// HFTokenFallback is where the token used without one set here comes
	// from (HF_TOKEN, a token file's path; "" none).
	HFTokenFallback string `json:"hf_token_fallback,omitempty"`
	// ModelsDir is where new installs go ("": ModelsDirDefault).
	ModelsDir        string `json:"models_dir"`
	ModelsDirDefault string `json:"models_dir_default,omitempty"`
	// Port and Reachable are the listening address: 127.0.0.1:Port, or
	// every interface (0.0.0.0) when Reachable, which needs an API key.
	// Both apply at the next start; Listening is the address now.
	Port      int    `json:"port"`
	Reachable bool   `json:"reachable"`
	Listening string `json:"listening,omitempty"`
	// APIKey is like HFToken; APIKeyMasked shows the one set.
	APIKey       *string `json:"api_key,omitempty"`
	APIKeyMasked string  `json:"api_key_masked"`
	// KV is what a context length costs in memory, when a model's shape
	// is known.
	KV *KVInfo `json:"kv,omitempty"`
	// Chat holds the default generation settings of conversations.
	Chat config.ChatDefaults `json:"chat"`
	// MCPServers are the MCP servers (mcp.go), tokens never sent; in a
	// PUT, the whole list, or absent to keep it.
	MCPServers *[]PageMCPServer `json:"mcp_servers,omitempty"`
}

// KVInfo is what the KV cache of a context takes with a model: the
// bytes of one position (a key and a value of every KV head of every
// layer), from the loaded model or from the installed model's files.
type KVInfo struct {
	Model string `json:"model"`
	// BytesPerToken is the memory one token of context takes; a context
	// of n tokens takes n rounded up to Block times it.
	BytesPerToken int64 `json:"bytes_per_token"`
	Block         int   `json:"block"`
	// The shape it comes from.
	Layers  int `json:"layers"`
	KVHeads int `json:"kv_heads"`
	HeadDim int `json:"head_dim"`
	// KVType is the KV cache type of BytesPerToken (the setting's, as
	// the model keeps it; the loaded model's when Loaded), ElementBytes
	// the bytes of one key or value element of it (q8_0: 34/32).
	KVType       string  `json:"kv_type,omitempty"`
	ElementBytes float64 `json:"element_bytes"`
	// ByType is BytesPerToken for each kv_cache_type value, so that the
	// page can show what a choice not yet saved will cost.
	ByType map[string]int64 `json:"bytes_per_token_by_type,omitempty"`
	// KeptAs names, for a type this model cannot keep, the one it keeps
	// instead (q8_0 needs a head dimension that is a multiple of 32:
	// {"q8_0": "f16"}).
	KeptAs map[string]string `json:"kept_as,omitempty"`
	// Loaded: from the model loaded now (exact); else from its files
	// (KV heads folded at load may make it smaller).
	Loaded bool `json:"loaded"`
	// ModelMax is the model's own longest context (a longer setting is
	// clamped to it at load); Context the context in effect now (0: not
	// loaded); Automatic what 0 would give now (0: unknown).
	ModelMax  int `json:"model_max,omitempty"`
	Context   int `json:"context,omitempty"`
	Automatic int `json:"automatic,omitempty"`
	// Parallel is how many requests the model on now answers at once (0:
	// not loaded); AutoParallel what a parallel setting of 0 gives now
	// (0: unknown).
	Parallel     int `json:"parallel,omitempty"`
	AutoParallel int `json:"auto_parallel,omitempty"`
}

// Settings are the app's settings as the page reads and changes them:
// the app's config.Store, through the app, which puts a change into
// effect (the keep-alive and the engine pushed into the service) before
// Update returns. The page's change and the tray's go the same way, so
// each sees the other's at once.
type Settings interface {
	Get() config.Settings
	Update(ctx context.Context, change func(*config.Settings) error) (config.Settings, error)
}

// SettingsDetails is what Settings may also tell the settings view
// (the app's do): the fallbacks of settings left empty, the address
// listened on, and the KV cache's cost.
type SettingsDetails interface {
	SettingsDetails(ctx context.Context) Details
}

// Details are SettingsDetails' answer.
type Details struct {
	Hub              config.Hub // the hub with no endpoint or token set in Settings
	ModelsDirDefault string
	Listening        string
	KV               *KVInfo
}

// pageSettings is the page's view of the settings: the defaults named
// (auto, 5m0s) rather than empty, secrets masked.
func pageSettings(c config.Settings, d Details) PageSettings {
	p := PageSettings{Engine: c.Engine, KeepAlive: strings.TrimSpace(c.KeepAlive), ContextLength: c.ContextLength, Parallel: c.Parallel, Chat: c.Chat,
		ServeAtStart: c.ServeAtStart, HFEndpoint: c.HFEndpoint, HFTokenMasked: c.HFToken.Masked(),
		ModelsDir: c.ModelsDir, ModelsDirDefault: d.ModelsDirDefault, APIKeyMasked: config.Secret(c.APIKey).Masked(),
		Listening: d.Listening, KV: d.KV, KVCacheType: c.KVCacheType, KVCacheTypes: config.KVCacheTypes,
		MCPServers: mcpSettingsOf(c)}
	if p.KVCacheType == "" {
		p.KVCacheType = config.KVCacheTypes[0]
	}
	if p.Speculative = c.Speculative; p.Speculative == "" {
		p.Speculative = config.SpeculativeModes[0]
	}
	if d.Hub.Endpoint != "" {
		p.HFEndpointFallback, p.HFEndpointFrom = d.Hub.Endpoint, d.Hub.EndpointFrom
	}
	p.HFTokenFallback = d.Hub.TokenFrom
	if p.Engine == "" {
		p.Engine = string(enginekind.Auto)
	}
	if p.KeepAlive == "" {
		p.KeepAlive = config.DefaultKeepAlive.String()
	}
	ka := c.KeepAliveDuration()
	p.KeepAliveSeconds, p.KeepAliveText = ka.Seconds(), config.KeepAliveWords(ka)
	if ka < 0 {
		p.KeepAliveSeconds = -1
	}
	addr := c.Addr
	if addr == "" {
		addr = config.DefaultAddr
	}
	if _, port, err := net.SplitHostPort(addr); err == nil {
		p.Port, _ = strconv.Atoi(port)
	}
	p.Reachable = !config.IsLoopback(addr)
	return p
}

// settingsView is the page's view of the settings now.
func (s *Server) settingsView(ctx context.Context, c config.Settings) PageSettings {
	var d Details
	if sd, ok := s.opts.Settings.(SettingsDetails); ok {
		d = sd.SettingsDetails(ctx)
	}
	return pageSettings(c, d)
}

// chatDefaults are the default generation settings of conversations.
func (s *Server) chatDefaults() config.ChatDefaults {
	if s.opts.Settings == nil {
		return config.ChatDefaults{}
	}
	return s.opts.Settings.Get().Chat
}

func (s *Server) getSettings(w http.ResponseWriter, r *http.Request) {
	if s.opts.Settings == nil {
		writeError(w, r, http.StatusNotFound, "not_found", "this server has no settings to change")
		return
	}
	writeJSON(w, http.StatusOK, s.settingsView(r.Context(), s.opts.Settings.Get()))
}

// putSettings changes the settings the body names (the others keep
// their values). Bad values are one 400 naming every bad field (fields,
// each with its param and message; param is the first's).
func (s *Server) putSettings(w http.ResponseWriter, r *http.Request) {
	if s.opts.Settings == nil {
		writeError(w, r, http.StatusNotFound, "not_found", "this server has no settings to change")
		return
	}
	cur := s.opts.Settings.Get()
	in := pageSettings(cur, Details{})
	in.MCPServers = nil // absent: kept
	if err := s.decode(w, r, maxSettingsBody, &in); err != nil {
		s.fail(w, r, err)
		return
	}
	// Every bad field is named at once: the page's own (an empty
	// keep-alive, the port) with the store's.
	var pre []error
	if strings.TrimSpace(in.KeepAlive) == "" {
		pre = append(pre, &config.FieldError{Field: "keep_alive", Message: "the time before the model is unloaded is empty: write a duration such as 5m or 1h, or choose never (-1) to keep it loaded"})
	}
	addr, err := pageAddr(cur.Addr, in.Port, in.Reachable)
	if err != nil {
		pre = append(pre, &config.FieldError{Field: "port", Message: err.Error()})
		addr = cur.Addr
	}
	out, err := s.opts.Settings.Update(r.Context(), func(c *config.Settings) error {
		c.Engine, c.KeepAlive, c.ContextLength, c.Parallel, c.Chat = in.Engine, in.KeepAlive, in.ContextLength, in.Parallel, in.Chat
		if in.KVCacheType != c.KVCacheType && (in.KVCacheType != config.KVCacheTypes[0] || c.KVCacheType != "") {
			c.KVCacheType = in.KVCacheType // the default named stays unset
		}
		if in.Speculative != c.Speculative && (in.Speculative != config.SpeculativeModes[0] || c.Speculative != "") {
			c.Speculative = in.Speculative // the default named stays unset
		}
		c.ServeAtStart, c.HFEndpoint, c.ModelsDir, c.Addr = in.ServeAtStart, in.HFEndpoint, in.ModelsDir, addr
		if in.HFToken != nil {
			c.HFToken = config.Secret(*in.HFToken)
		}
		if in.APIKey != nil {
			c.APIKey = *in.APIKey
		}
		if in.MCPServers != nil {
			c.MCPServers = mcpServersFrom(*in.MCPServers, c.MCPServers)
		}
		if pre != nil {
			// Nothing is saved; the store's faults are named beside these.
			return errors.Join(append(pre, config.CheckChange(cur, *c))...)
		}
		return nil
	})
	if fes := config.FieldErrors(err); len(fes) > 0 {
		writeFieldErrors(w, fes)
		return
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, s.settingsView(r.Context(), out))
}

// pageAddr is the listening address the page's port and "reachable from
// other devices" make, keeping the address as it is when they say what
// it says already (a --addr of a particular interface stays).
func pageAddr(cur string, port int, reachable bool) (string, error) {
	if cur == "" {
		cur = config.DefaultAddr
	}
	if port < 1 || port > 65535 {
		if p, err := strconv.Atoi(portOf(cur)); err == nil && p == port { // a --addr of port 0, kept
			return cur, nil
		}
		return "", badRequest("port", "the port is a number from 1 to 65535, got %d", port)
	}
	if strconv.Itoa(port) == portOf(cur) && reachable == !config.IsLoopback(cur) {
		return cur, nil
	}
	host := "127.0.0.1"
	if reachable {
		host = "0.0.0.0"
	}
	return net.JoinHostPort(host, strconv.Itoa(port)), nil
}

func portOf(addr string) string {
	_, port, _ := net.SplitHostPort(addr)
	return port
}

// logTail is GET /api/logs?lines=N: the end of the log file.
func (s *Server) logTail(w http.ResponseWriter, r *http.Request) {
	if s.opts.LogFile == "" {
		writeError(w, r, http.StatusNotFound, "not_found", "this server writes no log file")
		return
	}
	n := 200
	if v := r.URL.Query().Get("lines"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 || n > 5000 {
			s.fail(w, r, badRequest("lines", "lines must be a number from 1 to 5000, got %q", v))
			return
		}
	}
	lines, err := tailLines(s.opts.LogFile, n)
	if err != nil {
		s.fail(w, r, fmt.Errorf("read the log %s: %w", s.opts.LogFile, err))
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"path": s.opts.LogFile, "lines": lines})
}

// tailLines returns the last n lines of a file, reading at most its
// last 1 MiB.
func tailLines(path string, n int) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	const maxRead = 1 << 20
	off := fi.Size() - maxRead
	if off < 0 {
		off = 0
	}
	b := make([]byte, fi.Size()-off)
	if _, err := f.ReadAt(b, off); err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	text := strings.TrimRight(string(b), "\n")
	if text == "" {
		return []string{}, nil
	}
	lines := strings.Split(text, "\n")
	if off > 0 && len(lines) > 1 {
		lines = lines[1:] // a partial first line
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return lines, nil
}

// fieldProblem is one bad setting in a 400's fields: its param (the
// settings key) and what is wrong, for a person.
type fieldProblem struct {
	Param   string `json:"param"`
	Message string `json:"message"`
}

// settingsRefusal is the settings' 400: Ollama's error shape (error,
// every message) with NPU Chat's param (the first bad field) and fields
// (all of them), which the settings page shows each at its field.
type settingsRefusal struct {
	Error  string         `json:"error"`
	Code   string         `json:"code"`
	Param  string         `json:"param"`
	Fields []fieldProblem `json:"fields"`
}

// writeFieldErrors writes bad settings as one 400.
func writeFieldErrors(w http.ResponseWriter, fes []*config.FieldError) {
	out := settingsRefusal{Code: "invalid_request_error", Param: fes[0].Field}
	msgs := make([]string, 0, len(fes))
	for _, fe := range fes {
		out.Fields = append(out.Fields, fieldProblem{Param: fe.Field, Message: fe.Message})
		msgs = append(msgs, fe.Message)
	}
	out.Error = strings.Join(msgs, "; ")
	writeJSON(w, http.StatusBadRequest, out)
}
