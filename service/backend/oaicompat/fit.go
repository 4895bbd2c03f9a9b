package oaicompat

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/npuchat/npuchat/service/backend"
)

// Counter gives the length in tokens of a chat rendered into a model's
// prompt: its chat template and tokenizer (the FLM backend's, from the
// model's folder).
type Counter func(msgs []backend.Message) (int, error)

// bytesPerToken is what an estimate counts a token as when the model's
// own tokenizer is not at hand (a remote server): fewer bytes than
// English text takes (about four) and about what code and CJK text take,
// so that an estimate leaves out a turn too many rather than too few.
const bytesPerToken = 3

// maxBytesPerToken is more than any tokenizer's average on real text: a
// prompt of fewer tokens than its bytes over this cannot be.
const maxBytesPerToken = 8

// keptTurn is where a chat's system messages end and its last user
// message starts: what backend.FitMessages always keeps.
func keptTurn(msgs []backend.Message) (sys, last int) {
	for sys < len(msgs) && msgs[sys].Role == "system" {
		sys++
	}
	last = len(msgs) - 1
	for last > sys && msgs[last].Role != "user" {
		last--
	}
	return sys, max(last, sys)
}

// estimate is a chat's length in tokens when no Counter is given: its
// text at bytesPerToken, and the template's markers of each message.
func estimate(msgs []backend.Message) (int, error) {
	n := 0
	for _, m := range msgs {
		n += estimateOne(m)
	}
	return n + 2, nil
}

func estimateOne(m backend.Message) int {
	n := len(m.Content) + len(m.Name)
	for _, c := range m.ToolCalls {
		n += len(c.Name) + len(c.Arguments)
	}
	return (n+bytesPerToken-1)/bytesPerToken + 6
}

// fit leaves out the oldest turns of a chat that does not fit the context
// (the request's own, at most the server's: backend.ContextFor), as the
// CPU engine does (backend.FitMessages), counting with the model's
// tokenizer (Options.Count) or else an estimate. It returns the request
// to send (req itself when nothing changes) and the fit; a chat whose
// last turn alone does not fit gets backend.ErrPromptTooLong with the
// sizes before anything is sent. With no context known, or a raw prompt,
// it changes nothing.
func (c *Client) fit(req *backend.Request) (*backend.Request, backend.Fit, int, error) {
	c.mu.Lock()
	server, count := c.ctxLen, c.count
	c.mu.Unlock()
	limit := backend.ContextFor(req, server)
	if req.Messages == nil || limit <= 0 {
		return req, backend.Fit{Messages: req.Messages}, limit, nil
	}
	estimated := count == nil
	if estimated {
		count = estimate
	}
	size := func(m backend.Message) int { return estimateOne(m) }
	f, err := backend.FitMessages(req.Messages, limit, backend.AnswerRoom(req, limit), count, size)
	if err != nil && estimated && errors.Is(err, backend.ErrPromptTooLong) {
		// An estimate is no proof: refuse only what cannot fit at any
		// count (maxBytesPerToken a token), else send the system prompt
		// and the last turn and let the server judge (its error is put
		// in the same words: overflow).
		sys, last := keptTurn(req.Messages)
		kept := append(append([]backend.Message(nil), req.Messages[:sys]...), req.Messages[last:]...)
		bytes := 0
		for _, m := range kept {
			bytes += len(m.Content)
		}
		if least := bytes / maxBytesPerToken; least >= limit {
			return nil, f, limit, fmt.Errorf("the system prompt and the last message take at least %d tokens (%d bytes), more than the context holds (%d tokens): shorten them, or raise the context length: %w",
				least, bytes, limit, backend.ErrPromptTooLong)
		}
		n, _ := estimate(kept)
		f, err = backend.Fit{Messages: kept, Omitted: last - sys, Tokens: n}, nil
	}
	if err != nil {
		return nil, f, limit, err
	}
	// the request's own context is smaller than the server's (or the
	// server's is unknown)
	own := req.ContextLength > 0 && limit == req.ContextLength && (server <= 0 || limit < server)
	if f.Omitted == 0 && !own {
		return req, f, limit, nil
	}
	out := *req
	out.Messages = f.Messages
	if own {
		// the request's own context is smaller than the server's: the
		// answer stops where that context is full
		if room := limit - f.Tokens; room > 0 && (out.MaxTokens == 0 || out.MaxTokens > room) {
			out.MaxTokens = room
		}
	}
	return &out, f, limit, nil
}

// overflowError is an upstream's "the prompt does not fit" in the words
// the CPU engine uses (backend.FitMessages), naming the sizes; it
// unwraps to the upstream's *Error (and so to backend.ErrPromptTooLong).
type overflowError struct {
	msg string
	err *Error
}

func (e *overflowError) Error() string { return e.msg + ": " + backend.ErrPromptTooLong.Error() }
func (e *overflowError) Unwrap() error { return e.err }

// overflow turns an upstream's context error into NPU Chat's words: the
// prompt's size as counted here, the context it had (0: the server did
// not say), and what the server said.
func overflow(err *Error, tokens, limit int, estimated bool) error {
	about := ""
	if estimated {
		about = "about "
	}
	said := err.Message
	if said == "" {
		said = fmt.Sprintf("HTTP %d", err.StatusCode)
	}
	if limit > 0 {
		return &overflowError{err: err, msg: fmt.Sprintf("the prompt takes %s%d tokens and room for the answer, more than the context holds (%d tokens): shorten it, or raise the context length (the server said %q)",
			about, tokens, limit, said)}
	}
	return &overflowError{err: err, msg: fmt.Sprintf("the prompt takes %s%d tokens, more than the server's context holds: shorten it, or raise the context length (the server said %q)",
		about, tokens, said)}
}

// reportedContext is the context a server says it serves model with:
// vLLM's max_model_len and OpenRouter's or LM Studio's context_length in
// its GET /v1/models entry, else the llama.cpp server's n_ctx in GET
// /props (the slot's context, what a request gets), else 0.
func (c *Client) reportedContext(ctx context.Context, entries []modelEntry, model string) int {
	for _, e := range entries {
		if e.ID != model {
			continue
		}
		for _, n := range []int{e.MaxModelLen, e.LoadedContextLength, e.ContextLength} {
			if n > 0 {
				return n
			}
		}
	}
	root := strings.TrimSuffix(c.base, "/v1")
	// a server without /props answers 404 at once; one that does not
	// answer does not hold the load up
	ctx, cancel := context.WithTimeout(ctx, propsTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, root+"/props", nil)
	if err != nil {
		return 0
	}
	c.authorize(req)
	resp, err := c.http.Do(req)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0
	}
	var props struct {
		NCtx     int `json:"n_ctx"`
		Defaults struct {
			NCtx int `json:"n_ctx"`
		} `json:"default_generation_settings"`
	}
	if json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&props) != nil {
		return 0
	}
	if props.Defaults.NCtx > 0 {
		return props.Defaults.NCtx
	}
	return max(props.NCtx, 0)
}

// propsTimeout bounds the wait for GET /props at Load.
const propsTimeout = 5 * time.Second

// modelEntry is one entry of GET /v1/models, with the context fields
// servers add.
type modelEntry struct {
	ID                  string `json:"id"`
	MaxModelLen         int    `json:"max_model_len"`         // vLLM
	ContextLength       int    `json:"context_length"`        // OpenRouter, NPU Chat
	LoadedContextLength int    `json:"loaded_context_length"` // LM Studio
}
