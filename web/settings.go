package web

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/npuchat/npuchat/config"
)

// PageSettings are the settings the page's settings view shows and
// changes (GET and PUT /api/settings).
type PageSettings struct {
	// Engine is auto, npu or cpu (remote when the server was started
	// with a remote engine).
	Engine string `json:"engine"`
	// KeepAlive is how long an idle model stays loaded ("5m", "-1" never).
	KeepAlive string `json:"keep_alive"`
	// Chat holds the default generation settings of conversations.
	Chat config.ChatDefaults `json:"chat"`
}

// SettingsStore keeps the settings the page changes: it shows the
// effective values (the settings file with the environment's
// overrides) and saves a change into the settings file, leaving every
// other setting in the file as it was. Apply (set by the app) puts a
// change into effect. Safe for concurrent use.
type SettingsStore struct {
	path string
	// Apply, when set, is called after a change is saved, with the
	// page's settings before and after.
	Apply func(ctx context.Context, before, after PageSettings) error

	mu        sync.Mutex // guards the fields below
	cur       PageSettings
	idle      time.Duration
	remoteURL string
}

// NewSettingsStore returns a store showing cfg's values and saving to
// cfg.SettingsPath. It keeps its own copy: cfg is not changed.
func NewSettingsStore(cfg *config.Config) *SettingsStore {
	p := PageSettings{Engine: cfg.Engine, KeepAlive: cfg.KeepAlive, Chat: cfg.Chat}
	if p.Engine == "" {
		p.Engine = "auto"
	}
	ka := cfg.KeepAliveDur
	if p.KeepAlive == "" {
		p.KeepAlive, ka = config.DefaultKeepAlive.String(), config.DefaultKeepAlive
	}
	return &SettingsStore{path: cfg.SettingsPath, cur: p, idle: ka, remoteURL: cfg.RemoteURL}
}

// Get returns the page's view of the settings.
func (s *SettingsStore) Get() PageSettings {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cur
}

// Set validates p, saves it to the settings file and applies it.
func (s *SettingsStore) Set(ctx context.Context, p PageSettings) (PageSettings, error) {
	switch p.Engine {
	case "auto", "npu", "cpu":
	case "remote":
		if s.remoteURL == "" {
			return PageSettings{}, badRequest("engine", "the remote engine needs a remote URL (npuchat serve --remote-url)")
		}
	default:
		return PageSettings{}, badRequest("engine", "engine must be auto, npu or cpu, got %q", p.Engine)
	}
	p.KeepAlive = strings.TrimSpace(p.KeepAlive)
	ka, err := config.ParseKeepAlive(p.KeepAlive)
	if err != nil || p.KeepAlive == "" {
		return PageSettings{}, badRequest("keep_alive", "keep-alive %q: write a duration such as 5m or 1h, or -1 to keep the model loaded", p.KeepAlive)
	}
	c := p.Chat
	if t := c.Temperature; t != nil && (*t < 0 || *t > 2) {
		return PageSettings{}, badRequest("temperature", "temperature must be between 0 and 2, got %g", *t)
	}
	if t := c.TopP; t != nil && (*t < 0 || *t > 1) {
		return PageSettings{}, badRequest("top_p", "top_p must be between 0 and 1, got %g", *t)
	}
	if m := c.MaxTokens; m != nil && (*m < 1 || *m > maxTokensLimit) {
		return PageSettings{}, badRequest("max_tokens", "max_tokens must be between 1 and %d, got %d", maxTokensLimit, *m)
	}
	s.mu.Lock()
	before := s.cur
	err = s.save(p)
	if err == nil {
		s.cur, s.idle = p, ka
	}
	s.mu.Unlock()
	if err != nil {
		return PageSettings{}, fmt.Errorf("save settings to %s: %w", s.path, err)
	}
	if s.Apply != nil {
		if err := s.Apply(ctx, before, p); err != nil {
			return p, fmt.Errorf("settings saved, but applying them failed: %w", err)
		}
	}
	return p, nil
}

// save writes p's fields into the settings file, keeping the others.
func (s *SettingsStore) save(p PageSettings) error {
	file := config.Config{SettingsPath: s.path}
	b, err := os.ReadFile(s.path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if len(b) > 0 {
		if err := json.Unmarshal(b, &file.Settings); err != nil {
			return fmt.Errorf("the settings file is not valid JSON (%v); fix or delete it", err)
		}
	}
	file.Engine, file.KeepAlive, file.Chat = p.Engine, p.KeepAlive, p.Chat
	return file.Save()
}

// keepAlive is the idle time for page requests.
func (s *SettingsStore) keepAlive() *time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	d := s.idle
	return &d
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
	writeJSON(w, http.StatusOK, s.opts.Settings.Get())
}

func (s *Server) putSettings(w http.ResponseWriter, r *http.Request) {
	if s.opts.Settings == nil {
		writeError(w, r, http.StatusNotFound, "not_found", "this server has no settings to change")
		return
	}
	in := s.opts.Settings.Get()
	if err := s.decode(w, r, &in); err != nil {
		s.fail(w, r, err)
		return
	}
	out, err := s.opts.Settings.Set(r.Context(), in)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
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
