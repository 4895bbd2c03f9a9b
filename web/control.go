package web

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/npuchat/npuchat/service/install"
)

// status is GET /api/status: the service status and the version.
func (s *Server) status(w http.ResponseWriter, r *http.Request) {
	st := s.mgr.Status()
	b, _ := json.Marshal(st)
	var m map[string]any
	json.Unmarshal(b, &m)
	m["version"] = s.opts.Version
	writeJSON(w, http.StatusOK, m)
}

func (s *Server) modelStart(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Model string `json:"model"`
	}
	body, err := readBody(r)
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
// with a comment every 15 seconds to keep proxies from closing it.
func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	ch, cancel := s.mgr.Subscribe()
	defer cancel()
	out := newSSE(w)
	out.start()
	out.rc.Flush()
	tick := time.NewTicker(15 * time.Second)
	defer tick.Stop()
	var installs <-chan install.Status
	if s.opts.Installs != nil {
		ich, icancel := s.opts.Installs.Subscribe()
		defer icancel()
		installs = ich
	}
	for {
		select {
		case st := <-installs:
			b, _ := json.Marshal(map[string]any{"type": "install", "install": st, "time": time.Now()})
			if out.raw(fmt.Sprintf("event: install\ndata: %s\n\n", b)) != nil {
				return
			}
		case <-r.Context().Done():
			return
		case <-tick.C:
			if out.raw(": keep-alive\n\n") != nil {
				return
			}
		case ev, ok := <-ch:
			if !ok {
				return
			}
			b, _ := json.Marshal(ev)
			if out.raw(fmt.Sprintf("event: %s\ndata: %s\n\n", ev.Type, b)) != nil {
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
