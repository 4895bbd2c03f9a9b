package web

import (
	"embed"
	"errors"
	"io/fs"
	"net/http"

	"github.com/npuchat/npuchat/config"
	"github.com/npuchat/npuchat/history"
	"github.com/npuchat/npuchat/web/pages"
)

// static holds the page's script, styles and icon; nothing is loaded
// from anywhere else.
//
//go:embed static
var static embed.FS

// pageCSP allows the page to load only its own files and talk only to
// this server: no inline script or style, no frames, nothing from
// another origin.
const pageCSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
	"font-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

func pageHeaders(h http.Header) {
	h.Set("Content-Security-Policy", pageCSP)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
}

func (s *Server) staticFiles() http.Handler {
	sub, _ := fs.Sub(static, "static")
	files := http.StripPrefix("/static/", http.FileServerFS(sub))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		pageHeaders(w.Header())
		w.Header().Set("Cache-Control", "no-cache")
		files.ServeHTTP(w, r)
	})
}

// page renders the chat page: GET / (a new chat) and GET /c/{id} (a
// conversation). Without the page's session (session.go) the page is
// rendered with no history and data-locked set: the script says how to
// get in, or fetches everything with the API key when there is one; the
// conversation's id (from the address the browser already has) goes in
// data-conversation for the script.
func (s *Server) page(w http.ResponseWriter, r *http.Request) {
	p := pages.Page{Version: s.opts.Version, Model: s.mgr.Status().Model}
	if p.Model == "" {
		p.Model = config.DefaultModel
	}
	status := http.StatusOK
	mine := s.sessionOK(r)
	if !mine && r.PathValue("id") != "" {
		// The script loads it with the key (or says it is not there).
		if id, err := pathID(r, "id"); err == nil {
			p.Open = id
		}
	}
	if mine {
		if st, err := s.store(r.Context()); err != nil {
			p.HistoryProblem = historyError(err).Error()
		} else {
			p.HistoryProblem = st.Notice()
			if list, err := st.List(r.Context(), 0); err == nil {
				p.Conversations = list
			}
			if r.PathValue("id") != "" {
				id, err := pathID(r, "id")
				if err == nil {
					p.Current, err = st.Load(r.Context(), id)
				}
				if err != nil {
					if errors.Is(err, history.ErrNotFound) {
						status = http.StatusNotFound
					}
					if errors.Is(err, history.ErrNotFound) {
						p.Missing, _ = pathID(r, "id")
					} else {
						p.HistoryProblem = "That conversation could not be opened (" + cause(err) + "); here is a new chat."
					}
					p.Current = nil
				}
			}
		}
	}
	pageHeaders(w.Header())
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	if err := pages.App(p).Render(r.Context(), w); err != nil {
		s.log.Warn("render page", "err", err)
	}
}
