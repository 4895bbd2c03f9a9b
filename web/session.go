package web

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/npuchat/npuchat/safefile"
)

// The chat history, its export, the settings, the log, the library and
// installs belong to the person at the desktop, not to every local
// account that can reach the loopback port. The tray ("Open the chat", a
// second launch) and `npuchat serve` (the link it prints) open the page
// through a one-time link, /open?t=TOKEN, that sets a session cookie
// named for the port; those routes (sessionRoute) then need that
// cookie, or the API key when one is set. Which origins and bodies the
// page's routes take is security.go's (pageRoute).
// The OpenAI, Ollama and Anthropic routes stay as they were: open on
// loopback unless a key is set.
//
// Only SHA-256 hashes of links and sessions are kept, and sessions are
// saved (as hashes, 0600) in Sessions' file so that a restart (a login,
// an update) does not lock the browser out.

const (
	// SessionCookiePrefix begins the session cookie's name, which ends
	// with the server's port (npuchat_session_8001): cookies are shared
	// by every port of a host, and two NPU Chats on two ports would
	// otherwise replace each other's session.
	SessionCookiePrefix = "npuchat_session_"
	// sessionAge is how long a session lasts.
	sessionAge = 30 * 24 * time.Hour
	// maxLinks and maxSessions bound what is kept; the oldest go first.
	maxLinks    = 32
	maxSessions = 64
	// LinkTTL is how long a link the tray opens stays usable.
	LinkTTL = 5 * time.Minute
)

// Sessions are the one-time links and the sessions they started. The
// zero value is not usable: make one with NewSessions.
type Sessions struct {
	file string
	now  func() time.Time

	mu       sync.Mutex
	links    map[string]time.Time // hash → expiry (zero: until used)
	sessions map[string]time.Time // hash → start
}

// NewSessions returns the sessions saved in file (none when the file is
// missing or unreadable: the person opens the page from the tray again);
// file "" keeps them in memory only. now is the clock (time.Now when
// nil).
func NewSessions(file string, now func() time.Time) *Sessions {
	if now == nil {
		now = time.Now
	}
	s := &Sessions{file: file, now: now, links: map[string]time.Time{}, sessions: map[string]time.Time{}}
	if file == "" {
		return s
	}
	b, err := safefile.ReadFile(file, maxSessionsBytes)
	if err != nil {
		return s
	}
	var saved map[string]time.Time
	if json.Unmarshal(b, &saved) != nil {
		return s
	}
	for h, t := range saved {
		if len(h) == 64 && now().Sub(t) < sessionAge {
			s.sessions[h] = t
		}
	}
	return s
}

func newToken() string {
	b := make([]byte, 32)
	rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

func hashToken(t string) string {
	h := sha256.Sum256([]byte(t))
	return hex.EncodeToString(h[:])
}

// NewLink makes a one-time link token, usable for ttl (0: until used).
func (s *Sessions) NewLink(ttl time.Duration) string {
	t := newToken()
	s.mu.Lock()
	defer s.mu.Unlock()
	var exp time.Time
	if ttl > 0 {
		exp = s.now().Add(ttl)
	}
	s.links[hashToken(t)] = exp
	for len(s.links) > maxLinks {
		delete(s.links, oldest(s.links, true))
	}
	return t
}

// redeem uses a link token up and returns a new session's cookie value.
func (s *Sessions) redeem(token string) (string, bool) {
	if token == "" || len(token) > 128 {
		return "", false
	}
	h := hashToken(token)
	s.mu.Lock()
	exp, ok := s.links[h]
	delete(s.links, h)
	if !ok || (!exp.IsZero() && s.now().After(exp)) {
		s.mu.Unlock()
		return "", false
	}
	c := newToken()
	s.sessions[hashToken(c)] = s.now()
	for len(s.sessions) > maxSessions {
		delete(s.sessions, oldest(s.sessions, false))
	}
	saved := s.snapshot()
	s.mu.Unlock()
	s.save(saved)
	return c, true
}

// valid reports whether a cookie value is a live session.
func (s *Sessions) valid(cookie string) bool {
	if cookie == "" || len(cookie) > 128 {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.sessions[hashToken(cookie)]
	return ok && s.now().Sub(t) < sessionAge
}

// oldest is the key with the earliest time (zero times are the oldest
// links only when zeroFirst).
func oldest(m map[string]time.Time, zeroFirst bool) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		a, b := m[keys[i]], m[keys[j]]
		if a.IsZero() != b.IsZero() {
			return a.IsZero() == zeroFirst
		}
		return a.Before(b)
	})
	return keys[0]
}

func (s *Sessions) snapshot() map[string]time.Time {
	out := make(map[string]time.Time, len(s.sessions))
	for k, v := range s.sessions {
		out[k] = v
	}
	return out
}

// save writes the session hashes, readable by this user only. A failure
// keeps them in memory: the page works until NPU Chat restarts.
func (s *Sessions) save(m map[string]time.Time) error {
	if s.file == "" {
		return nil
	}
	b, _ := json.Marshal(m)
	if err := os.MkdirAll(filepath.Dir(s.file), 0o700); err != nil {
		return err
	}
	tmp := s.file + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("save the page's sessions: %w", err)
	}
	return os.Rename(tmp, s.file)
}

// OpenLink returns a one-time link, as a path ("/open?t=…"), that opens
// the chat page in a browser with a session; ttl bounds how long it
// works (0: until used, for the link `npuchat serve` prints).
func (s *Server) OpenLink(ttl time.Duration) string {
	return "/open?t=" + s.sessions.NewLink(ttl)
}

// openLink answers GET /open?t=TOKEN: a live link sets the session
// cookie and goes on to the page (next, a path on this server, or /); a
// used or expired one goes to the page, which says how to get in.
func (s *Server) openLink(w http.ResponseWriter, r *http.Request) {
	next := r.URL.Query().Get("next")
	if !localPath(next) {
		next = "/"
	}
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Referrer-Policy", "no-referrer")
	if c, ok := s.sessions.redeem(r.URL.Query().Get("t")); ok {
		http.SetCookie(w, &http.Cookie{
			Name: s.cookieName(), Value: c, Path: "/",
			MaxAge: int(sessionAge / time.Second), HttpOnly: true, SameSite: http.SameSiteStrictMode,
		})
	} else if !s.sessionOK(r) {
		s.log.Info("a used or expired link to the chat page was opened")
		next = "/?link=used"
	}
	http.Redirect(w, r, next, http.StatusSeeOther)
}

// cookieName is the session cookie's name on this server's port.
func (s *Server) cookieName() string {
	return SessionCookiePrefix + strconv.Itoa(s.listenPort())
}

// localPath reports whether next is a path on this server that a
// redirect may go to: it begins with one "/", and has no backslash, no
// control character (a browser drops a tab or a line break in a URL, so
// "/\t/evil.example" is "//evil.example" to it), no scheme and no host.
func localPath(next string) bool {
	if len(next) == 0 || len(next) > 256 || next[0] != '/' || strings.HasPrefix(next, "//") {
		return false
	}
	for i := 0; i < len(next); i++ {
		if c := next[i]; c < 0x20 || c == 0x7f || c == '\\' {
			return false
		}
	}
	u, err := url.Parse(next)
	return err == nil && u.Scheme == "" && u.Host == "" && u.User == nil && u.Opaque == ""
}

// sessionOK reports whether the request carries a live session cookie.
func (s *Server) sessionOK(r *http.Request) bool {
	c, err := r.Cookie(s.cookieName())
	return err == nil && s.sessions.valid(c.Value)
}

// sessionRoute reports whether path is one of the routes with the
// person's data or that change their machine: the history, its export,
// the settings, the log, the library, attachments and installs (a
// multi-gigabyte download, then the model switched on).
func sessionRoute(path string) bool {
	return path == "/api/history" || path == "/api/conversations" || strings.HasPrefix(path, "/api/conversations/") ||
		path == "/api/settings" || strings.HasPrefix(path, "/api/settings/") || path == "/api/logs" || path == "/api/library" || strings.HasPrefix(path, "/api/library/") ||
		path == "/api/attachments/pdf" || strings.HasPrefix(path, "/api/models/")
}

// errNoSession is why a page route was refused.
var errNoSession = errors.New("the chat history and settings are only for the person at this computer: " +
	"open the chat from NPU Chat's tray icon (Open the chat), or start NPU Chat again, and it opens a fresh link; " +
	"without a tray, open the link NPU Chat printed when it started")

// allowedPage reports whether a request may use a page route: with the
// session cookie, or with the API key when one is set.
func (s *Server) allowedPage(r *http.Request) bool {
	if s.sessionOK(r) {
		return true
	}
	return s.opts.APIKey != "" && s.keyOK(r)
}

// maxSessionsBytes caps the sessions file (a line per session, 30 days of
// them): a FIFO, device or huge file there is read as no sessions.
const maxSessionsBytes = 4 << 20
