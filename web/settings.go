package web

import (
	"bytes"
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
// effective values (the settings file with the environment's and the
// flags' overrides) and saves a change into the settings file. Only the
// settings the change touched are written: a value that came from a
// flag or an environment variable and was left alone stays out of the
// file, and every key of the file it does not know (a newer NPU Chat's,
// the tray's) stays as it was. The file is replaced atomically (a
// temporary file renamed over it). The keep-alive is in effect at once
// for every request that names none (page chats and the API, see
// Server.defaultKeepAlive); Apply (set by the app) puts the rest of a
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
	p := PageSettings{Engine: cfg.Engine, KeepAlive: strings.TrimSpace(cfg.KeepAlive), Chat: cfg.Chat}
	if p.Engine == "" {
		p.Engine = "auto"
	}
	ka, err := config.ParseKeepAlive(p.KeepAlive)
	if err != nil {
		ka = cfg.KeepAliveDur
	}
	if p.KeepAlive == "" {
		p.KeepAlive = config.DefaultKeepAlive.String()
	}
	return &SettingsStore{path: cfg.SettingsPath, cur: p, idle: ka, remoteURL: cfg.RemoteURL}
}

// Get returns the page's view of the settings.
func (s *SettingsStore) Get() PageSettings {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cur
}

// Set validates p, saves what differs from the current settings to the
// settings file and applies it.
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
	if ka == s.idle {
		p.KeepAlive = before.KeepAlive // "5m" and "5m0s" are no change
	}
	err = s.save(before, p)
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

// Save writes settings changed outside the page (the tray's menu and
// settings window) with config.UpdateSettings, under the lock of the
// page's own changes, so that two changes at once never drop each
// other's keys; an engine changed there is the engine the page shows
// (and compares a later page change with).
func (s *SettingsStore) Save(changes ...config.Change) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := config.UpdateSettings(s.path, changes...); err != nil {
		return err
	}
	for _, c := range changes {
		if v, ok := c.Value.(string); ok && c.Key == "engine" {
			s.cur.Engine = v
		}
	}
	return nil
}

// save writes into the settings file the settings that differ between
// before and after, and nothing else: the file's other keys, known or
// not, keep their values (and their JSON). Nothing changed, nothing is
// written.
func (s *SettingsStore) save(before, after PageSettings) error {
	file := map[string]json.RawMessage{}
	b, err := config.ReadSettingsFile(s.path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if len(bytes.TrimSpace(b)) > 0 {
		if err := json.Unmarshal(b, &file); err != nil {
			return fmt.Errorf("the settings file is not a valid JSON object (%v); fix or delete it", err)
		}
	}
	changed := false
	set := func(m map[string]json.RawMessage, key string, v any) {
		changed = true
		if v == nil {
			delete(m, key)
			return
		}
		raw, _ := json.Marshal(v)
		m[key] = raw
	}
	if before.Engine != after.Engine {
		set(file, "engine", after.Engine)
	}
	if before.KeepAlive != after.KeepAlive {
		set(file, "keep_alive", after.KeepAlive)
	}
	chat := map[string]json.RawMessage{}
	if raw, ok := file["chat"]; ok && string(raw) != "null" {
		if err := json.Unmarshal(raw, &chat); err != nil {
			return fmt.Errorf("the settings file's \"chat\" is not a JSON object (%v); fix or delete it", err)
		}
	}
	chatChanged := false
	for _, f := range []struct {
		key           string
		before, after any
		same          bool
	}{
		{"temperature", ptrValue(before.Chat.Temperature), ptrValue(after.Chat.Temperature), samePtr(before.Chat.Temperature, after.Chat.Temperature)},
		{"top_p", ptrValue(before.Chat.TopP), ptrValue(after.Chat.TopP), samePtr(before.Chat.TopP, after.Chat.TopP)},
		{"max_tokens", ptrValue(before.Chat.MaxTokens), ptrValue(after.Chat.MaxTokens), samePtr(before.Chat.MaxTokens, after.Chat.MaxTokens)},
	} {
		if !f.same {
			set(chat, f.key, f.after)
			chatChanged = true
		}
	}
	if chatChanged {
		if len(chat) == 0 {
			delete(file, "chat")
		} else {
			set(file, "chat", chat)
		}
	}
	if !changed {
		return nil
	}
	out, err := json.MarshalIndent(file, "", "  ")
	if err != nil {
		return err
	}
	return config.WriteSettingsFile(s.path, append(out, '\n'))
}

// samePtr reports whether two optional settings hold the same value.
func samePtr[T comparable](a, b *T) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return *a == *b
}

// ptrValue is an optional setting's value, nil when unset.
func ptrValue[T any](p *T) any {
	if p == nil {
		return nil
	}
	return *p
}

// keepAlive is the idle time after a request that names none.
func (s *SettingsStore) keepAlive() *time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	d := s.idle
	return &d
}

// defaultKeepAlive is the keep-alive of a request that names none: the
// page's setting when this server has one (so that a change on the
// page applies to the API as well as to page chats), else the
// service's default (nil).
func (s *Server) defaultKeepAlive(requested *time.Duration) *time.Duration {
	if requested != nil || s.opts.Settings == nil {
		return requested
	}
	return s.opts.Settings.keepAlive()
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
	if err := s.decode(w, r, maxSettingsBody, &in); err != nil {
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
