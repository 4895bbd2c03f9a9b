package web

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/npuchat/npuchat/enginekind"
	"github.com/npuchat/npuchat/service"
	"github.com/npuchat/npuchat/service/backend"
	"github.com/npuchat/npuchat/service/think"
)

// call is one generation request decoded from some API's body: what to
// generate, how to write the answer in that API's format, and who else
// watches it.
type call struct {
	req  *backend.Request
	opts service.GenerateOptions
	out  answerWriter
	// observe, when set, sees the answer as it is generated and when it
	// ends (the conversation API stores the answer through it).
	observe *observer
	// model is the model name as the client sent it (echoed in answers).
	model string
	// split takes a reasoning model's <think> block apart from the
	// answer's text (chat requests): pieces reach the observer and the
	// writer with it in Token.Thinking, and it is gathered in
	// answer.Thinking.
	split bool
	// stop, when set, ends the answer early when it is done, with its
	// cause as the answer's error (a chat deleted or changed mid-answer,
	// chatwriter.go).
	stop context.Context
	// instead, when set, runs in place of generation: a request that
	// generates nothing (Ollama's load and unload) and writes its own
	// answer. An error is written as the API's error.
	instead func(ctx context.Context, ticket *service.Ticket) error
}

// api is one generation API's side of Server.generate: the prefix of
// its answers' ids and its decoder. decode reads the body into a call
// (the request, the answer's writer); an error is the client's (a
// *apiError) or the service's, and is written in the API's error shape.
type api struct {
	idPrefix string
	decode   func(w http.ResponseWriter, r *http.Request, body []byte) (*call, error)
}

// generate is the one entry of the generation APIs (OpenAI chat and
// completions, Responses, Anthropic Messages, Ollama chat and generate):
// it reads the body and takes a place in the queue (admit), decodes it
// with the API's decoder, and drives the answer. Every error before the
// first byte is written by s.fail, in the shape the route's API uses.
func (s *Server) generate(w http.ResponseWriter, r *http.Request, f api) {
	start := time.Now()
	ticket, body, ok := s.admit(w, r)
	if !ok {
		return
	}
	defer ticket.Release()
	c, err := f.decode(w, r, body)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	c.opts.Ticket = ticket
	if c.req != nil {
		param := "response_format"
		if strings.HasPrefix(r.URL.Path, "/api/") {
			param = "format"
		}
		if err := s.checkSchemaFits(c.req, param); err != nil {
			s.fail(w, r, err)
			return
		}
	}
	if c.instead != nil {
		if err := c.instead(r.Context(), ticket); err != nil {
			s.fail(w, r, err)
		}
		return
	}
	s.drive(w, r, newAnswer(f.idPrefix, c.model, start), c)
}

// answerWriter writes one answer in one API's format. The driver calls
// piece for every piece in order, then exactly one of finish (the answer
// is complete) or fail (it is not). Writers keep their own state
// (whether headers went out); the answer carries everything the driver
// knows.
type answerWriter interface {
	// piece writes one piece as it is generated. A streaming writer sends
	// it at once; a whole-answer writer does nothing (a.Text holds it).
	// An error (the client is gone or stopped reading) ends generation.
	piece(a *answer, t backend.Token) error
	// finish writes the end of a complete answer: the last chunk with the
	// finish reason and usage, or the whole answer.
	finish(a *answer) error
	// fail ends the answer with an error. Before anything was sent it is
	// an error response with ae's status; after, an in-stream error in the
	// format's own shape (an SSE error event, an Ollama error line), so
	// that a client can tell the answer was cut.
	fail(a *answer, ae *apiError)
}

// observer sees an answer besides its writer. Either function may be nil.
type observer struct {
	// piece is called with each piece before it is written to the
	// client, so that whatever the client was shown has been seen here
	// first. An error ends generation (the answer fails with it).
	piece func(a *answer, t backend.Token) error
	// end is called once when the answer ends, complete (a.Err nil) or
	// cut (a.Err says why), before the last bytes go to the client.
	end func(a *answer)
}

// answer is everything known about one answer as it is generated and
// when it ends. The driver fills it; writers and observers read it.
type answer struct {
	// ID is the answer's id in the API ("chatcmpl-…", "cmpl-…").
	ID string
	// Model is the model name as the client sent it (echoed in answers).
	Model string
	// Start is when the request arrived.
	Start time.Time
	// Backend is the kind of the backend running the request ("cpu",
	// "npu", "remote", "fake"), known before the first piece.
	Backend enginekind.Kind
	// Fallback says why the preferred backend is not the one answering
	// ("" when it is).
	Fallback string
	// Text is the answer so far, and Thinking its reasoning (when the
	// call splits it out).
	Text     strings.Builder
	Thinking strings.Builder
	// ToolCalls are the calls made so far, Logprobs the tokens'
	// log-probabilities (when asked for).
	ToolCalls []backend.ToolCall
	Logprobs  []backend.Logprob
	// Pieces counts the pieces emitted so far.
	Pieces int
	// FirstToken is the time from Start to the first piece (0 before it).
	FirstToken time.Duration
	// PromptTokens and CachedTokens are the prompt's size and its part
	// from the KV cache as the backend told them with the first piece
	// (0 when it did not), before Result has them.
	PromptTokens, CachedTokens int
	// Result is the backend's result (finish reason, token counts,
	// prefill and decode durations), set when generation returns.
	Result backend.Result
	// Total is the time from Start to the end.
	Total time.Duration
	// Err is why the answer ended early, nil when it is complete.
	Err error
}

// Created is the answer's creation time in Unix seconds (OpenAI's
// "created").
func (a *answer) Created() int64 { return a.Start.Unix() }

// TokensPerSecond is the decode speed, 0 when unknown.
func (a *answer) TokensPerSecond() float64 { return a.Result.DecodeTokensPerSecond() }

// fingerprint is OpenAI's system_fingerprint: the engine that answered,
// the same in every chunk and in whole answers.
func (a *answer) fingerprint() string {
	if a.Backend == "" {
		return "npuchat"
	}
	return "npuchat-" + string(a.Backend)
}

// newAnswer starts an answer for a request that arrived at start.
func newAnswer(idPrefix, model string, start time.Time) *answer {
	return &answer{ID: newID(idPrefix), Model: model, Start: start}
}

// drive is the one generation path: it runs c through the service,
// hands every piece to the observer and the writer, and ends the answer
// with the writer's finish or fail. Every API format (OpenAI chat and
// completions, Ollama chat and generate, the conversation API) is a
// decoder plus an answerWriter around this.
func (s *Server) drive(w http.ResponseWriter, r *http.Request, a *answer, c *call) {
	rc := http.NewResponseController(w)
	// Streams set a write deadline per event; the connection may serve
	// another request after this one, so clear it at the end.
	defer rc.SetWriteDeadline(time.Time{})
	// The answer ends when the client leaves, or when a shutdown's grace
	// is over (Server.Shutdown).
	ctx, cancel := context.WithCancelCause(r.Context())
	defer cancel(nil)
	stop := context.AfterFunc(s.endAnswers, func() { cancel(context.Cause(s.endAnswers)) })
	defer stop()
	if c.stop != nil {
		stopChat := context.AfterFunc(c.stop, func() { cancel(context.Cause(c.stop)) })
		defer stopChat()
	}

	if s.opts.APIKey != "" && c.req.CacheScope == "" {
		// Several people share the server: a prompt cache per client
		// address, so that nobody can time another's prompt.
		c.req.CacheScope = clientHost(r)
	}
	opts := c.opts
	onRun := opts.OnRun
	opts.OnRun = func(kind enginekind.Kind, fallback string) {
		a.Backend, a.Fallback = kind, fallback
		if onRun != nil {
			onRun(kind, fallback)
		}
	}
	deliver := func(t backend.Token) error {
		arrived := time.Since(a.Start)
		// The observer (the history) takes the piece first; a piece it
		// could not keep is not part of the answer: it is neither
		// counted nor shown.
		if c.observe != nil && c.observe.piece != nil {
			if err := c.observe.piece(a, t); err != nil {
				return err
			}
		}
		if a.Pieces == 0 {
			a.FirstToken = arrived
		}
		a.Pieces++
		a.Text.WriteString(t.Text)
		a.Thinking.WriteString(t.Thinking)
		a.ToolCalls = append(a.ToolCalls, t.ToolCalls...)
		a.Logprobs = append(a.Logprobs, t.Logprobs...)
		return c.out.piece(a, t)
	}
	var split *think.Splitter
	if c.split {
		split = think.New(think.Options{})
	}
	res, err := s.mgr.Generate(ctx, c.req, opts, func(t backend.Token) error {
		if t.PromptTokens > 0 && a.PromptTokens == 0 {
			a.PromptTokens, a.CachedTokens = t.PromptTokens, t.CachedTokens
		}
		if split != nil {
			th, tx := split.Write(t.Text)
			t.Text, t.Thinking = tx, t.Thinking+th
			if t.Text == "" && t.Thinking == "" && len(t.ToolCalls) == 0 && len(t.Logprobs) == 0 {
				return nil // the start of a tag, held back
			}
		}
		return deliver(t)
	})
	if split != nil {
		// A tag's start held back at the end was text after all.
		if th, tx := split.Flush(); th != "" || tx != "" {
			if derr := deliver(backend.Token{Text: tx, Thinking: th, ID: -1}); err == nil {
				err = derr
			}
		}
	}
	if err != nil && r.Context().Err() == nil && s.shuttingDown() {
		err = fmt.Errorf("%w (%v)", errShuttingDown, err)
	}
	if err != nil && r.Context().Err() == nil && c.stop != nil && c.stop.Err() != nil {
		err = context.Cause(c.stop)
	}
	a.Result, a.Total, a.Err = res, time.Since(a.Start), err
	if res.Backend != "" {
		a.Backend = res.Backend
	}
	if res.Fallback != "" {
		a.Fallback = res.Fallback
	}
	if c.observe != nil && c.observe.end != nil {
		c.observe.end(a)
	}
	// A whole answer is written at once: bound it like a stream's event.
	rc.SetWriteDeadline(time.Now().Add(s.opts.WriteTimeout))
	if err != nil {
		if clientGone(r, err) {
			return
		}
		ae := s.classify(err)
		if ae.status >= 500 && ae.code != "shutting_down" {
			s.log.Warn("generation failed", "path", r.URL.Path, "pieces", a.Pieces, "err", err)
		}
		c.out.fail(a, ae)
		return
	}
	if err := c.out.finish(a); err != nil {
		s.log.Debug("write answer", "path", r.URL.Path, "err", err)
	}
}

// clientHost is the client's address without its port.
func clientHost(r *http.Request) string {
	if h, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		return h
	}
	return r.RemoteAddr
}
