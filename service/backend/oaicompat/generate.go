package oaicompat

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/npuchat/npuchat/service/backend"
)

// generation is the state of one Generate call.
type generation struct {
	endpoint string
	emit     func(backend.Token) error
	stop     *stopFilter
	alive    func() // called whenever the server sends something; may be nil

	start, first, end time.Time
	emitted           int
	text              strings.Builder
	finish            string
	stopped           bool // a stop string ended the answer here
	calls             callParts
	logprobs          []backend.Logprob // not yet sent with text
	usage             *wireUsage
	timings           *wireTimings
}

// wireChunk is one streamed chunk (chat.completion.chunk or
// text_completion), or a whole non-streamed answer.
type wireChunk struct {
	Choices []struct {
		Index int `json:"index"`
		Delta struct {
			Content *string `json:"content"`
			// ReasoningContent is a reasoning model's thinking, sent apart
			// from the answer (vLLM, OpenFlowLM's server: research/oflm.md §6).
			ReasoningContent *string        `json:"reasoning_content"`
			ToolCalls        []wireToolCall `json:"tool_calls"`
		} `json:"delta"`
		Message *struct {
			Content   *string        `json:"content"`
			ToolCalls []wireToolCall `json:"tool_calls"`
		} `json:"message"`
		Text         *string       `json:"text"`
		FinishReason *string       `json:"finish_reason"`
		Logprobs     *wireLogprobs `json:"logprobs"`
	} `json:"choices"`
	Usage   *wireUsage   `json:"usage"`
	Timings *wireTimings `json:"timings"`
}

// wireUsage is the OpenAI usage object plus FastFlowLM's extras (durations
// in seconds, speeds in tokens per second).
type wireUsage struct {
	PromptTokens        int     `json:"prompt_tokens"`
	CompletionTokens    int     `json:"completion_tokens"`
	PrefillDurationTTFT float64 `json:"prefill_duration_ttft"`
	DecodingDuration    float64 `json:"decoding_duration"`
	PrefillSpeedTPS     float64 `json:"prefill_speed_tps"`
	DecodingSpeedTPS    float64 `json:"decoding_speed_tps"`
}

// wireTimings is the llama.cpp server's "timings" object.
type wireTimings struct {
	PromptN     int     `json:"prompt_n"`
	PromptMS    float64 `json:"prompt_ms"`
	PredictedN  int     `json:"predicted_n"`
	PredictedMS float64 `json:"predicted_ms"`
}

// run sends req and reads the answer.
func (g *generation) run(hc *http.Client, req *http.Request) (backend.Result, error) {
	resp, err := hc.Do(req)
	if err != nil {
		return backend.Result{}, g.broken("could not send the request", err)
	}
	defer resp.Body.Close()
	g.heard()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		msg, _, _ := parseError(body, true)
		if msg == "" {
			msg = snippet(body)
		}
		return backend.Result{}, g.upstream(resp.StatusCode, msg)
	}
	if !isEventStream(resp.Header.Get("Content-Type")) {
		// FastFlowLM answers a streamed request that failed before its
		// first chunk with HTTP 200 and a plain JSON error body; other
		// servers may ignore "stream" and send the whole answer.
		return g.readWhole(resp.Body)
	}
	return g.readStream(resp.Body)
}

// readStream reads server-sent events until [DONE].
func (g *generation) readStream(body io.Reader) (backend.Result, error) {
	r := newSSEReader(body)
	r.onLine = g.heard
	for {
		ev, err := r.Next()
		if err == io.EOF {
			if g.finish != "" {
				break // the answer was complete; the server sends no [DONE]
			}
			return backend.Result{}, g.broken("the stream ended before the answer was complete", io.ErrUnexpectedEOF)
		}
		if err != nil {
			return backend.Result{}, g.broken("the stream broke off", err)
		}
		if ev.Error != "" || ev.Name == "error" {
			payload := ev.Error
			if payload == "" {
				payload = ev.Data
			}
			msg, code, ok := parseError([]byte(payload), true)
			if !ok || msg == "" {
				msg = payload
			}
			return backend.Result{}, g.upstream(code, msg)
		}
		data := strings.TrimSpace(ev.Data)
		if data == "" {
			continue
		}
		if data == "[DONE]" {
			break
		}
		if msg, code, ok := parseError([]byte(data), false); ok {
			return backend.Result{}, g.upstream(code, msg)
		}
		var ch wireChunk
		if err := json.Unmarshal([]byte(data), &ch); err != nil {
			return backend.Result{}, &Error{URL: g.endpoint, Message: "unreadable chunk " + snippet([]byte(data)),
				Emitted: g.emitted, EmittedText: g.text.String(), Cause: err}
		}
		done, err := g.chunk(&ch)
		if err != nil {
			return backend.Result{}, err
		}
		if done {
			return g.result(), nil // a stop string: the caller's cancel closes the upstream
		}
	}
	if err := g.send(g.stop.flush()); err != nil {
		return backend.Result{}, err
	}
	if err := g.sendRest(); err != nil {
		return backend.Result{}, err
	}
	return g.result(), nil
}

// sendRest sends the tool calls and the log-probabilities no text carried.
func (g *generation) sendRest() error {
	calls := g.calls.calls()
	if len(calls) == 0 && len(g.logprobs) == 0 {
		return nil
	}
	t := backend.Token{ID: -1, ToolCalls: calls, Logprobs: g.logprobs}
	g.logprobs = nil
	if len(calls) > 0 {
		g.finish = "tool_calls"
	}
	if g.emit != nil {
		return g.emit(t)
	}
	return nil
}

// readWhole reads a non-streamed answer or error.
func (g *generation) readWhole(body io.Reader) (backend.Result, error) {
	b, err := io.ReadAll(io.LimitReader(body, 16<<20))
	if err != nil {
		return backend.Result{}, g.broken("the answer broke off", err)
	}
	if msg, code, ok := parseError(b, false); ok {
		return backend.Result{}, g.upstream(code, msg)
	}
	var ch wireChunk
	if err := json.Unmarshal(b, &ch); err != nil || len(ch.Choices) == 0 {
		return backend.Result{}, &Error{URL: g.endpoint, Message: "unexpected answer " + snippet(b), Cause: err}
	}
	done, err := g.chunk(&ch)
	if err != nil {
		return backend.Result{}, err
	}
	if !done {
		if err := g.send(g.stop.flush()); err != nil {
			return backend.Result{}, err
		}
		if err := g.sendRest(); err != nil {
			return backend.Result{}, err
		}
	}
	if g.finish == "" {
		g.finish = backend.FinishStop
	}
	return g.result(), nil
}

// chunk takes one chunk's text, finish reason and usage. done is true
// when a stop string ended the answer.
func (g *generation) chunk(ch *wireChunk) (done bool, err error) {
	if ch.Usage != nil {
		g.usage = ch.Usage
	}
	if ch.Timings != nil {
		g.timings = ch.Timings
	}
	for _, c := range ch.Choices {
		if c.Index != 0 {
			continue // one answer per request
		}
		g.calls.add(c.Delta.ToolCalls)
		if c.Message != nil {
			g.calls.add(c.Message.ToolCalls)
		}
		g.logprobs = append(g.logprobs, c.Logprobs.convert()...)
		if r := c.Delta.ReasoningContent; r != nil && *r != "" {
			if err := g.think(*r); err != nil {
				return false, err
			}
		}
		var piece string
		switch {
		case c.Delta.Content != nil:
			piece = *c.Delta.Content
		case c.Text != nil:
			piece = *c.Text
		case c.Message != nil && c.Message.Content != nil:
			piece = *c.Message.Content
		}
		if piece != "" {
			if g.first.IsZero() {
				g.first = time.Now()
			}
			out, stopped := g.stop.push(piece)
			if err := g.send(out); err != nil {
				return false, err
			}
			if stopped {
				g.stopped = true
				g.end = time.Now()
				return true, nil
			}
		}
		if c.FinishReason != nil && *c.FinishReason != "" {
			g.finish = *c.FinishReason
			g.end = time.Now()
		}
	}
	return false, nil
}

// heard pushes back the idle watchdog.
func (g *generation) heard() {
	if g.alive != nil {
		g.alive()
	}
}

// think passes reasoning text to emit as Thinking and counts it: the
// caller has received something, so the request cannot be retried
// elsewhere whole. Stop strings do not apply to it.
func (g *generation) think(text string) error {
	if g.first.IsZero() {
		g.first = time.Now()
	}
	if g.emit != nil {
		if err := g.emit(backend.Token{Thinking: text, ID: -1}); err != nil {
			return err
		}
	}
	g.emitted++
	return nil
}

// send passes text to emit and counts it.
func (g *generation) send(text string) error {
	if text == "" {
		return nil
	}
	if g.emit != nil {
		t := backend.Token{Text: text, ID: -1, Logprobs: g.logprobs}
		g.logprobs = nil
		if err := g.emit(t); err != nil {
			return err
		}
	}
	g.emitted++
	g.text.WriteString(text)
	return nil
}

// result builds the Result from what the server reported, and from the
// clock where it reported nothing.
func (g *generation) result() backend.Result {
	if g.end.IsZero() {
		g.end = time.Now()
	}
	r := backend.Result{FinishReason: mapFinish(g.finish)}
	if g.stopped {
		r.FinishReason, r.StopSequence = backend.FinishStop, g.stop.seen
	}
	if u := g.usage; u != nil {
		r.PromptTokens = u.PromptTokens
		r.CompletionTokens = u.CompletionTokens
		r.PrefillDuration = seconds(u.PrefillDurationTTFT)
		r.DecodeDuration = seconds(u.DecodingDuration)
		if r.PrefillDuration == 0 && u.PrefillSpeedTPS > 0 && r.PromptTokens > 0 {
			r.PrefillDuration = seconds(float64(r.PromptTokens) / u.PrefillSpeedTPS)
		}
		if r.DecodeDuration == 0 && u.DecodingSpeedTPS > 0 && r.CompletionTokens > 0 {
			r.DecodeDuration = seconds(float64(r.CompletionTokens) / u.DecodingSpeedTPS)
		}
	}
	if t := g.timings; t != nil {
		if r.PromptTokens == 0 {
			r.PromptTokens = t.PromptN
		}
		if r.CompletionTokens == 0 {
			r.CompletionTokens = t.PredictedN
		}
		if r.PrefillDuration == 0 {
			r.PrefillDuration = seconds(t.PromptMS / 1000)
		}
		if r.DecodeDuration == 0 {
			r.DecodeDuration = seconds(t.PredictedMS / 1000)
		}
	}
	if r.CompletionTokens == 0 {
		r.CompletionTokens = g.emitted
	}
	if r.PrefillDuration == 0 && !g.first.IsZero() {
		r.PrefillDuration = g.first.Sub(g.start)
	}
	if r.DecodeDuration == 0 && !g.first.IsZero() {
		r.DecodeDuration = g.end.Sub(g.first)
	}
	return r
}

// mapFinish maps a server's finish reason to backend.FinishStop or
// backend.FinishLength.
func mapFinish(reason string) string {
	switch reason {
	case "length", "max_tokens", "model_length":
		return backend.FinishLength
	case "tool_calls", "function_call":
		return backend.FinishToolCalls
	}
	return backend.FinishStop
}

func seconds(s float64) time.Duration {
	if s <= 0 || s != s || s > 1e9 { // also NaN and absurd values
		return 0
	}
	return time.Duration(s * float64(time.Second))
}

// upstream is the Error for a failure the server reported.
func (g *generation) upstream(status int, msg string) *Error {
	return &Error{
		URL: g.endpoint, StatusCode: status, Message: msg,
		Emitted: g.emitted, EmittedText: g.text.String(),
		Kind: Classify(status, msg),
	}
}

// broken is the Error for a connection that failed or broke off: the
// process serving the model died, or the server went away.
func (g *generation) broken(what string, cause error) *Error {
	if errors.Is(cause, io.EOF) {
		cause = io.ErrUnexpectedEOF
	}
	return &Error{
		URL: g.endpoint, Message: what,
		Emitted: g.emitted, EmittedText: g.text.String(),
		Kind: backend.ErrDeviceFailed, Cause: cause,
	}
}
