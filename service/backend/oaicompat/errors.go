package oaicompat

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/npuchat/npuchat/service/backend"
)

// Error is what Generate returns when the upstream server failed: an HTTP
// error, an error object inside the stream, or a connection that broke.
// It wraps the backend sentinel the failure maps to (test with errors.Is:
// backend.ErrDeviceFailed, ErrPromptTooLong, ErrBadRequest) and the
// transport error, if any, and it says how much of the answer had already
// been passed to emit, so that a caller can decide to retry the request
// elsewhere (nothing emitted) or to continue or report it.
type Error struct {
	// URL is the endpoint that failed.
	URL string
	// StatusCode is the HTTP status, or the "code" of an error object
	// sent inside the stream, or 0.
	StatusCode int
	// Message is the upstream's own message, e.g. FastFlowLM's
	// "runlist failed execution (ERT_CMD_STATE_TIMEOUT)".
	Message string
	// Emitted counts the pieces of text passed to emit before the failure
	// (0 means the caller may retry the whole request elsewhere).
	Emitted int
	// EmittedText is that text.
	EmittedText string
	// Kind is the backend sentinel the failure maps to, or nil.
	Kind error
	// Cause is the transport error (connection refused, reset, unexpected
	// EOF), or nil.
	Cause error
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.URL)
	if e.StatusCode != 0 {
		fmt.Fprintf(&b, ": HTTP %d", e.StatusCode)
	}
	if e.Message != "" {
		b.WriteString(": ")
		b.WriteString(e.Message)
	}
	if e.Cause != nil {
		b.WriteString(": ")
		b.WriteString(e.Cause.Error())
	}
	if e.Emitted > 0 {
		fmt.Fprintf(&b, " (after %d pieces of text were sent)", e.Emitted)
	}
	if e.Kind != nil {
		b.WriteString(": ")
		b.WriteString(e.Kind.Error())
	}
	return b.String()
}

// Unwrap returns the sentinel and the transport error.
func (e *Error) Unwrap() []error {
	var errs []error
	if e.Kind != nil {
		errs = append(errs, e.Kind)
	}
	if e.Cause != nil {
		errs = append(errs, e.Cause)
	}
	return errs
}

// EmittedTokens is Emitted. A caller that does not import this package can
// ask any error for it with errors.As and an interface{ EmittedTokens() int }.
func (e *Error) EmittedTokens() int { return e.Emitted }

// devicePatterns are (lower-cased) pieces of FastFlowLM and XRT messages
// that mean the NPU, its driver or the process serving it failed. Sources:
// FastFlowLM issue #712 and the model card (ERT_CMD_STATE_TIMEOUT from a
// failed xrt::runlist), FLM docs (hw queue submit failure, missing device
// with the XRT plugin missing), amdxdna issues (hardware context errors).
var devicePatterns = []string{
	"ert_cmd_state_",                   // any ERT command state: TIMEOUT, NEW, ERROR, ABORT
	"runlist failed",                   // xrt::runlist::execute/wait failed
	"no such device",                   // "No such device with index '0'"
	"failed to submit the command",     // "[XRT] ERROR: Failed to submit the command to the hw queue"
	"failed to create context",         // "Failed to create context virtual (0xc01e0009)"
	"create_hwctx",                     // amdxdna: "CREATE_HWCTX err=-22"
	"no npu device found",              // flm validate / serve without a usable device
	"device is lost", "device removed", // a lost device (Windows wording)
}

// contextPatterns are (lower-cased) pieces of the messages servers send
// when the prompt does not fit the context: OpenAI and vLLM ("maximum
// context length", code context_length_exceeded), llama.cpp ("exceeds the
// available context size", exceed_context_size_error; older builds "input
// is too large"), FastFlowLM ("Max length reached!").
var contextPatterns = []string{
	"context length",
	"context_length",
	"context size",
	"context window",
	"exceed_context_size",
	"max length reached",
	"input is too large",
	"prompt is too long",
	"too many tokens",
}

// Classify maps an upstream failure to the backend sentinel the service
// acts on: backend.ErrDeviceFailed when the message is one of FastFlowLM's
// device failures (whatever the status), backend.ErrPromptTooLong when it
// says the prompt does not fit the context, backend.ErrBadRequest for any
// other HTTP 400, 413 or 422, and nil otherwise. status is the HTTP status
// or the code of an in-stream error object, 0 when unknown.
func Classify(status int, message string) error {
	m := strings.ToLower(message)
	for _, p := range devicePatterns {
		if strings.Contains(m, p) {
			return backend.ErrDeviceFailed
		}
	}
	for _, p := range contextPatterns {
		if strings.Contains(m, p) {
			return backend.ErrPromptTooLong
		}
	}
	switch status {
	case 400, 413, 422:
		return backend.ErrBadRequest
	}
	return nil
}

// upstreamError is the error object servers send, in its known shapes:
//
//	{"error": "message"}                                     FastFlowLM
//	{"error": {"message": "...", "type": "...", "code": 400}} OpenAI, FLM, llama.cpp, vLLM
//	{"object": "error", "message": "...", "code": 400}       older vLLM
//	{"code": 400, "message": "...", "type": "..."}           llama.cpp "error:" SSE field
type upstreamError struct {
	Error   json.RawMessage `json:"error"`
	Object  string          `json:"object"`
	Message string          `json:"message"`
	Code    json.RawMessage `json:"code"`
	Detail  json.RawMessage `json:"detail"` // FastAPI-style {"detail": "..."}
}

// parseError reads an error object from body. It returns ok false when the
// body holds no error object. bare says whether a top-level "message" with
// no "error" counts (it does for llama.cpp's "error:" SSE field and for
// error bodies of failed HTTP statuses).
func parseError(body []byte, bare bool) (message string, code int, ok bool) {
	var u upstreamError
	if err := json.Unmarshal(body, &u); err != nil {
		return "", 0, false
	}
	code = parseCode(u.Code)
	if len(u.Error) > 0 && string(u.Error) != "null" {
		var s string
		if json.Unmarshal(u.Error, &s) == nil {
			return s, code, true
		}
		var inner upstreamError
		if json.Unmarshal(u.Error, &inner) == nil {
			if c := parseCode(inner.Code); c != 0 {
				code = c
			}
			msg := inner.Message
			if msg == "" {
				msg = strings.TrimSpace(string(u.Error))
			}
			// A string code such as "context_length_exceeded" says more
			// than a generic message; keep it.
			var sc string
			if json.Unmarshal(inner.Code, &sc) == nil && sc != "" && !strings.Contains(msg, sc) {
				msg += " (" + sc + ")"
			}
			return msg, code, true
		}
		return strings.TrimSpace(string(u.Error)), code, true
	}
	if u.Object == "error" || (bare && u.Message != "") {
		return u.Message, code, true
	}
	if bare && len(u.Detail) > 0 {
		var s string
		if json.Unmarshal(u.Detail, &s) == nil {
			return s, code, true
		}
		return string(u.Detail), code, true
	}
	return "", 0, false
}

// parseCode reads an error code that may be a number or a numeric string.
func parseCode(raw json.RawMessage) int {
	if len(raw) == 0 {
		return 0
	}
	var n int
	if json.Unmarshal(raw, &n) == nil {
		return n
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		if n, err := strconv.Atoi(s); err == nil {
			return n
		}
	}
	return 0
}
