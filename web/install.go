package web

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/npuchat/npuchat/service/install"
)

// The install API: POST /api/models/{name}/install starts installing a
// catalog model (the same installer `npuchat install` runs; one install
// at a time), GET reports its progress, DELETE cancels it; starting it
// again resumes. Progress also goes out on /api/events as "install"
// events.

func (s *Server) installRunner(w http.ResponseWriter, r *http.Request) *install.Runner {
	if s.opts.Installs == nil {
		writeError(w, r, http.StatusNotFound, "not_found", "this server cannot install models; run npuchat install in a terminal")
		return nil
	}
	return s.opts.Installs
}

func (s *Server) installStatus(w http.ResponseWriter, r *http.Request) {
	if run := s.installRunner(w, r); run != nil {
		writeJSON(w, http.StatusOK, run.Status())
	}
}

func (s *Server) installStart(w http.ResponseWriter, r *http.Request) {
	run := s.installRunner(w, r)
	if run == nil {
		return
	}
	if err := run.Start(r.PathValue("name")); err != nil {
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
