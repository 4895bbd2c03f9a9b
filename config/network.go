package config

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/npuchat/npuchat/safefile"
	"github.com/npuchat/npuchat/secret"
)

// Secret is a value that is never shown or logged whole (package secret).
type Secret = secret.Secret

// TokenFileName is the file beside the settings file that holds the
// Hugging Face token set in Settings (readable by this user only), kept
// out of settings.json so that the settings file can be shown, shared
// or kept with dotfiles without it.
const TokenFileName = "hf_token"

// TokenPath is the token file for a settings file.
func TokenPath(settingsPath string) string {
	return filepath.Join(filepath.Dir(settingsPath), TokenFileName)
}

// maxTokenBytes bounds the token file (a Hugging Face token is 37 bytes).
const maxTokenBytes = 4096

// readToken reads the token file; none is no token.
func readToken(path string) (Secret, error) {
	b, err := safefile.ReadFile(path, maxTokenBytes)
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("config: read the Hugging Face token file: %w; fix or delete it", err)
	}
	return Secret(strings.TrimSpace(string(b))), nil
}

// writeToken replaces the token file (user-only permissions: 0600, and
// on Windows the user's own profile folder), or removes it for none.
func writeToken(path string, tok Secret) error {
	if tok == "" {
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("config: remove the Hugging Face token file: %w", err)
		}
		return nil
	}
	if err := WriteFileAtomic(path, []byte(tok.Reveal()+"\n"), 0o600); err != nil {
		return fmt.Errorf("config: save the Hugging Face token: %w", err)
	}
	return nil
}

// Hub is where model downloads go and the token they send, with where
// each came from.
type Hub struct {
	// Endpoint is https://huggingface.co or a mirror, without a final slash.
	Endpoint string
	// EndpointFrom is "settings", "HF_ENDPOINT" or "default".
	EndpointFrom string
	Token        Secret
	// TokenFrom is "settings", "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", the
	// path of huggingface_hub's token file, or "" for no token.
	TokenFrom string
}

// HubFor is the hub that downloads use with settings s: the endpoint and
// token set in Settings win; without them, the environment this run
// started with (HF_ENDPOINT; HF_TOKEN, HUGGING_FACE_HUB_TOKEN or
// huggingface_hub's token file, as huggingface_hub reads them) is the
// fallback, and then https://huggingface.co without a token. The
// settings win because they are what the person chose in this app; the
// environment is what every Hugging Face tool shares.
func (c *Config) HubFor(s Settings) Hub {
	h := Hub{Endpoint: s.HFEndpoint, EndpointFrom: "settings", Token: s.HFToken, TokenFrom: "settings"}
	if h.Endpoint == "" {
		h.Endpoint, h.EndpointFrom = c.HFEndpointEnv, "HF_ENDPOINT"
		if h.Endpoint == "" {
			h.Endpoint, h.EndpointFrom = DefaultHFEndpoint, "default"
		}
	}
	if h.Token == "" {
		h.Token, h.TokenFrom = Secret(c.HFTokenEnv), c.HFTokenEnvFrom
	}
	return h
}

// ModelsDirFor is the folder new installs of NPU Chat's own models go
// to with settings s: the models_dir setting, else the data folder's
// "models".
func (c *Config) ModelsDirFor(s Settings) string {
	if s.ModelsDir != "" {
		return s.ModelsDir
	}
	if c.DefaultModelsDir != "" {
		return c.DefaultModelsDir
	}
	return c.ModelsDir
}

// checkEndpoint refuses an endpoint that is not an http(s) address of a
// server (a path prefix is allowed, as mirrors use one).
func checkEndpoint(s string) string {
	if s == "" {
		return ""
	}
	u, err := url.Parse(s)
	switch {
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		return fmt.Sprintf("write the address of Hugging Face or a mirror, starting with https:// (for example https://hf-mirror.com), got %q", s)
	case u.User != nil:
		return "the address holds a user name or password: put the token in the token field instead"
	case u.RawQuery != "" || u.Fragment != "":
		return fmt.Sprintf("write the address without ?query or #fragment, got %q", s)
	}
	return ""
}

// checkToken refuses a token that cannot be one (never quoting it).
func checkToken(tok Secret) string {
	s := tok.Reveal()
	if len(s) > 512 {
		return fmt.Sprintf("a Hugging Face token is a few dozen characters; this is %d: paste the token alone", len(s))
	}
	for _, r := range s {
		if unicode.IsSpace(r) || unicode.IsControl(r) || r > unicode.MaxASCII {
			return "a Hugging Face token has no spaces, line breaks or accented letters: paste the token alone (it starts with hf_)"
		}
	}
	return ""
}

// checkModelsDir refuses a models folder that is not an absolute path
// or is a file.
func checkModelsDir(dir string) string {
	if dir == "" {
		return ""
	}
	if !filepath.IsAbs(dir) {
		return fmt.Sprintf("write the whole path of a folder (for example %s), got %q", filepath.Join(string(filepath.Separator)+"home", "me", "models"), dir)
	}
	if fi, err := os.Stat(dir); err == nil && !fi.IsDir() {
		return fmt.Sprintf("%s is a file, not a folder", dir)
	}
	return ""
}

// checkModelsDirExists refuses a new models folder (a whole path) that
// is not there: NPU Chat does not make one, so a typo cannot scatter
// models into a folder nobody meant. Other faults are checkModelsDir's.
func checkModelsDirExists(dir string) string {
	if dir == "" || !filepath.IsAbs(dir) {
		return ""
	}
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		return fmt.Sprintf("there is no folder %s: create it first, or choose a folder that exists", dir)
	}
	return ""
}

// checkAddr refuses a listening address that is not host:port with a
// port number, and one reachable from other devices without an API key.
func checkAddr(addr, apiKey string) (field, msg string) {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "addr", fmt.Sprintf("write host:port, such as 127.0.0.1:8001, got %q", addr)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return "port", fmt.Sprintf("the port is a number from 1 to 65535, got %q", port)
	}
	if !IsLoopback(addr) && strings.TrimSpace(apiKey) == "" {
		return "api_key", "reachable from other devices needs an API key, so that only those who have it can use the model: set one (Generate makes one)"
	}
	if apiKey != "" && strings.TrimSpace(apiKey) == "" {
		return "api_key", "the API key is blank: it would lock every client out; write a real key or leave it empty"
	}
	return "", ""
}

// KeepAliveWords says a keep-alive for a person: "5 minutes",
// "1 hour 30 minutes", "never (the model stays loaded)", "at once".
func KeepAliveWords(d time.Duration) string {
	switch {
	case d < 0:
		return "never (the model stays loaded)"
	case d < time.Second:
		return "at once"
	}
	var parts []string
	unit := func(n int64, one string) {
		switch {
		case n == 1:
			parts = append(parts, "1 "+one)
		case n > 1:
			parts = append(parts, strconv.FormatInt(n, 10)+" "+one+"s")
		}
	}
	s := int64(d / time.Second)
	unit(s/86400, "day")
	unit(s%86400/3600, "hour")
	unit(s%3600/60, "minute")
	unit(s%60, "second")
	return strings.Join(parts, " ")
}

// parseWords reads a duration as KeepAliveWords writes it: numbers
// each followed by a unit (day, hour, minute, second; singular or
// plural, "min" and "sec" too), or "never…" and "at once".
func parseWords(s string) (time.Duration, bool) {
	s = strings.ToLower(strings.TrimSpace(s))
	switch {
	case strings.HasPrefix(s, "never"):
		return -1, true
	case s == "at once":
		return 0, true
	}
	units := map[string]time.Duration{"day": 24 * time.Hour, "hour": time.Hour, "hr": time.Hour, "minute": time.Minute, "min": time.Minute, "second": time.Second, "sec": time.Second}
	f := strings.Fields(strings.ReplaceAll(s, ",", " "))
	if len(f) == 0 || len(f)%2 != 0 {
		return 0, false
	}
	var d time.Duration
	for i := 0; i < len(f); i += 2 {
		n, err := strconv.ParseFloat(f[i], 64)
		u, ok := units[strings.TrimSuffix(f[i+1], "s")]
		if err != nil || !ok || n < 0 {
			return 0, false
		}
		d += time.Duration(n * float64(u))
	}
	return d, true
}
