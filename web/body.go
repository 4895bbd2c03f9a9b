package web

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/npuchat/npuchat/service"
)

// Request bodies: bounded in size (Options.MaxBodyBytes, checked against
// Content-Length before anything is read, so that "Expect: 100-continue"
// gets 413 at once), in time (Options.BodyTimeout for the whole body, so
// that a client trickling a byte every few seconds cannot hold a
// connection), and, for generation requests, read whole before they take
// a place in the queue (admit), so that no number of bodies that do not
// come can keep a complete request out.

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

// freeBody is how much of a generation body is read without taking from
// Options.QueuedBodyBytes: a chat's whole body, as a rule, so that bodies
// held half-sent by other connections never refuse one.
const freeBody = 256 << 10

// errBodiesBusy refuses a large body while others fill
// Options.QueuedBodyBytes.
var errBodiesBusy = fmt.Errorf("%w: large requests arriving at once fill the memory set aside for them; send this one again in a moment", service.ErrQueueFull)

// bodyBudget is the memory generation bodies being read may hold beyond
// their first freeBody bytes (Options.QueuedBodyBytes).
type bodyBudget struct {
	mu        sync.Mutex
	used, max int64
}

// take takes n bytes, or reports false when they do not fit.
func (b *bodyBudget) take(n int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.used+n > b.max {
		return false
	}
	b.used += n
	return true
}

// give gives n bytes back.
func (b *bodyBudget) give(n int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.used -= n
}

// admit reads a generation request's whole body, then takes a place in
// the queue for it. A place is never held by a body still arriving: nine
// connections that sent headers and no body, reconnecting, kept every
// chat out with 429 while they held their places. What bodies still
// arriving hold is bounded in memory instead (readQueued). A full queue
// is refused at once, before the body is read; a body that does not come
// within Options.BodyTimeout is 408 and never had a place. ok false
// means the response was written. The caller releases the ticket (a
// no-op once the service used it).
func (s *Server) admit(w http.ResponseWriter, r *http.Request) (*service.Ticket, []byte, bool) {
	if s.mgr.QueueFull() {
		// The body stays unread: the connection cannot be reused.
		w.Header().Set("Connection", "close")
		s.fail(w, r, service.ErrQueueFull)
		return nil, nil, false
	}
	body, err := s.readQueued(w, r)
	if err != nil {
		s.fail(w, r, err)
		return nil, nil, false
	}
	ticket, err := s.mgr.Reserve()
	if err != nil {
		s.fail(w, r, err)
		return nil, nil, false
	}
	return ticket, body, true
}

// readQueued reads a generation body as it arrives, never holding much
// more than has come (a Content-Length is not trusted to size the
// buffer). Beyond its first freeBody bytes the buffer grows only with
// room in s.bodies; without room, or once the queue is full, the rest of the
// body is read and dropped and the request refused (429, the connection
// still usable), so that a burst of large bodies holds at most
// Options.QueuedBodyBytes between them.
func (s *Server) readQueued(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	if r.Body == nil || r.Body == http.NoBody {
		return nil, nil
	}
	var held int64
	defer func() { s.bodies.give(held) }()
	// The buffer starts at 4 KiB and doubles as bytes come: a
	// connection that declares 8 MB and sends nothing holds 4 KiB.
	size := int64(4 << 10)
	if r.ContentLength > 0 {
		size = min(r.ContentLength, size)
	}
	buf := make([]byte, 0, size)
	for {
		if len(buf) == cap(buf) {
			if r.ContentLength >= 0 && int64(len(buf)) >= r.ContentLength {
				// All declared bytes are here: read the end (or the one
				// byte too many that MaxBytesReader refuses).
				var end [1]byte
				n, err := r.Body.Read(end[:])
				if n == 0 && err == io.EOF {
					break
				}
				if err == nil || err == io.EOF {
					err = io.ErrUnexpectedEOF // more than it said
				}
				return nil, bodyReadError(err)
			}
			grow := int64(cap(buf)) * 2
			if r.ContentLength > 0 {
				grow = min(grow, r.ContentLength)
			}
			need := max(grow-freeBody, 0) - held
			if need > 0 {
				if s.mgr.QueueFull() || !s.bodies.take(need) {
					if _, err := io.Copy(io.Discard, r.Body); err != nil {
						return nil, bodyReadError(err)
					}
					if s.mgr.QueueFull() {
						return nil, service.ErrQueueFull
					}
					return nil, errBodiesBusy
				}
				held += need
			}
			buf = append(make([]byte, 0, grow), buf...)
		}
		n, err := r.Body.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, bodyReadError(err)
		}
	}
	http.NewResponseController(w).SetReadDeadline(time.Time{})
	return buf, nil
}

// bodyReadError is the error of a body that could not be read whole: a
// *http.MaxBytesError as it is (413), else a *bodyError (408 when it
// did not come in time). The deadline stays: the server reads what is
// left of a body before it answers, and must not wait for this one.
func bodyReadError(err error) error {
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return err
	}
	return &bodyError{timeout: errors.Is(err, os.ErrDeadlineExceeded), err: err}
}
