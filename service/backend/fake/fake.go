// Package fake is a scripted backend for tests: it answers every request
// with text derived from the request (by default an echo of the last user
// message), one word per token, honouring max tokens, stop strings and
// cancellation exactly as a real backend must. It lets the service and the
// web layer be tested end to end, with real HTTP clients, on any machine.
package fake

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/npuchat/npuchat/enginekind"
	"github.com/npuchat/npuchat/service/backend"
)

// Options configure a fake backend.
type Options struct {
	Name          string        // served model name (default "fake")
	ContextLength int           // prompt tokens allowed (default 4096)
	LoadDelay     time.Duration // time Load takes
	UnloadDelay   time.Duration // time Unload takes (a process stopping)
	TokenDelay    time.Duration // time between tokens
	LoadErr       error         // returned by Load when set
	// Reply computes the answer text for a request; the default echoes
	// the last user message (or the raw prompt) after "echo: ".
	Reply func(req *backend.Request) string
	// FailAfter, when > 0, makes Generate fail with FailErr after emitting
	// that many tokens (FailAfter = 0 with FailErr set fails before the
	// first token).
	FailAfter int
	FailErr   error
	Kind      enginekind.Kind // Kind() result (default enginekind.Fake)
	// Capabilities are what the fake says it can do (default: completion
	// only); requests for anything else are refused as a real backend
	// refuses them (backend.CheckSupported).
	Capabilities []string
	// Calls, when set, scripts tool calls: they are emitted after the
	// reply's text, and the answer finishes with tool_calls.
	Calls func(req *backend.Request) []backend.ToolCall
	// NoRecord keeps Requests empty, for long tests that must not hold
	// every request in memory.
	NoRecord bool
	// Cached is how many of each prompt's tokens the results say came
	// from a KV cache (at most the prompt's).
	Cached int
	// BeforeToken, when set, runs before each token is made; an error
	// (the request's context ending) ends the generation with it. Tests
	// hold answers running with it for as long as they look, however
	// slow the machine, instead of guessing a TokenDelay.
	BeforeToken func(ctx context.Context) error
}

// Backend is the fake backend. It is safe for concurrent use.
type Backend struct {
	opts Options

	mu       sync.Mutex
	loaded   bool
	loads    int
	unloads  int
	active   int // Generate calls running now
	maxActve int // most Generate calls that ever ran at once
	requests []backend.Request
	warmed   []string // WarmCache's tags
}

// New returns a fake backend.
func New(opts Options) *Backend {
	if opts.Name == "" {
		opts.Name = "fake"
	}
	if opts.ContextLength == 0 {
		opts.ContextLength = 4096
	}
	if opts.Kind == "" {
		opts.Kind = enginekind.Fake
	}
	return &Backend{opts: opts}
}

// Kind implements backend.Backend.
func (b *Backend) Kind() enginekind.Kind { return b.opts.Kind }

// Load implements backend.Backend.
func (b *Backend) Load(ctx context.Context, progress func(backend.Progress)) error {
	steps := 4
	for i := 1; i <= steps; i++ {
		if err := sleep(ctx, b.opts.LoadDelay/time.Duration(steps)); err != nil {
			return err
		}
		if progress != nil {
			progress(backend.Progress{Stage: "loading fake weights", Done: int64(i), Total: int64(steps), Frac: float64(i) / float64(steps)})
		}
	}
	if b.opts.LoadErr != nil {
		return b.opts.LoadErr
	}
	b.mu.Lock()
	b.loaded = true
	b.loads++
	b.mu.Unlock()
	return nil
}

// Unload implements backend.Backend.
func (b *Backend) Unload(ctx context.Context) error {
	time.Sleep(b.opts.UnloadDelay)
	b.mu.Lock()
	if b.loaded {
		b.unloads++
	}
	b.loaded = false
	b.mu.Unlock()
	return nil
}

// Info implements backend.Backend.
func (b *Backend) Info() backend.ModelInfo {
	return backend.ModelInfo{Name: b.opts.Name, Family: "fake", ParameterSize: "0B", Quantization: "none", Format: "fake", ContextLength: b.opts.ContextLength, Capabilities: b.caps()}
}

// Generate implements backend.Backend.
func (b *Backend) Generate(ctx context.Context, req *backend.Request, emit func(backend.Token) error) (backend.Result, error) {
	b.mu.Lock()
	if !b.loaded {
		b.mu.Unlock()
		return backend.Result{}, backend.ErrNotLoaded
	}
	if !b.opts.NoRecord {
		b.requests = append(b.requests, *req)
	}
	b.active++
	if b.active > b.maxActve {
		b.maxActve = b.active
	}
	b.mu.Unlock()
	defer func() {
		b.mu.Lock()
		b.active--
		b.mu.Unlock()
	}()

	limit := backend.ContextFor(req, b.opts.ContextLength) // the request's own, at most the loaded one
	res := backend.Result{PromptTokens: PromptTokens(req), Backend: b.opts.Kind, ContextLength: limit}
	if err := backend.CheckSupported(req, b.caps(), "the "+string(b.opts.Kind)+" backend"); err != nil {
		return res, err
	}
	if req.Messages != nil {
		// the oldest turns are left out of a chat that does not fit, as
		// the CPU engine does
		fit, err := backend.FitMessages(req.Messages, limit, backend.AnswerRoom(req, limit),
			func(ms []backend.Message) (int, error) { return PromptTokens(&backend.Request{Messages: ms}), nil },
			func(m backend.Message) int { return 4 + len(strings.Fields(m.Content)) })
		if err != nil {
			return res, fmt.Errorf("fake: %w", err)
		}
		res.PromptTokens, res.OmittedMessages = fit.Tokens, fit.Omitted
	}
	if res.PromptTokens > limit {
		return res, fmt.Errorf("fake: %d prompt tokens, context %d: %w", res.PromptTokens, limit, backend.ErrPromptTooLong)
	}
	res.CachedTokens = min(b.opts.Cached, res.PromptTokens)
	emit = backend.StampPrompt(emit, res.PromptTokens, res.CachedTokens)
	reply := ""
	if b.opts.Reply != nil {
		reply = b.opts.Reply(req)
	} else {
		reply = "echo: " + lastText(req)
	}
	words := strings.SplitAfter(reply, " ")
	start := time.Now()
	res.PrefillDuration = time.Millisecond
	var text strings.Builder
	held := 0 // bytes of text already emitted
	for i, w := range words {
		if b.opts.FailErr != nil && i == b.opts.FailAfter {
			return res, b.opts.FailErr
		}
		if req.MaxTokens > 0 && i >= req.MaxTokens {
			res.FinishReason = backend.FinishLength
			break
		}
		if b.opts.BeforeToken != nil {
			if err := b.opts.BeforeToken(ctx); err != nil {
				return res, err
			}
		}
		if err := sleep(ctx, b.opts.TokenDelay); err != nil {
			return res, err
		}
		res.CompletionTokens++
		text.WriteString(w)
		full := text.String()
		if cut, ok := stopAt(full, req.Stop); ok {
			if cut > held {
				if err := emit(backend.Token{Text: full[held:cut], ID: -1}); err != nil {
					return res, err
				}
			}
			res.FinishReason = backend.FinishStop
			for _, s := range req.Stop {
				if s != "" && strings.HasPrefix(full[cut:], s) {
					res.StopSequence = s
					break
				}
			}
			break
		}
		// Hold back a suffix that could still become a stop string.
		safe := len(full) - partialStop(full, req.Stop)
		if safe > held {
			if err := emit(backend.Token{Text: full[held:safe], ID: i, Logprobs: b.logprobs(req, full[held:safe])}); err != nil {
				return res, err
			}
			held = safe
		}
	}
	if res.FinishReason == "" {
		if full := text.String(); held < len(full) {
			if err := emit(backend.Token{Text: full[held:], ID: -1}); err != nil {
				return res, err
			}
		}
		res.FinishReason = backend.FinishStop
		if b.opts.Calls != nil && len(req.Tools) > 0 && req.ToolChoice.Mode != backend.ToolNone {
			if calls := b.opts.Calls(req); len(calls) > 0 {
				if err := emit(backend.Token{ID: -1, ToolCalls: calls}); err != nil {
					return res, err
				}
				res.FinishReason = backend.FinishToolCalls
			}
		}
	}
	res.DecodeDuration = time.Since(start)
	return res, nil
}

func (b *Backend) caps() []string {
	if b.opts.Capabilities != nil {
		return b.opts.Capabilities
	}
	return []string{backend.CapCompletion}
}

// logprobs scripts one log-probability per emitted piece: -0.5, with
// the piece and "x" as the alternatives.
func (b *Backend) logprobs(req *backend.Request, text string) []backend.Logprob {
	if !req.Logprobs {
		return nil
	}
	lp := backend.Logprob{Token: text, Bytes: []byte(text), Logprob: -0.5}
	if req.TopLogprobs > 0 {
		lp.Top = []backend.TopLogprob{{Token: text, Bytes: []byte(text), Logprob: -0.5}, {Token: "x", Bytes: []byte("x"), Logprob: -1.5}}
		lp.Top = lp.Top[:min(len(lp.Top), req.TopLogprobs)]
	}
	return []backend.Logprob{lp}
}

// Requests returns copies of the requests Generate has seen.
func (b *Backend) Requests() []backend.Request {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]backend.Request(nil), b.requests...)
}

// Counts reports how often the backend was loaded and unloaded, and the
// most Generate calls that ever ran at the same time.
func (b *Backend) Counts() (loads, unloads, maxConcurrent int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.loads, b.unloads, b.maxActve
}

// WarmCache implements backend.CacheWarmer: it records the tag.
func (b *Backend) WarmCache(tag string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.warmed = append(b.warmed, tag)
}

// Warmed returns the tags WarmCache was called with, in order.
func (b *Backend) Warmed() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.warmed...)
}

// Loaded reports whether the backend is loaded.
func (b *Backend) Loaded() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.loaded
}

// PromptTokens counts a request's prompt the fake way: one token per
// word, plus four per chat message for the template.
func PromptTokens(req *backend.Request) int {
	if req.Messages == nil {
		return len(strings.Fields(req.Prompt))
	}
	n := 0
	for _, m := range req.Messages {
		n += 4 + len(strings.Fields(m.Content))
	}
	return n
}

func lastText(req *backend.Request) string {
	if req.Messages == nil {
		return req.Prompt
	}
	for i := len(req.Messages) - 1; i >= 0; i-- {
		if req.Messages[i].Role == "user" {
			return req.Messages[i].Content
		}
	}
	return ""
}

// stopAt returns where the earliest stop string starts in s.
func stopAt(s string, stops []string) (int, bool) {
	best, found := len(s), false
	for _, st := range stops {
		if st == "" {
			continue
		}
		if i := strings.Index(s, st); i >= 0 && i < best {
			best, found = i, true
		}
	}
	return best, found
}

// partialStop returns the length of the longest suffix of s that is a
// proper prefix of a stop string.
func partialStop(s string, stops []string) int {
	longest := 0
	for _, st := range stops {
		for n := min(len(st)-1, len(s)); n > longest; n-- {
			if strings.HasSuffix(s, st[:n]) {
				longest = n
				break
			}
		}
	}
	return longest
}

func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
