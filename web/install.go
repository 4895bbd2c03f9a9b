package web

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/npuchat/npuchat/models/catalog"
	"github.com/npuchat/npuchat/service/install"
)

// The install API: POST /api/models/{name}/install starts installing a
// catalog model (the same installer `npuchat install` runs; one install
// at a time), GET reports its progress, DELETE cancels it; starting it
// again resumes. Progress also goes out on /api/events as "install"
// events.

func (s *Server) installRunner(w http.ResponseWriter, r *http.Request) *install.Runner {
	if s.opts.Installs == nil {
		writeError(w, r, http.StatusNotFound, "not_found", "this server was started without an installer, so it cannot install models")
		return nil
	}
	return s.opts.Installs
}

// installStatus is GET /api/models/{name}/install: the progress of that
// model's install. A catalog model that is not the one installing (or
// last installed) is idle; a name the catalog does not know is a 404
// that lists the names it knows.
func (s *Server) installStatus(w http.ResponseWriter, r *http.Request) {
	run := s.installRunner(w, r)
	if run == nil {
		return
	}
	name := strings.TrimSpace(r.PathValue("name"))
	st := run.Status()
	if st.Model != "" && strings.EqualFold(st.Model, name) {
		writeJSON(w, http.StatusOK, st)
		return
	}
	cat, err := catalog.Load()
	if err != nil {
		s.fail(w, r, fmt.Errorf("install status of %s: %w", name, err))
		return
	}
	m, err := cat.Lookup(name)
	if name == "" || err != nil {
		writeError(w, r, http.StatusNotFound, "model_not_found",
			fmt.Sprintf("%q is not a model NPU Chat can install; installable models: %s", name, strings.Join(cat.Names(), ", ")))
		return
	}
	if cur, err := cat.Lookup(st.Model); st.Model != "" && err == nil && cur.Name == m.Name {
		writeJSON(w, http.StatusOK, st) // the same model under another of its names
		return
	}
	writeJSON(w, http.StatusOK, install.Status{Model: m.Name, State: install.StateIdle})
}

func (s *Server) installStart(w http.ResponseWriter, r *http.Request) {
	run := s.installRunner(w, r)
	if run == nil {
		return
	}
	// The page's Install means "install it and switch it on": the
	// server starts the model when the install ends (install.Status.Serve).
	if err := run.Start(r.PathValue("name"), install.StartOptions{Serve: true}); err != nil {
		if errors.Is(err, install.ErrBusy) {
			writeError(w, r, http.StatusConflict, "install_busy", err.Error())
			return
		}
		writeError(w, r, http.StatusBadRequest, "invalid_request_error", err.Error())
		return
	}
	writeJSON(w, http.StatusAccepted, run.Status())
}

func (s *Server) installCancel(w http.ResponseWriter, r *http.Request) {
	run := s.installRunner(w, r)
	if run == nil {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
	defer cancel()
	if err := run.Cancel(ctx, r.PathValue("name")); err != nil {
		if errors.Is(err, install.ErrNotRunning) {
			writeError(w, r, http.StatusConflict, "install_not_running", err.Error())
			return
		}
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, run.Status())
}
