package web

import (
	"context"
	"net/http"

	"github.com/npuchat/npuchat/models/library"
)

// Library is the model library the page shows (/api/library): the
// installed models, adding a model file the user already has, switching
// and removing. The app implements it; every path it takes is confined
// to the home and models folders (library.Roots).
type Library interface {
	List(ctx context.Context) []library.Model
	Add(ctx context.Context, path string) (library.Model, error)
	Use(ctx context.Context, name string) error
	Remove(ctx context.Context, name string) error
	Browse(dir string) (*library.Listing, error)
	// Offers is the catalog: what can be installed, and what can run it.
	Offers(ctx context.Context) []library.Offer
}

// libraryCatalog is GET /api/library/catalog: {"models": [...]}, NPU
// Chat's and FastFlowLM's models, each marked with what can run it.
func (s *Server) libraryCatalog(w http.ResponseWriter, r *http.Request) {
	if s.opts.Library == nil {
		http.NotFound(w, r)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"models": s.opts.Library.Offers(r.Context())})
}

// libraryList is GET /api/library: {"models": [...]}.
func (s *Server) libraryList(w http.ResponseWriter, r *http.Request) {
	if s.opts.Library == nil {
		http.NotFound(w, r)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"models": s.opts.Library.List(r.Context())})
}

// libraryAdd is POST /api/library {"path": "...", "use": true}: adds the
// file or folder, and switches to it when use is set.
func (s *Server) libraryAdd(w http.ResponseWriter, r *http.Request) {
	if s.opts.Library == nil {
		http.NotFound(w, r)
		return
	}
	var in struct {
		Path string `json:"path"`
		Use  bool   `json:"use"`
	}
	body, err := s.readSmall(w, r, maxSmallBody)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if err := unmarshalBody(body, &in); err != nil {
		s.fail(w, r, err)
		return
	}
	m, err := s.opts.Library.Add(r.Context(), in.Path)
	if err != nil {
		writeError(w, r, http.StatusBadRequest, "invalid_model_path", err.Error())
		return
	}
	if in.Use {
		if err := s.opts.Library.Use(r.Context(), m.Name); err != nil {
			s.fail(w, r, err)
			return
		}
	}
	writeJSON(w, http.StatusOK, m)
}

// libraryUse is POST /api/library/{name}/use: switches to the model
// without a restart (it loads in the background; the status says when
// it is on) and remembers it as the default.
func (s *Server) libraryUse(w http.ResponseWriter, r *http.Request) {
	if s.opts.Library == nil {
		http.NotFound(w, r)
		return
	}
	if err := s.opts.Library.Use(r.Context(), r.PathValue("name")); err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusAccepted, s.mgr.Status())
}

// OFLMPreparer is what a Library may also do: prepare a model's weights
// for the NPU through oflm in the background (progress in the model's
// "oflm" record of GET /api/library), then switch to them.
type OFLMPreparer interface {
	PrepareOFLM(name string) error
}

// libraryPrepareOFLM is POST /api/library/{name}/prepare-oflm: starts
// the preparation; 202 with the model list, 409 when it cannot start
// (oflm missing, another running, another model), with the reason.
func (s *Server) libraryPrepareOFLM(w http.ResponseWriter, r *http.Request) {
	p, ok := s.opts.Library.(OFLMPreparer)
	if !ok {
		http.NotFound(w, r)
		return
	}
	if err := p.PrepareOFLM(r.PathValue("name")); err != nil {
		writeError(w, r, http.StatusConflict, "cannot_prepare", err.Error())
		return
	}
	writeJSON(w, http.StatusAccepted, map[string]any{"models": s.opts.Library.List(r.Context())})
}

// libraryRemove is DELETE /api/library/{name}: forgets an added model
// (its files stay) or uninstalls NPU Chat's own.
func (s *Server) libraryRemove(w http.ResponseWriter, r *http.Request) {
	if s.opts.Library == nil {
		http.NotFound(w, r)
		return
	}
	if err := s.opts.Library.Remove(r.Context(), r.PathValue("name")); err != nil {
		writeError(w, r, http.StatusBadRequest, "cannot_remove", err.Error())
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// libraryBrowse is GET /api/library/browse?dir=...: the folders and
// model files of a folder inside the home and models folders.
func (s *Server) libraryBrowse(w http.ResponseWriter, r *http.Request) {
	if s.opts.Library == nil {
		http.NotFound(w, r)
		return
	}
	l, err := s.opts.Library.Browse(r.URL.Query().Get("dir"))
	if err != nil {
		writeError(w, r, http.StatusBadRequest, "invalid_model_path", err.Error())
		return
	}
	writeJSON(w, http.StatusOK, l)
}
