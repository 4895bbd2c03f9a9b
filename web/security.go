package web

import (
	"crypto/subtle"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"runtime/debug"
	"strings"
	"time"
)

// secure wraps h with, in order: panic recovery, request logging, the
// Host check (DNS rebinding), the Origin check and CORS, the page's
// session (session.go) on the page's own routes and the API key on the
// others, and the body size limit.
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
			msg := "Host " + clip(r.Host, 200) + " is not allowed (NPU Chat answers only to localhost names)"
			if r.Host == "" {
				msg = "a request without a Host header is not allowed (NPU Chat answers only to localhost names)"
			}
			writeError(sw, r, http.StatusForbidden, "forbidden_host", msg)
			return
		}
		if origin := r.Header.Get("Origin"); origin != "" {
			if !s.originAllowed(origin, r.Host) {
				writeError(sw, r, http.StatusForbidden, "forbidden_origin", "Origin "+clip(origin, 200)+" is not allowed; add it to NPUCHAT_ORIGINS to let that page use the API")
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
		// A page elsewhere can make the browser send a GET with no Origin
		// (an <img> or <script> tag); Fetch Metadata still says so.
		if r.Header.Get("Origin") == "" && r.Header.Get("Sec-Fetch-Site") == "cross-site" && needsKey(r.URL.Path) {
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

// hostAllowed: loopback names with any port, the listening address, and
// configured hosts. On a non-loopback address (which requires an API key)
// every Host is allowed: the key protects it and the machine's names are
// not known in advance.
func (s *Server) hostAllowed(host string) bool {
	if host == "" {
		return false
	}
	if !isLoopbackAddr(s.opts.Addr) {
		return true
	}
	h := hostOnly(host)
	if isLoopbackName(h) {
		return true
	}
	for _, a := range s.opts.Hosts {
		if strings.EqualFold(a, host) || strings.EqualFold(hostOnly(a), h) {
			return true
		}
	}
	return false
}

// originAllowed: http(s) origins on a loopback host, same-origin
// requests, and configured origins.
func (s *Server) originAllowed(origin, host string) bool {
	for _, o := range s.opts.Origins {
		if o == "*" || strings.EqualFold(strings.TrimRight(o, "/"), origin) {
			return true
		}
	}
	u, err := url.Parse(origin)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return false
	}
	if strings.EqualFold(u.Host, host) {
		return true
	}
	return isLoopbackName(u.Hostname())
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

// hostOnly strips a port from a Host header value.
func hostOnly(host string) string {
	if h, _, err := net.SplitHostPort(host); err == nil {
		return h
	}
	return strings.Trim(host, "[]")
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
