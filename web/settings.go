package web

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"

	"github.com/npuchat/npuchat/config"
	"github.com/npuchat/npuchat/service/backend"
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

// Settings are the app's settings as the page reads and changes them:
// the app's config.Store, through the app, which puts a change into
// effect (the keep-alive and the engine pushed into the service) before
// Update returns. The page's change and the tray's go the same way, so
// each sees the other's at once.
type Settings interface {
	Get() config.Settings
	Update(ctx context.Context, change func(*config.Settings) error) (config.Settings, error)
}

// pageSettings is the page's view of the settings: the defaults named
// (auto, 5m0s) rather than empty.
func pageSettings(c config.Settings) PageSettings {
	p := PageSettings{Engine: c.Engine, KeepAlive: strings.TrimSpace(c.KeepAlive), Chat: c.Chat}
	if p.Engine == "" {
		p.Engine = string(backend.Auto)
	}
	if p.KeepAlive == "" {
		p.KeepAlive = config.DefaultKeepAlive.String()
	}
	return p
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
	writeJSON(w, http.StatusOK, pageSettings(s.opts.Settings.Get()))
}

// putSettings changes the settings the body names (the others keep
// their values). A bad value is a 400 naming its field.
func (s *Server) putSettings(w http.ResponseWriter, r *http.Request) {
	if s.opts.Settings == nil {
		writeError(w, r, http.StatusNotFound, "not_found", "this server has no settings to change")
		return
	}
	in := pageSettings(s.opts.Settings.Get())
	if err := s.decode(w, r, maxSettingsBody, &in); err != nil {
		s.fail(w, r, err)
		return
	}
	if strings.TrimSpace(in.KeepAlive) == "" {
		s.fail(w, r, badRequest("keep_alive", "keep-alive is empty: write a duration such as 5m or 1h, or -1 to keep the model loaded"))
		return
	}
	out, err := s.opts.Settings.Update(r.Context(), func(c *config.Settings) error {
		c.Engine, c.KeepAlive, c.Chat = in.Engine, in.KeepAlive, in.Chat
		return nil
	})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, pageSettings(out))
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
