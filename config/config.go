// Package config is where NPU Chat reads every setting: the settings file,
// the folders it uses on each OS, and the environment variables that
// override them. No other package calls os.Getenv for a setting; they get
// a *Config (or the values from it) passed in.
//
// While NPU Chat runs, the settings have one owner: the Store the app
// makes (NewStore), which the page and the tray read, change and watch
// through the app. The settings file is edited with package jsonedit
// (UpdateSettings), which keeps every key and byte a change does not
// touch.
//
// Environment variables (documented in the README):
//
//	NPUCHAT_ADDR       address to serve on (default 127.0.0.1:8001)
//	NPUCHAT_DATA       data folder (history, logs, NPU Chat's own models)
//	NPUCHAT_CONFIG     settings file path
//	NPUCHAT_API_KEY    require this Bearer key on the API
//	NPUCHAT_ORIGINS    extra allowed browser origins, comma separated
//	NPUCHAT_ENGINE     auto, npu, oflm, flm, cpu or remote
//	NPUCHAT_REMOTE_URL base URL of a remote OpenAI-compatible server
//	NPUCHAT_KEEP_ALIVE idle time before the model is unloaded (e.g. 5m, -1 = never)
//	NPUCHAT_LOG_LEVEL  debug, info, warn or error
//	HF_ENDPOINT        Hugging Face endpoint or mirror, when Settings sets none
//	HF_TOKEN, HUGGING_FACE_HUB_TOKEN, HF_TOKEN_PATH, HF_HOME   Hugging Face
//	                   token, when Settings sets none
//
// The Hugging Face endpoint and token set in Settings (hf_endpoint in
// the settings file, the token in the file hf_token beside it, readable
// by this user only) win over the environment's, which are the fallback
// (Config.HubFor): the environment is what every Hugging Face tool
// shares, the settings what the person chose in NPU Chat.
//
//	FLM_MODEL_PATH     FastFlowLM's models folder
//	FLM_CONFIG_PATH    FastFlowLM's model_list.json
//	FLM_XCLBIN_PATH    FastFlowLM's xclbin folder
//	FLM_SERVE_PORT     FastFlowLM's server port
//
// Two variables are the CPU engine's, read where a model is loaded
// (engine/simd.Env, through engine.LoadOptions.Getenv), not here:
// NPUCHAT_SIMD (the fastest SIMD level to use) and NPUCHAT_CPU_CEILING
// (for tests: the CPU shows no level above this one).
package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/npuchat/npuchat/enginekind"
	"github.com/npuchat/npuchat/mcphost"
	"github.com/npuchat/npuchat/safefile"
)

// Defaults.
const (
	DefaultAddr       = "127.0.0.1:8001" // the model card's port
	DefaultModel      = "minicpm5:2b"
	DefaultKeepAlive  = 5 * time.Minute
	DefaultQueueSize  = 8
	DefaultHFEndpoint = "https://huggingface.co"
)

// Settings are what a person can change; they are saved in the settings
// file as JSON. A zero field means "the default".
type Settings struct {
	Addr      string `json:"addr,omitempty"`
	Model     string `json:"model,omitempty"`      // model served by default
	Engine    string `json:"engine,omitempty"`     // auto, npu, oflm, flm, cpu, remote
	RemoteURL string `json:"remote_url,omitempty"` // for the remote engine
	RemoteKey string `json:"remote_key,omitempty"` // Bearer key for the remote engine
	KeepAlive string `json:"keep_alive,omitempty"` // Go duration; "-1" or "-1s" keeps it loaded
	QueueSize int    `json:"queue_size,omitempty"` // waiting requests per backend
	Threads   int    `json:"threads,omitempty"`    // CPU engine threads; 0 = all cores
	// ContextLength is the CPU engine's context in tokens; 0 = automatic
	// (follows free memory). More than the model's own maximum is
	// clamped to it when the model loads. It applies at the next load.
	ContextLength int `json:"context_length,omitempty"`
	// Parallel is how many requests the CPU engine answers at once, their
	// tokens computed together; 0 = automatic (as many as the KV memory
	// holds, at most 4). It applies at the next load.
	Parallel int      `json:"parallel,omitempty"`
	APIKey   string   `json:"api_key,omitempty"` // require this Bearer key
	Origins  []string `json:"origins,omitempty"` // extra allowed browser origins
	// ServeAtStart switches the model on when the tray starts (default
	// off: the API listens and the model waits for a click).
	ServeAtStart bool   `json:"serve_at_start,omitempty"`
	FLMRoot      string `json:"flm_root,omitempty"` // overrides FastFlowLM discovery
	// HFEndpoint is Hugging Face's address or a mirror's, for downloads
	// ("" = HF_ENDPOINT, else https://huggingface.co: Config.HubFor).
	HFEndpoint string `json:"hf_endpoint,omitempty"`
	// HFToken is the Hugging Face token set in Settings ("" = the
	// environment's, Config.HubFor). It is not in the settings file but
	// in the token file beside it (TokenPath), readable by this user
	// only, and never printed or logged whole (Secret).
	HFToken Secret `json:"-"`
	// ModelsDir is where new installs of NPU Chat's own models go ("" =
	// the data folder's "models"); installed models stay where they are.
	ModelsDir string `json:"models_dir,omitempty"`

	// KVCacheType is how the CPU engine keeps keys and values
	// (KVCacheTypes): "" or "f32" (the default, whose answers are
	// llama.cpp's exactly), "f16" (half the memory) or "q8_0" (8 bits,
	// llama.cpp's q8_0 blocks: twice f16's tokens in the same memory).
	// It applies at the next load.
	KVCacheType string `json:"kv_cache_type,omitempty"`
	// Speculative is how the CPU engine decodes requests that do not
	// say (SpeculativeModes): "auto" guesses tokens ahead from the text
	// so far and checks them in one step (the same answer, sooner when
	// it repeats earlier text), "off" or "" decodes one token a step
	// (the default until the worst case is measured). It applies at
	// the next load.
	Speculative string `json:"speculative,omitempty"`
	// Chat holds the chat page's default generation settings (each
	// conversation may override them).
	Chat ChatDefaults `json:"chat,omitzero"`
	// AddedModels are the model files and folders the user added to the
	// model library (models/library keeps them; forgetting one removes
	// it here, never its files).
	AddedModels []AddedModel `json:"added_models,omitempty"`
	// MCPServers are the MCP servers whose tools the chat page may offer
	// (docs/mcp.md; mcphost.Check says what is valid). Each URL server's
	// bearer token is not in the settings file but in mcphost's token
	// file beside it (mcphost.TokenPath), readable by this user only,
	// and never printed or logged whole (mcphost.Secret).
	MCPServers []mcphost.Server `json:"mcp_servers,omitempty"`
}

// AddedModel is a GGUF file, Hugging Face folder or FastFlowLM folder
// the user added to the model library, served under Name.
type AddedModel struct {
	Name   string    `json:"name"`
	Path   string    `json:"path"`
	Format string    `json:"format,omitempty"`
	Added  time.Time `json:"added,omitzero"`
}

// ChatDefaults are the chat page's default generation settings; nil
// means the API's default.
type ChatDefaults struct {
	Temperature *float64 `json:"temperature,omitempty"`
	TopP        *float64 `json:"top_p,omitempty"`
	MaxTokens   *int     `json:"max_tokens,omitempty"`
}

// Config is the resolved configuration: settings merged with the
// environment, and the folders NPU Chat uses. Its own HFEndpoint,
// HFToken and ModelsDir (what is in effect) hide the settings' fields of
// those names (what was set): cfg.Settings.HFEndpoint is the setting.
type Config struct {
	Settings
	SettingsPath string // where Settings are saved
	DataDir      string // history database, NPU Chat's own models
	LogDir       string // rotating log files
	// ModelsDir is where installs put NPU Chat's own models at start
	// (the models_dir setting, or DefaultModelsDir); while NPU Chat runs
	// the store's setting decides (ModelsDirFor).
	ModelsDir string
	// DefaultModelsDir is the data folder's "models".
	DefaultModelsDir string
	KeepAliveDur     time.Duration // parsed KeepAlive; negative = never unload
	// HFEndpoint and HFToken are the hub at start (HubFor of the
	// settings file's values); while NPU Chat runs, HubFor of the
	// store's settings decides.
	HFEndpoint string
	HFToken    string
	// HFEndpointEnv, HFTokenEnv and HFTokenEnvFrom are the environment's
	// fallbacks (HF_ENDPOINT; the token and where it was found), used
	// when Settings sets none.
	HFEndpointEnv  string
	HFTokenEnv     string
	HFTokenEnvFrom string
	LogLevel       string
	// FLM holds the FastFlowLM environment overrides, empty when unset.
	FLMModelPath, FLMConfigPath, FLMXclbinPath, FLMServePort string
}

// Env reads environment variables; os.Getenv in the program, a map in tests.
type Env func(string) string

// MapEnv turns a map into an Env, for tests.
func MapEnv(m map[string]string) Env { return func(k string) string { return m[k] } }

// Load resolves the configuration for goos ("linux", "windows", ...) from
// the environment and the settings file. A missing settings file is not
// an error; a malformed one is, and names the file.
func Load(getenv Env, goos string) (*Config, error) {
	c := &Config{}
	home := homeOf(getenv, goos)
	c.SettingsPath = getenv("NPUCHAT_CONFIG")
	if c.SettingsPath == "" {
		c.SettingsPath = JoinOS(goos, configDir(getenv, goos, home), "npuchat", "settings.json")
	}
	if err := c.readSettings(); err != nil {
		return nil, err
	}
	c.DataDir = dataDirOf(getenv, goos, home)
	c.LogDir = LogDirOf(getenv, goos)
	c.DefaultModelsDir = JoinOS(goos, c.DataDir, "models")
	c.Settings.ModelsDir = strings.TrimSpace(c.Settings.ModelsDir)
	c.ModelsDir = c.ModelsDirFor(c.Settings)
	tok, err := readToken(TokenPath(c.SettingsPath))
	if err != nil {
		return nil, err
	}
	c.Settings.HFToken = tok
	if c.Settings.MCPServers, err = readMCPTokens(c.SettingsPath, c.Settings.MCPServers); err != nil {
		return nil, err
	}

	override := func(dst *string, key string) {
		if v := strings.TrimSpace(getenv(key)); v != "" {
			*dst = v
		}
	}
	override(&c.Addr, "NPUCHAT_ADDR")
	if v := getenv("NPUCHAT_API_KEY"); v != "" && strings.TrimSpace(v) == "" {
		return nil, errors.New("config: NPUCHAT_API_KEY is set but blank: it would lock every client out; set a real key or unset it")
	}
	if c.APIKey != "" && strings.TrimSpace(c.APIKey) == "" {
		return nil, fmt.Errorf("config: api_key in %s is blank: it would lock every client out; set a real key or remove it", c.SettingsPath)
	}
	c.APIKey = strings.TrimSpace(c.APIKey)
	override(&c.APIKey, "NPUCHAT_API_KEY")
	override(&c.Engine, "NPUCHAT_ENGINE")
	override(&c.RemoteURL, "NPUCHAT_REMOTE_URL")
	override(&c.KeepAlive, "NPUCHAT_KEEP_ALIVE")
	if v := getenv("NPUCHAT_ORIGINS"); v != "" {
		for _, o := range strings.Split(v, ",") {
			if o = strings.TrimSpace(o); o != "" {
				c.Origins = append(c.Origins, o)
			}
		}
	}
	c.LogLevel = getenv("NPUCHAT_LOG_LEVEL")
	if c.Addr == "" {
		c.Addr = DefaultAddr
	}
	c.Addr = CanonicalAddr(c.Addr)
	if c.Model == "" {
		c.Model = DefaultModel
	}
	if c.Engine == "" {
		c.Engine = string(enginekind.Auto)
	}
	if c.QueueSize <= 0 {
		c.QueueSize = DefaultQueueSize
	}
	if _, err := enginekind.ParseEngine(c.Engine); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	ka, err := ParseKeepAlive(c.KeepAlive)
	if err != nil {
		return nil, fmt.Errorf("config: keep_alive: %w", err)
	}
	c.KeepAliveDur = ka
	if err := CheckKVCacheType(c.KVCacheType); err != nil {
		return nil, fmt.Errorf("config: kv_cache_type in %s: %w", c.SettingsPath, err)
	}
	if err := CheckSpeculative(c.Speculative); err != nil {
		return nil, fmt.Errorf("config: speculative in %s: %w", c.SettingsPath, err)
	}
	if msg := checkAddedModels(c.AddedModels); msg != "" {
		// Every later change is checked whole: accepted here, it would
		// refuse each unrelated setting change with this message.
		return nil, fmt.Errorf("config: added_models in %s: %s", c.SettingsPath, msg)
	}

	c.Settings.HFEndpoint = strings.TrimRight(strings.TrimSpace(c.Settings.HFEndpoint), "/")
	c.HFEndpointEnv = strings.TrimRight(strings.TrimSpace(getenv("HF_ENDPOINT")), "/")
	c.HFTokenEnv, c.HFTokenEnvFrom = hfToken(getenv, goos, home)
	hub := c.HubFor(c.Settings)
	c.HFEndpoint, c.HFToken = hub.Endpoint, hub.Token.Reveal()
	c.FLMModelPath = getenv("FLM_MODEL_PATH")
	c.FLMConfigPath = getenv("FLM_CONFIG_PATH")
	c.FLMXclbinPath = getenv("FLM_XCLBIN_PATH")
	c.FLMServePort = getenv("FLM_SERVE_PORT")
	return c, nil
}

// homeOf is the user's home folder: HOME, or USERPROFILE on Windows.
func homeOf(getenv Env, goos string) string {
	if goos == "windows" && getenv("USERPROFILE") != "" {
		return getenv("USERPROFILE")
	}
	return getenv("HOME")
}

// dataDirOf is the data folder: NPUCHAT_DATA, else the platform's.
func dataDirOf(getenv Env, goos, home string) string {
	if d := getenv("NPUCHAT_DATA"); d != "" {
		return d
	}
	return dataDir(getenv, goos, home)
}

// LogDirOf is the log folder Load resolves, from the environment alone
// (the settings file does not change it): where a start-up error that
// keeps Load from succeeding (a malformed settings file) is written.
func LogDirOf(getenv Env, goos string) string {
	return JoinOS(goos, dataDirOf(getenv, goos, homeOf(getenv, goos)), "logs")
}

// ParseKeepAlive parses a keep-alive as Ollama does: a Go duration
// ("5m", "1h"), a number of seconds ("300"), or a negative value for
// "never unload"; and as KeepAliveWords writes it ("5 minutes",
// "1 hour 30 minutes", "never", "at once"), so that a field showing the
// words reads them back. Empty means the default; "0" means unload at
// once.
func ParseKeepAlive(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return DefaultKeepAlive, nil
	}
	if d, err := time.ParseDuration(s); err == nil {
		return d, nil
	}
	var secs float64
	if _, err := fmt.Sscanf(s, "%g", &secs); err == nil && fmt.Sprint(secs) == strings.TrimLeft(s, "+") {
		return time.Duration(secs * float64(time.Second)), nil
	}
	if d, ok := parseWords(s); ok {
		return d, nil
	}
	return 0, fmt.Errorf("%q is not a duration like 5m or a number of seconds", s)
}

// maxSettingsBytes bounds the settings file: it is a few hundred bytes.
const maxSettingsBytes = 1 << 20

func (c *Config) readSettings() error {
	b, err := ReadSettingsFile(c.SettingsPath)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("config: read settings: %w", err)
	}
	if len(bytes.TrimSpace(b)) == 0 {
		// An empty file (a save cut short, a "touch") is no settings,
		// not a reason not to start.
		return nil
	}
	if err := json.Unmarshal(b, &c.Settings); err != nil {
		return fmt.Errorf("config: settings file %s is not valid JSON (%v); fix or delete it", c.SettingsPath, err)
	}
	return nil
}

// ReadSettingsFile returns the settings file's bytes, refusing anything
// but a regular file of a settings file's size, without the UTF-8 byte
// order mark that Notepad's "UTF-8 with BOM" puts first (invisible, and
// not JSON). Everything that parses the settings file reads it here.
func ReadSettingsFile(path string) ([]byte, error) {
	b, err := safefile.ReadFile(path, maxSettingsBytes)
	return bytes.TrimPrefix(b, []byte("\ufeff")), err
}

// ReadSettings reads the settings file at path alone (no environment,
// no defaults); a missing file gives zero Settings. To change a setting,
// use UpdateSettings, which keeps the keys Settings does not know.
func ReadSettings(path string) (Settings, error) {
	c := &Config{SettingsPath: path}
	err := c.readSettings()
	return c.Settings, err
}

// Save writes the settings file atomically (a temporary file renamed into
// place), so that a crash never leaves half a file. It writes the whole
// file from Settings, dropping any key Settings does not know: to change
// settings in a file that exists, use UpdateSettings.
func (c *Config) Save() error {
	b, err := json.MarshalIndent(c.Settings, "", "  ")
	if err != nil {
		return err
	}
	return WriteSettingsFile(c.SettingsPath, append(b, '\n'))
}

// WriteSettingsFile replaces the settings file at path with data,
// atomically (WriteFileAtomic), readable by this user only. A settings
// file that is a symbolic link (kept with a person's dotfiles) is
// written where the link points, and stays a link.
func WriteSettingsFile(path string, data []byte) error {
	if st, err := os.Lstat(path); err == nil && st.Mode()&os.ModeSymlink != 0 {
		target, err := filepath.EvalSymlinks(path)
		if err != nil {
			return fmt.Errorf("write %s: it is a link to a file that cannot be reached (%w); fix or remove the link", path, err)
		}
		path = target
	}
	return WriteFileAtomic(path, data, 0o600)
}

// WriteFileAtomic is safefile.WriteAtomic: the old file or the new one,
// never a part.
func WriteFileAtomic(path string, data []byte, perm os.FileMode) error {
	return safefile.WriteAtomic(path, data, perm)
}

// IsLoopback reports whether addr (host:port) binds only the loopback
// interface: "localhost" in any case, names under ".localhost", and
// loopback IPs, including IPv4 shorthand such as "127.1".
func IsLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(CanonicalAddr(addr))
	if err != nil {
		return false
	}
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// CanonicalAddr writes a listening address the way the network stack
// reads it: the host lower-cased ("LOCALHOST" -> "localhost") and IPv4
// shorthand spelled out ("127.1" -> "127.0.0.1", as inet_aton reads it),
// which Go's resolver would otherwise look up as a name. Other addresses
// are returned unchanged.
func CanonicalAddr(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if ip := shorthandIPv4(host); ip != nil {
		return net.JoinHostPort(ip.String(), port)
	}
	if net.ParseIP(host) == nil {
		host = strings.TrimSuffix(strings.ToLower(host), ".")
	}
	return net.JoinHostPort(host, port)
}

// shorthandIPv4 parses the inet_aton forms a, a.b and a.b.c (decimal
// parts; the last one fills the remaining bytes), nil for anything else,
// including ordinary dotted quads (net.ParseIP reads those).
func shorthandIPv4(s string) net.IP {
	parts := strings.Split(s, ".")
	if len(parts) < 2 || len(parts) > 3 {
		return nil
	}
	var n []uint64
	for _, p := range parts {
		if p == "" || len(p) > 10 {
			return nil
		}
		var v uint64
		for _, c := range p {
			if c < '0' || c > '9' {
				return nil
			}
			v = v*10 + uint64(c-'0')
		}
		n = append(n, v)
	}
	ip := make(net.IP, 4)
	last := n[len(n)-1]
	for i, v := range n[:len(n)-1] {
		if v > 255 {
			return nil
		}
		ip[i] = byte(v)
	}
	rest := 4 - (len(n) - 1) // bytes the last part fills
	if last >= 1<<(8*rest) {
		return nil
	}
	for i := 3; i >= len(n)-1; i-- {
		ip[i] = byte(last)
		last >>= 8
	}
	return ip
}

func configDir(getenv Env, goos, home string) string {
	switch goos {
	case "windows":
		if v := getenv("APPDATA"); v != "" {
			return v
		}
		return JoinOS(goos, home, "AppData", "Roaming")
	case "darwin":
		return JoinOS(goos, home, "Library", "Application Support")
	default:
		if v := getenv("XDG_CONFIG_HOME"); v != "" {
			return v
		}
		return JoinOS(goos, home, ".config")
	}
}

func dataDir(getenv Env, goos, home string) string {
	switch goos {
	case "windows":
		if v := getenv("LOCALAPPDATA"); v != "" {
			return JoinOS(goos, v, "npuchat")
		}
		return JoinOS(goos, home, "AppData", "Local", "npuchat")
	case "darwin":
		return JoinOS(goos, home, "Library", "Application Support", "npuchat")
	default:
		if v := getenv("XDG_DATA_HOME"); v != "" {
			return JoinOS(goos, v, "npuchat")
		}
		return JoinOS(goos, home, ".local", "share", "npuchat")
	}
}

// hfToken finds the Hugging Face token of the environment as
// huggingface_hub does: HF_TOKEN, HUGGING_FACE_HUB_TOKEN, then the file
// $HF_TOKEN_PATH or $HF_HOME/token; and says where it found it.
func hfToken(getenv Env, goos, home string) (token, from string) {
	for _, k := range []string{"HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"} {
		if v := strings.TrimSpace(getenv(k)); v != "" {
			return v, k
		}
	}
	path := getenv("HF_TOKEN_PATH")
	if path == "" {
		hfHome := getenv("HF_HOME")
		if hfHome == "" {
			xdg := getenv("XDG_CACHE_HOME")
			if xdg == "" {
				xdg = JoinOS(goos, home, ".cache")
			}
			hfHome = JoinOS(goos, xdg, "huggingface")
		}
		path = JoinOS(goos, hfHome, "token")
	}
	b, err := safefile.ReadFile(path, maxTokenBytes)
	if err != nil || strings.TrimSpace(string(b)) == "" {
		return "", ""
	}
	return strings.TrimSpace(string(b)), path
}

// JoinOS joins path elements with the separator of goos, so that Windows
// paths can be computed (and tested) on Linux. A Windows drive root such
// as `C:\` keeps its backslash.
func JoinOS(goos string, elem ...string) string {
	if goos != "windows" {
		return filepath.Join(elem...)
	}
	var parts []string
	for i, e := range elem {
		e = strings.ReplaceAll(e, "/", `\`)
		if i > 0 {
			e = strings.Trim(e, `\`)
		} else if len(e) > 3 || !strings.HasSuffix(e, `:\`) {
			e = strings.TrimRight(e, `\`)
		}
		if e != "" {
			parts = append(parts, e)
		}
	}
	return strings.ReplaceAll(strings.Join(parts, `\`), `:\\`, `:\`)
}
