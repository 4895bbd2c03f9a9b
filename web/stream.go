package web

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"time"
)

// writeTimeout bounds each write of a streamed answer: a client that
// reads nothing for this long is dropped and its generation ended, so
// that it cannot hold the one generation slot (issue 13, item 1).
const writeTimeout = 30 * time.Second

// stream is the low-level side of a streamed answer: one response whose
// headers go out with the first event, each event flushed at once and
// bounded by a write deadline. The SSE and NDJSON formats are built on it.
type stream struct {
	w           http.ResponseWriter
	rc          *http.ResponseController
	contentType string
	timeout     time.Duration
	started     bool
}

func newStream(w http.ResponseWriter, contentType string, timeout time.Duration) *stream {
	if timeout <= 0 {
		timeout = writeTimeout
	}
	return &stream{w: w, rc: http.NewResponseController(w), contentType: contentType, timeout: timeout}
}

// start sends the headers (once).
func (s *stream) start() {
	if s.started {
		return
	}
	s.started = true
	h := s.w.Header()
	h.Set("Content-Type", s.contentType)
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	s.w.WriteHeader(http.StatusOK)
}

// write sends b and flushes it, within the write deadline.
func (s *stream) write(b []byte) error {
	s.start()
	// Not every ResponseWriter supports deadlines (httptest's recorder
	// does not); a real connection does.
	s.rc.SetWriteDeadline(time.Now().Add(s.timeout))
	if _, err := s.w.Write(b); err != nil {
		return fmt.Errorf("write answer: %w", err)
	}
	if err := s.rc.Flush(); err != nil {
		return fmt.Errorf("write answer: %w", err)
	}
	return nil
}

// sse writes server-sent events.
type sse struct{ *stream }

// newSSE starts an SSE stream whose writes time out after the server's
// WriteTimeout.
func (s *Server) newSSE(w http.ResponseWriter) *sse {
	return &sse{newStream(w, "text/event-stream", s.opts.WriteTimeout)}
}

// data sends one "data:" event holding v as JSON.
func (s *sse) data(v any) error {
	b, err := marshal(v)
	if err != nil {
		return err
	}
	return s.write(fmt.Appendf(nil, "data: %s\n\n", b))
}

// event sends one named event ("event: NAME") holding v as JSON.
func (s *sse) event(name string, v any) error {
	b, err := marshal(v)
	if err != nil {
		return err
	}
	return s.write(fmt.Appendf(nil, "event: %s\ndata: %s\n\n", name, b))
}

// raw sends a preformatted event ("data: [DONE]\n\n", a comment).
func (s *sse) raw(text string) error { return s.write([]byte(text)) }

// ndjson writes newline-delimited JSON objects (Ollama's streams).
type ndjson struct{ *stream }

// newNDJSON starts an NDJSON stream whose writes time out after the
// server's WriteTimeout.
func (s *Server) newNDJSON(w http.ResponseWriter) *ndjson {
	return &ndjson{newStream(w, "application/x-ndjson", s.opts.WriteTimeout)}
}

// send writes v as one line.
func (n *ndjson) send(v any) error {
	b, err := marshal(v)
	if err != nil {
		return err
	}
	return n.write(append(b, '\n'))
}

// marshal is JSON without HTML escaping (answers are not markup; "<"
// stays "<" as OpenAI and Ollama send it).
func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil // Encode adds a newline
}
