package web

import (
	"context"
	"net/http"
	"time"

	"github.com/npuchat/npuchat/service"
)

// status is GET /api/status: the service status and the version.
func (s *Server) status(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, statusResponse{Status: s.mgr.Status(), Version: s.opts.Version})
}

// statusResponse is the body of GET /api/status: the service's status
// and the server's version.
type statusResponse struct {
	service.Status
	Version string `json:"version"`
}

func (s *Server) modelStart(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Model string `json:"model"`
	}
	body, err := s.readSmall(w, r, maxSmallBody)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if len(body) > 0 {
		if err := unmarshalBody(body, &in); err != nil {
			s.fail(w, r, err)
			return
		}
	}
	if err := s.mgr.Start(trimModel(in.Model)); err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusAccepted, s.mgr.Status())
}

func (s *Server) modelStop(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
	defer cancel()
	if err := s.mgr.Stop(ctx); err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, s.mgr.Status())
}

// events streams service events as server-sent events ("event: TYPE"),
// and "conversations" when the chat history changed, with a comment
// every 15 seconds to keep proxies from closing it.
func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	ch, cancel := s.mgr.Subscribe()
	defer cancel()
	convs, stopConvs := s.convChanges.subscribe()
	defer stopConvs()
	out := s.newSSE(w)
	if out.raw(": events\n\n") != nil {
		return
	}
	tick := time.NewTicker(15 * time.Second)
	defer tick.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-s.stopping: // shutting down: the stream must not hold it up
			return
		case <-tick.C:
			if out.raw(": keep-alive\n\n") != nil {
				return
			}
		case <-convs:
			// A conversation was made, renamed, answered in or deleted.
			if out.event("conversations", struct{}{}) != nil {
				return
			}
		case ev, ok := <-ch:
			if !ok {
				return
			}
			if out.event(string(ev.Type), ev) != nil {
				return
			}
		}
	}
}

// checkNPU answers GET /api/check with the NPU check's report.
func (s *Server) checkNPU(w http.ResponseWriter, r *http.Request) {
	if s.opts.CheckNPU == nil {
		writeError(w, r, http.StatusNotFound, "not_found", "the NPU check is not available in this server")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), time.Minute)
	defer cancel()
	rep, err := s.opts.CheckNPU(ctx)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, rep)
}
