package web

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/npuchat/npuchat/service"
)

// Request bodies: bounded in size (Options.MaxBodyBytes, checked against
// Content-Length before anything is read, so that "Expect: 100-continue"
// gets 413 at once), in time (Options.BodyTimeout for the whole body, so
// that a client trickling a byte every few seconds cannot hold a
// connection), and, for generation requests, read only once the queue
// has a place for them (admit), so that what would be refused with 429
// is never held in memory.

// bodyError is a body that could not be read: cut off, malformed
// chunking, or too slow. It is the client's problem (4xx), not a server
// failure.
type bodyError struct {
	timeout bool
	err     error
}

func (e *bodyError) Error() string {
	if e.timeout {
		return "the request body did not arrive in time"
	}
	return "could not read the request body: " + e.err.Error()
}

func (e *bodyError) Unwrap() error { return e.err }

// startBody arms the body deadline for a request that has a body. The
// middleware calls it before any handler; readBody clears it once the
// body is read, so that it cannot cut a long answer's connection.
func (s *Server) startBody(w http.ResponseWriter, r *http.Request) {
	if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
		return
	}
	if err := http.NewResponseController(w).SetReadDeadline(time.Now().Add(s.opts.BodyTimeout)); err != nil {
		s.log.Warn("body deadline", "err", err)
	}
}

// Bounds of the bodies of the routes without a queue: what each needs,
// not the 8 MiB a prompt may take (50 concurrent 8 MB titles took the
// server to 3.7 GB).
const (
	// maxSmallBody: a model name (/api/model/start, /api/show), a
	// message to select.
	maxSmallBody = 4 << 10
	// maxChatBody: a conversation's title and settings, with its system
	// prompt (history.MaxSystem).
	maxChatBody = 128 << 10
	// maxSettingsBody: the page's settings.
	maxSettingsBody = 64 << 10
)

// readSmall reads a body of at most limit bytes: a larger one is 413
// before anything is read (by Content-Length) or as soon as limit bytes
// have come.
func (s *Server) readSmall(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	if r.ContentLength > limit {
		w.Header().Set("Connection", "close")
		return nil, &apiError{http.StatusRequestEntityTooLarge, "request_too_large", fmt.Sprintf("request body is larger than %d bytes, the most this request takes", limit), ""}
	}
	if r.Body != nil && r.Body != http.NoBody {
		r.Body = http.MaxBytesReader(w, r.Body, limit)
	}
	return s.readBody(w, r)
}

// readBody reads the whole (size- and time-limited) body.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	if r.Body == nil || r.Body == http.NoBody {
		return nil, nil
	}
	var buf bytes.Buffer
	if r.ContentLength > 0 && r.ContentLength <= s.opts.MaxBodyBytes {
		buf.Grow(int(r.ContentLength)) // one allocation, not doublings
	}
	_, err := buf.ReadFrom(r.Body)
	if err != nil {
		// The deadline stays: the server reads what is left of a body
		// before it answers, and must not wait for this one.
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, err
		}
		return nil, &bodyError{timeout: errors.Is(err, os.ErrDeadlineExceeded), err: err}
	}
	http.NewResponseController(w).SetReadDeadline(time.Time{})
	return buf.Bytes(), nil
}

// admit takes a place in the queue for a generation request and then
// reads its body. When the queue is full it answers 429 before reading
// anything. ok false means the response was written. The caller releases
// the ticket (a no-op once the service used it).
func (s *Server) admit(w http.ResponseWriter, r *http.Request) (*service.Ticket, []byte, bool) {
	ticket, err := s.mgr.Reserve()
	if err != nil {
		// The body stays unread: the connection cannot be reused.
		w.Header().Set("Connection", "close")
		s.fail(w, r, err)
		return nil, nil, false
	}
	// The place is held only while the body arrives promptly: nine
	// connections that sent headers and no body locked everyone out of
	// generation for the 30 s of the body timeout, and again on
	// reconnecting. A body not here within AdmitTimeout gives its place
	// up (408).
	if r.Body != nil && r.Body != http.NoBody && r.ContentLength != 0 {
		http.NewResponseController(w).SetReadDeadline(time.Now().Add(min(s.opts.AdmitTimeout, s.opts.BodyTimeout)))
	}
	body, err := s.readBody(w, r)
	if err != nil {
		ticket.Release()
		var be *bodyError
		if errors.As(err, &be) && be.timeout {
			err = &apiError{http.StatusRequestTimeout, "request_timeout", fmt.Sprintf("the request body did not arrive within %s of the request taking a place in the queue; send the body with the request", min(s.opts.AdmitTimeout, s.opts.BodyTimeout)), ""}
		}
		s.fail(w, r, err)
		return nil, nil, false
	}
	return ticket, body, true
}
