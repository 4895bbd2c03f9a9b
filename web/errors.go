package web

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/npuchat/npuchat/config"
	"github.com/npuchat/npuchat/service"
	"github.com/npuchat/npuchat/service/backend"
)

// apiError is an error with its HTTP status and OpenAI error code.
type apiError struct {
	status int
	code   string
	msg    string
	param  string
}

func (e *apiError) Error() string { return e.msg }

func badRequest(param, format string, args ...any) *apiError {
	return &apiError{status: http.StatusBadRequest, code: "invalid_request_error", msg: fmt.Sprintf(format, args...), param: param}
}

// classify maps an error from decoding or from the service to its HTTP
// status and code. Messages are written for a person.
func (s *Server) classify(err error) *apiError {
	var ae *apiError
	var mbe *http.MaxBytesError
	var be *bodyError
	var fe *config.FieldError
	switch {
	case errors.As(err, &ae):
		return ae
	case errors.As(err, &fe):
		return &apiError{http.StatusBadRequest, "invalid_request_error", fe.Message, fe.Field}
	case errors.Is(err, errShuttingDown):
		return &apiError{http.StatusServiceUnavailable, "shutting_down", errShuttingDown.Error(), ""}
	case errors.As(err, &mbe):
		return &apiError{http.StatusRequestEntityTooLarge, "request_too_large", fmt.Sprintf("request body is larger than %d bytes", mbe.Limit), ""}
	case errors.As(err, &be) && be.timeout:
		return &apiError{http.StatusRequestTimeout, "request_timeout", fmt.Sprintf("the request body did not arrive within %s; send it at once", s.opts.BodyTimeout), ""}
	case errors.As(err, &be):
		return &apiError{http.StatusBadRequest, "invalid_request_error", be.Error(), ""}
	case errors.Is(err, service.ErrQueueFull):
		return &apiError{http.StatusTooManyRequests, "rate_limit_exceeded", err.Error(), ""}
	case errors.Is(err, service.ErrUnknownModel):
		// The name is the client's: a long one is not echoed whole.
		return &apiError{http.StatusNotFound, "model_not_found", clip(err.Error(), 300), "model"}
	case errors.Is(err, service.ErrModelOff), errors.Is(err, service.ErrNotInstalled):
		return &apiError{http.StatusServiceUnavailable, "model_not_available", err.Error(), ""}
	case errors.Is(err, service.ErrNoEmbeddings):
		return &apiError{http.StatusBadRequest, "unsupported_parameter", err.Error(), "model"}
	case errors.Is(err, backend.ErrKVMemoryFull):
		// the memory is held by the answers running beside this one: it
		// may be free in a moment (Retry-After)
		return &apiError{http.StatusServiceUnavailable, "kv_memory_full", err.Error(), ""}
	case errors.Is(err, backend.ErrPromptTooLong):
		return &apiError{http.StatusBadRequest, "context_length_exceeded", err.Error(), "messages"}
	case errors.As(err, new(*backend.UnsupportedError)):
		var ue *backend.UnsupportedError
		errors.As(err, &ue)
		return &apiError{http.StatusBadRequest, "unsupported_parameter", ue.Error(), ue.Param}
	case errors.Is(err, backend.ErrBadRequest):
		// The sentinel's "bad request" is the status; the message is the
		// rest ("the prompt is empty", not "the prompt is empty: bad request").
		return &apiError{http.StatusBadRequest, "invalid_request_error", strings.TrimSuffix(err.Error(), ": "+backend.ErrBadRequest.Error()), ""}
	case errors.Is(err, context.DeadlineExceeded):
		// A deadline of the server's own (a stop or a check that took too
		// long); a client that left is not answered at all (fail, drive).
		return &apiError{http.StatusGatewayTimeout, "timeout", "the server timed out: " + err.Error(), ""}
	case errors.Is(err, context.Canceled):
		// Cancelled by the server while the client waits: the model was
		// stopped or unloaded under the answer.
		return &apiError{http.StatusServiceUnavailable, "cancelled", "the answer was stopped before it finished (the model was stopped or unloaded); ask again", ""}
	case errors.Is(err, backend.ErrDeviceFailed):
		return &apiError{http.StatusBadGateway, "backend_failed", err.Error(), ""}
	default:
		return &apiError{http.StatusInternalServerError, "internal_error", err.Error(), ""}
	}
}

// fail writes err as the route's API writes errors (errorShapeOf), with
// Retry-After when the queue is full. A client that has gone is not
// answered.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	if clientGone(r, err) {
		return
	}
	ae := s.classify(err)
	if ae.status >= 500 {
		s.log.Warn("request failed", "path", r.URL.Path, "err", err)
	}
	s.writeAPIError(w, r, ae)
}

// writeAPIError writes a classified error as the response, in the
// route's API's shape, with Retry-After when the queue or the KV memory
// is full.
func (s *Server) writeAPIError(w http.ResponseWriter, r *http.Request, ae *apiError) {
	if ae.status == http.StatusTooManyRequests || ae.status == http.StatusServiceUnavailable && (ae.code == "shutting_down" || ae.code == "kv_memory_full") {
		w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(s.mgr.RetryAfter().Seconds()))))
	}
	if ae.param == "messages" && (r.URL.Path == "/v1/completions" || r.URL.Path == "/api/generate") {
		c := *ae
		c.param = "prompt" // these APIs take a prompt, not messages
		ae = &c
	}
	shape := errorShapeOf(r.URL.Path)
	writeJSON(w, ae.status, shape.body(ae))
}

// errorShape is how one API writes an error: OpenAI's {"error": {message,
// type, code, param}} (the /v1/ routes and the page's own), Ollama's
// {"error": "message"} (every route under /api/, routed or not), or
// Anthropic's {"type": "error", "error": {type, message}} (/v1/messages).
type errorShape int

const (
	openAIErrors errorShape = iota
	ollamaErrors
	anthropicErrors
)

// errorShapeOf is the error shape of a route, decided by its path's
// prefix, so that a path no route serves still answers in its API's shape.
func errorShapeOf(path string) errorShape {
	switch {
	case strings.HasPrefix(path, "/api/"):
		return ollamaErrors
	case path == "/v1/messages" || strings.HasPrefix(path, "/v1/messages/"):
		return anthropicErrors
	}
	return openAIErrors
}

// body is ae as the shape's error response.
func (f errorShape) body(ae *apiError) any {
	switch f {
	case ollamaErrors:
		// Ollama's clients read "error"; "code" is NPU Chat's, for the
		// page (a locked history, a conflict).
		return ollamaError{Error: ae.msg, Code: ae.code, Param: ae.param}
	case anthropicErrors:
		return anthropicError(ae)
	}
	return openAIError{Error: openAIErrorBody{Message: ae.msg, Type: errorType(ae.status), Code: ae.code, Param: paramOf(ae.param)}}
}

// clientGone reports whether err is the end of r's own context: the
// client left (or closed the stream), and there is nobody to tell.
func clientGone(r *http.Request, err error) bool {
	return r.Context().Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded))
}

// openAIError is OpenAI's error response.
type openAIError struct {
	Error openAIErrorBody `json:"error"`
}

// openAIErrorBody is OpenAI's error object.
type openAIErrorBody struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Code    string  `json:"code"`
	Param   *string `json:"param"`
}

// ollamaError is Ollama's error response, and the line that ends an
// Ollama stream cut by an error.
type ollamaError struct {
	Error string `json:"error"`
	Code  string `json:"code,omitempty"`
	// Param names the field a bad value was in (NPU Chat's, for the
	// page's settings view, which shows the error at that field).
	Param string `json:"param,omitempty"`
}

func writeError(w http.ResponseWriter, r *http.Request, status int, code, msg string) {
	writeErrorParam(w, r, status, code, msg, "")
}

func writeErrorParam(w http.ResponseWriter, r *http.Request, status int, code, msg, param string) {
	writeJSON(w, status, errorShapeOf(r.URL.Path).body(&apiError{status: status, code: code, msg: msg, param: param}))
}

// errorType is OpenAI's error type for a status.
func errorType(status int) string {
	switch {
	case status == http.StatusUnauthorized:
		return "authentication_error"
	case status == http.StatusTooManyRequests:
		return "rate_limit_error"
	case status >= 500:
		return "server_error"
	}
	return "invalid_request_error"
}

// paramOf is OpenAI's "param": null when no parameter is to blame.
func paramOf(param string) *string {
	if param == "" {
		return nil
	}
	return &param
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.Encode(v)
}

// trimModel is the model name as sent, trimmed.
func trimModel(s string) string { return strings.TrimSpace(s) }

// clip shortens text a client sent (a model name, a Host) for an error
// message: at most n bytes, cut at a character, saying how long it was.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%s… (%d bytes)", s[:cut], len(s))
}
