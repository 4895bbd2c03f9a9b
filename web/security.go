package web

import (
	"crypto/subtle"
	"fmt"
	"mime"
	"net"
	"net/http"
	"net/url"
	"runtime/debug"
	"strconv"
	"strings"
	"time"
)

// secure wraps h with, in order: panic recovery, request logging, the
// Host check (DNS rebinding), the Origin check and CORS, on the page's
// own routes (pageRoute) the page's origin only and JSON bodies only
// (fetchSiteRefused, bodyTypeRefused), the page's session (session.go)
// on the routes with the person's data and the API key on the others,
// and the body size limit.
func (s *Server) secure(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				s.log.Error("handler panic", "method", r.Method, "path", r.URL.Path, "panic", v, "stack", string(debug.Stack()))
				if !sw.wrote {
					writeError(sw, r, http.StatusInternalServerError, "internal_error", "internal error; see the NPU Chat log")
				}
			}
			s.log.Debug("request", "method", r.Method, "path", r.URL.Path, "status", sw.status, "dur", time.Since(start))
		}()
		if !s.hostAllowed(r.Host) {
			msg := "Host " + clip(r.Host, 200) + " is not allowed (NPU Chat answers only to localhost names"
			if p := s.listenPort(); p != 0 && isLoopbackAddr(s.opts.Addr) {
				msg += " on its port, " + strconv.Itoa(p)
			}
			msg += ")"
			if r.Host == "" {
				msg = "a request without a Host header is not allowed (NPU Chat answers only to localhost names)"
			}
			writeError(sw, r, http.StatusForbidden, "forbidden_host", msg)
			return
		}
		page := pageRoute(r.URL.Path)
		if origin := r.Header.Get("Origin"); origin != "" {
			if !s.originAllowed(origin, r.Host, page) {
				msg := "Origin " + clip(origin, 200) + " is not allowed; add it to NPUCHAT_ORIGINS to let that page use the API"
				if page {
					msg = "Origin " + clip(origin, 200) + " is not allowed: the chat page's own routes answer only the page itself (" + pageOrigin(r.Host) + "); other pages may use the OpenAI and Ollama routes"
				}
				writeError(sw, r, http.StatusForbidden, "forbidden_origin", msg)
				return
			}
			hdr := sw.Header()
			hdr.Set("Access-Control-Allow-Origin", origin)
			hdr.Add("Vary", "Origin")
			if r.Method == http.MethodOptions {
				hdr.Set("Access-Control-Allow-Methods", "GET, POST, PUT, PATCH, DELETE, OPTIONS")
				hdr.Set("Access-Control-Allow-Headers", "Authorization, Content-Type, OpenAI-Organization, OpenAI-Project, X-Stainless-Lang, X-Stainless-Package-Version, X-Stainless-OS, X-Stainless-Arch, X-Stainless-Runtime, X-Stainless-Runtime-Version, X-Stainless-Retry-Count, X-Stainless-Timeout, X-Api-Key, Anthropic-Version, Anthropic-Beta, Anthropic-Dangerous-Direct-Browser-Access")
				hdr.Set("Access-Control-Max-Age", "600")
				sw.WriteHeader(http.StatusNoContent)
				return
			}
		}
		if page {
			if msg := s.fetchSiteRefused(r); msg != "" {
				writeError(sw, r, http.StatusForbidden, "forbidden_origin", msg)
				return
			}
			if msg := bodyTypeRefused(r); msg != "" {
				writeError(sw, r, http.StatusUnsupportedMediaType, "unsupported_media_type", msg)
				return
			}
		} else if r.Header.Get("Origin") == "" && r.Header.Get("Sec-Fetch-Site") == "cross-site" && needsKey(r.URL.Path) {
			// A page elsewhere can make the browser send a GET with no
			// Origin (an <img> or <script> tag); Fetch Metadata still
			// says so.
			writeError(sw, r, http.StatusForbidden, "forbidden_origin", "cross-site requests to the API are not allowed")
			return
		}
		if sessionRoute(r.URL.Path) {
			if !s.allowedPage(r) {
				msg := errNoSession.Error()
				if s.opts.APIKey != "" {
					sw.Header().Set("WWW-Authenticate", `Bearer realm="npuchat"`)
					msg += "; or send the API key (Authorization: Bearer <key>)"
				}
				writeError(sw, r, http.StatusUnauthorized, "session_required", msg)
				return
			}
		} else if s.opts.APIKey != "" && needsKey(r.URL.Path) && !s.keyOK(r) {
			sw.Header().Set("WWW-Authenticate", `Bearer realm="npuchat"`)
			writeError(sw, r, http.StatusUnauthorized, "invalid_api_key", "missing or wrong API key: send Authorization: Bearer <key> (or x-api-key: <key>)")
			return
		}
		if r.ContentLength > s.opts.MaxBodyBytes {
			// Refused before reading: with "Expect: 100-continue" the
			// client gets this instead of "100 Continue".
			sw.Header().Set("Connection", "close")
			writeError(sw, r, http.StatusRequestEntityTooLarge, "request_too_large", fmt.Sprintf("request body is larger than %d bytes", s.opts.MaxBodyBytes))
			return
		}
		if r.Body != nil {
			r.Body = http.MaxBytesReader(sw, r.Body, s.opts.MaxBodyBytes)
		}
		s.startBody(sw, r)
		h.ServeHTTP(sw, r)
	})
}

// needsKey reports whether a path is part of the API (the page itself is
// public; it asks for the key when the API wants one).
func needsKey(path string) bool {
	return strings.HasPrefix(path, "/v1/") || strings.HasPrefix(path, "/api/")
}

func (s *Server) keyOK(r *http.Request) bool {
	// The scheme is case-insensitive (RFC 9110, section 11.1).
	scheme, got, ok := strings.Cut(strings.TrimSpace(r.Header.Get("Authorization")), " ")
	ok = ok && strings.EqualFold(scheme, "Bearer")
	if k := r.Header.Get("X-Api-Key"); !ok && k != "" {
		// Anthropic's clients send the key as x-api-key.
		got, ok = k, true
	}
	if !ok && r.URL.Path == "/api/events" {
		// A browser's EventSource cannot send headers: the page passes
		// the key in the query for the event stream only.
		got, ok = r.URL.Query().Get("key"), true
	}
	if !ok {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(strings.TrimSpace(got)), []byte(s.opts.APIKey)) == 1
}

// hostAllowed guards against DNS rebinding: the Host must name this
// server exactly. On a loopback address that is a loopback name (or a
// configured host) with no port (the scheme's default) or a numeric port
// equal to the one the server listens on: "127.0.0.1:1.evil.example"
// is refused, not read as 127.0.0.1. A configured host without a port
// matches it on any port. On a non-loopback address (which requires an
// API key) every Host is allowed: the key protects it and the machine's
// names are not known in advance.
func (s *Server) hostAllowed(host string) bool {
	if host == "" {
		return false
	}
	if !isLoopbackAddr(s.opts.Addr) {
		return true
	}
	h, port, ok := splitHost(host)
	if !ok {
		return false
	}
	for _, a := range s.opts.Hosts {
		if ah, ap, ok := splitHost(a); ok && strings.EqualFold(ah, h) && (ap == 0 || ap == port) {
			return true
		}
	}
	if lp := s.listenPort(); port != 0 && lp != 0 && port != lp {
		return false
	}
	return isLoopbackName(h)
}

// splitHost parses a Host header value (RFC 9110, section 7.2: a name,
// an IPv4 address or a bracketed IPv6 address, then an optional
// ":port") into its host and its port (0 when there is none). ok is
// false for anything else: a port that is not a number from 1 to 65535,
// an unbracketed IPv6 address, characters no host name has.
func splitHost(v string) (host string, port int, ok bool) {
	rest := v
	if strings.HasPrefix(v, "[") {
		end := strings.IndexByte(v, ']')
		if end < 0 {
			return "", 0, false
		}
		host, rest = v[1:end], v[end+1:]
		if ip := net.ParseIP(host); ip == nil || !strings.Contains(host, ":") {
			return "", 0, false
		}
	} else {
		i := strings.IndexByte(v, ':')
		if i < 0 {
			i = len(v)
		}
		host, rest = v[:i], v[i:]
		if host == "" {
			return "", 0, false
		}
		for _, c := range host {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '-' || c == '_') {
				return "", 0, false
			}
		}
	}
	if rest == "" || rest == ":" {
		return host, 0, true
	}
	digits := rest[1:]
	if rest[0] != ':' || len(digits) > 5 {
		return "", 0, false
	}
	for _, c := range digits {
		if c < '0' || c > '9' {
			return "", 0, false
		}
	}
	port, err := strconv.Atoi(digits)
	if err != nil || port < 1 || port > 65535 {
		return "", 0, false
	}
	return host, port, true
}

// originAllowed: the configured origins; the request's own origin (the
// page, with the Host that passed hostAllowed); and, on the API's routes
// only (not page, the chat page's own routes), http(s) origins on any
// loopback host and port, as Ollama allows them.
func (s *Server) originAllowed(origin, host string, page bool) bool {
	if s.configuredOrigin(origin, page) {
		return true
	}
	u, err := url.Parse(origin)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.Path != "" || u.RawQuery != "" {
		return false
	}
	if strings.EqualFold(u.Host, host) && (u.Scheme == "http" || !isLoopbackName(u.Hostname())) {
		// The same origin. Over https only through a reverse proxy's
		// name: NPU Chat itself serves http on the loopback port.
		return true
	}
	return !page && isLoopbackName(u.Hostname())
}

// configuredOrigin reports whether origin is one of Options.Origins.
// "*" (every origin) opens the API's routes only: the page's own routes
// (page) answer only origins named one by one.
func (s *Server) configuredOrigin(origin string, page bool) bool {
	for _, o := range s.opts.Origins {
		if (o == "*" && !page) || strings.EqualFold(strings.TrimRight(o, "/"), origin) {
			return true
		}
	}
	return false
}

// pageOrigin is the chat page's origin for a request to host.
func pageOrigin(host string) string {
	return "http://" + host
}

// pageRoute reports whether path is one of the page's own API routes:
// every /api/ route but the Ollama-compatible ones, which stay open to
// other local pages (as Ollama's are). Page routes answer only the page
// itself: its own origin, JSON bodies.
func pageRoute(path string) bool {
	if !strings.HasPrefix(path, "/api/") {
		return false
	}
	switch path {
	case "/api/chat", "/api/generate", "/api/embed", "/api/embeddings", "/api/tags", "/api/ps", "/api/show", "/api/version":
		return false
	}
	return true
}

// changesState reports whether a method may change something (a browser
// sends Origin with every one of these).
func changesState(method string) bool {
	return method != http.MethodGet && method != http.MethodHead && method != http.MethodOptions
}

// fetchSiteRefused says why a request to a page route is refused by its
// Fetch Metadata, or "". Another loopback port is the same site to a
// browser, so the SameSite=Strict cookie goes along with a request from
// http://127.0.0.1:9999: only "same-origin" (and, for a GET the person
// typed or bookmarked, "none") may use the page's routes; "same-site" and
// "cross-site" only from a configured origin. A request with neither
// Origin nor Sec-Fetch-Site is not from a browser (curl, the tray, a
// script): the session or the API key decides.
func (s *Server) fetchSiteRefused(r *http.Request) string {
	site := r.Header.Get("Sec-Fetch-Site")
	switch site {
	case "", "same-origin":
		return ""
	case "none":
		if !changesState(r.Method) {
			return ""
		}
	case "same-site", "cross-site":
		if o := r.Header.Get("Origin"); o != "" && s.configuredOrigin(o, true) {
			return ""
		}
	}
	return fmt.Sprintf("a request from another page (Sec-Fetch-Site: %s) may not use the chat page's own routes; open the chat from NPU Chat's tray icon or the link it printed", clip(site, 40))
}

// bodyTypeRefused says why a request to a page route is refused by its
// Content-Type, or "". A body a request changes something with must be
// JSON (the PDF route: a PDF): a page elsewhere can send a form or
// text/plain without asking the server first (no CORS preflight), but not
// these types. A request without a body needs no Content-Type.
func bodyTypeRefused(r *http.Request) string {
	if !changesState(r.Method) {
		return ""
	}
	ct := r.Header.Get("Content-Type")
	if ct == "" && r.ContentLength == 0 {
		return ""
	}
	want := "application/json"
	if r.URL.Path == "/api/attachments/pdf" {
		want = "application/pdf"
	}
	if mt, _, err := mime.ParseMediaType(ct); err == nil && mt == want {
		return ""
	}
	got := "no Content-Type"
	if ct != "" {
		got = "Content-Type " + clip(ct, 100)
	}
	return fmt.Sprintf("%s %s takes a body of type %s, not %s: send it with Content-Type: %s", r.Method, r.URL.Path, want, got, want)
}

func isLoopbackName(h string) bool {
	h = strings.TrimSuffix(strings.ToLower(h), ".")
	if h == "localhost" || strings.HasSuffix(h, ".localhost") {
		return true
	}
	ip := net.ParseIP(strings.Trim(h, "[]"))
	return ip != nil && ip.IsLoopback()
}

func isLoopbackAddr(addr string) bool {
	h, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	return isLoopbackName(h)
}

// statusWriter records the status for the log and whether anything was
// written, and passes Flush through for streaming.
type statusWriter struct {
	http.ResponseWriter
	status int
	wrote  bool
}

func (w *statusWriter) WriteHeader(code int) {
	if !w.wrote {
		w.status, w.wrote = code, true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if !w.wrote {
		w.status, w.wrote = http.StatusOK, true
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the real writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
