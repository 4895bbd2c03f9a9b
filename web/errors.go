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
		return &apiError{http.StatusNotFound, "model_not_found", err.Error(), "model"}
	case errors.Is(err, service.ErrModelOff), errors.Is(err, service.ErrNotInstalled):
		return &apiError{http.StatusServiceUnavailable, "model_not_available", err.Error(), ""}
	case errors.Is(err, backend.ErrPromptTooLong):
		return &apiError{http.StatusBadRequest, "context_length_exceeded", err.Error(), "messages"}
	case errors.As(err, new(*backend.UnsupportedError)):
		var ue *backend.UnsupportedError
		errors.As(err, &ue)
		return &apiError{http.StatusBadRequest, "unsupported_parameter", ue.Error(), ue.Param}
	case errors.Is(err, backend.ErrBadRequest):
		return &apiError{http.StatusBadRequest, "invalid_request_error", err.Error(), ""}
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return &apiError{499, "request_cancelled", "request cancelled", ""}
	case errors.Is(err, backend.ErrDeviceFailed):
		return &apiError{http.StatusBadGateway, "backend_failed", err.Error(), ""}
	default:
		return &apiError{http.StatusInternalServerError, "internal_error", err.Error(), ""}
	}
}

// fail writes err as an OpenAI error object (or an Ollama one for
// Ollama routes), with Retry-After when the queue is full.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	ae := s.classify(err)
	if ae.status == 499 {
		if r.Context().Err() != nil {
			return // the client is gone
		}
		// A deadline of the server's own (a stop or a check that took too long).
		ae = &apiError{http.StatusGatewayTimeout, "timeout", "timed out: " + err.Error(), ""}
	}
	if ae.status >= 500 {
		s.log.Warn("request failed", "path", r.URL.Path, "err", err)
	}
	s.writeAPIError(w, r, ae)
}

// writeAPIError writes a classified error as the response, with
// Retry-After when the queue is full.
func (s *Server) writeAPIError(w http.ResponseWriter, r *http.Request, ae *apiError) {
	if ae.status == http.StatusTooManyRequests || ae.status == http.StatusServiceUnavailable && ae.code == "shutting_down" {
		w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(s.mgr.RetryAfter().Seconds()))))
	}
	param := ae.param
	if param == "messages" && (r.URL.Path == "/v1/completions" || r.URL.Path == "/api/generate") {
		param = "prompt" // these APIs take a prompt, not messages
	}
	writeErrorParam(w, r, ae.status, ae.code, ae.msg, param)
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
}

func writeError(w http.ResponseWriter, r *http.Request, status int, code, msg string) {
	writeErrorParam(w, r, status, code, msg, "")
}

func writeErrorParam(w http.ResponseWriter, r *http.Request, status int, code, msg, param string) {
	if isOllamaRoute(r.URL.Path) {
		writeJSON(w, status, ollamaError{Error: msg})
		return
	}
	writeJSON(w, status, openAIError{Error: openAIErrorBody{Message: msg, Type: errorType(status), Code: code, Param: paramOf(param)}})
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

// isOllamaRoute reports whether path belongs to the Ollama API, whose
// errors are {"error":"message"}.
func isOllamaRoute(path string) bool {
	switch path {
	case "/api/chat", "/api/generate", "/api/tags", "/api/ps", "/api/show", "/api/version":
		return true
	}
	return false
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
