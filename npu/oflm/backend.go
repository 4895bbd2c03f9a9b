package oflm

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/npuchat/npuchat/childproc"
	"github.com/npuchat/npuchat/enginekind"
	"github.com/npuchat/npuchat/npu/childserver"
	"github.com/npuchat/npuchat/service/backend"
	"github.com/npuchat/npuchat/service/backend/oaicompat"
)

// EndMarkers are the texts that end an answer of MiniCPM5 whatever the
// request's stop strings: the chat template's end of turn and the end of
// text. oflm stops only at its tokenizer_config's eos ids and may stream
// `<|im_end|>` on until max_tokens, so NPU Chat cuts there itself.
var EndMarkers = []string{"<|im_end|>", "<|endoftext|>"}

// DefaultMaxTokens caps an answer whose request gave no max_tokens; oflm's
// own default is 4096 (rest_handler.cpp), which a run-on answer would
// spend on the NPU after the text was cut.
const DefaultMaxTokens = 1024

// Options configure a Backend. The caller passes everything; the package
// reads no environment variable of its own.
type Options struct {
	// Executable is the oflm to run (Locator.Find).
	Executable string
	// Tag is the registry tag to serve (default Tag).
	Tag string
	// BaseEnv is the child's environment before Env; nil means this
	// process's environment.
	BaseEnv []string
	// Env adds "KEY=value" entries: Layout.ServeEnv.
	Env []string
	// ContextLength is passed as --ctx-len (oflm: at least 512, rounded
	// up to a power of two: childserver.ServedContext); the registry's default_context_length (the
	// kernel set's max_ctx_default) is what it should be.
	ContextLength int
	// MaxTokens caps answers whose request gives no max_tokens (default
	// DefaultMaxTokens).
	MaxTokens int
	// Count gives a chat's length in tokens (oaicompat's fit); nil
	// estimates from the text.
	Count oaicompat.Counter
	// Log receives the child's output; LogLines recent lines are kept for
	// errors (default 200).
	Log      io.Writer
	LogLines int
	// StartTimeout bounds the wait for the port and the load (default 5m:
	// oflm loads the weights before it listens). PollInterval is the
	// readiness poll period (default 250ms).
	StartTimeout, PollInterval time.Duration
	// IdleTimeout ends a request on which oflm sent nothing for this long
	// as a device failure (default 10m; negative: never).
	IdleTimeout time.Duration
	// HTTPClient talks to the child; nil is a client without timeout.
	HTTPClient *http.Client
	// OnState, if set, hears every state change; it must not block or
	// call the Backend.
	OnState func(Event)
	// Info fills what Info reports beyond name, format and context.
	Info backend.ModelInfo
}

// State is where the backend is in its life: childserver's states, but
// for StateRestarting (oflm's child is not restarted: a failed backend
// waits for Load or Unload).
type State = childserver.State

// States.
const (
	StateStopped  = childserver.StateStopped  // not loaded
	StateStarting = childserver.StateStarting // oflm serve started, loading
	StateReady    = childserver.StateReady    // serving
	StateFailed   = childserver.StateFailed   // the child died; Unload to reset, Load to start again
)

// Event is a state change.
type Event = childserver.Event

// Backend is oflm serving one model on the NPU. Make one with New.
type Backend struct {
	opts Options
	log  *childproc.LogRing
	http *http.Client
	slot *childserver.Slot // the child, its client and the state

	life childserver.Lifecycle // serialises Load and Unload; Unload cancels a Load
}

// New checks opts, fills defaults and returns an unloaded Backend.
func New(opts Options) (*Backend, error) {
	if opts.Executable == "" {
		return nil, errors.New("oflm backend: no oflm executable given")
	}
	if opts.Tag == "" {
		opts.Tag = Tag
	}
	if opts.MaxTokens <= 0 {
		opts.MaxTokens = DefaultMaxTokens
	}
	if opts.StartTimeout <= 0 {
		opts.StartTimeout = 5 * time.Minute
	}
	if opts.PollInterval <= 0 {
		opts.PollInterval = 250 * time.Millisecond
	}
	if opts.IdleTimeout == 0 {
		opts.IdleTimeout = 10 * time.Minute
	}
	b := &Backend{opts: opts, log: childproc.NewLogRing(opts.Log, opts.LogLines), http: cmp.Or(opts.HTTPClient, &http.Client{}), slot: childserver.NewSlot(opts.OnState)}
	return b, nil
}

// Kind is enginekind.OFLM: the NPU, by the oflm route.
func (b *Backend) Kind() enginekind.Kind { return enginekind.OFLM }

// Info describes the model.
func (b *Backend) Info() backend.ModelInfo {
	info := b.opts.Info
	if info.Name == "" {
		info.Name = b.opts.Tag
	}
	if info.Format == "" {
		info.Format = "q4nx"
	}
	if b.opts.ContextLength > 0 {
		info.ContextLength = childserver.ServedContext(b.opts.ContextLength)
	}
	info.Capabilities = []string{backend.CapCompletion}
	return info
}

// State is the backend's state now.
func (b *Backend) State() State { return b.slot.State() }

// PID is the running child's process id, or 0.
func (b *Backend) PID() int { return b.slot.PID() }

// RecentLog returns up to n of the child's last output lines.
func (b *Backend) RecentLog(n int) []string { return b.log.Since(0, n) }

// Load starts `oflm serve <tag>` and returns when its port answers and
// GET /api/ps names the tag. A child that failed to load ("model-faker"
// in /api/ps) is stopped and its last output is the error. An Unload
// meanwhile stops the child and makes it return childserver.ErrUnloaded.
func (b *Backend) Load(ctx context.Context, progress func(backend.Progress)) error {
	ctx, done := b.life.Load(ctx)
	defer done()
	switch b.slot.State() {
	case StateReady:
		return nil
	case StateFailed:
		b.slot.Stop(context.Background(), 0)
	}
	c, client, err := childserver.Launch(ctx, b.slot, childserver.Launcher{
		Spec: childserver.Spec{
			Name: "oflm", Command: "oflm serve " + b.opts.Tag, Executable: b.opts.Executable,
			Args: b.serveArgs, BaseEnv: b.opts.BaseEnv, Env: b.opts.Env, Log: b.log,
			Missing: "install OpenFlowLM-Next: " + InstallLink, Alive: "/api/ps",
		},
		Wait:    childserver.Wait{Timeout: b.opts.StartTimeout, PollInterval: b.opts.PollInterval},
		Loading: fmt.Sprintf("loading %s on the NPU with oflm", b.opts.Tag),
		Report:  progress,
		Probe: func(c *childserver.Server) childserver.Probe {
			return func(ctx context.Context) (bool, error) { return b.loaded(ctx, c) }
		},
		Client: oaicompat.Options{
			Model: b.opts.Tag, HTTPClient: b.http, Kind: enginekind.NPU, Info: b.Info(), IdleTimeout: max(b.opts.IdleTimeout, 0),
			ContextLength: b.Info().ContextLength, Count: b.opts.Count,
		},
		Unknown: func(pe *ProcessError) error {
			return fmt.Errorf("oflm does not know model %q: is it in the registry OFLM_CONFIG_PATH names? %w", b.opts.Tag, pe)
		},
		NotServed: func(err error) error { return fmt.Errorf("oflm does not serve %q: %w", b.opts.Tag, err) },
	})
	if err != nil {
		err = childserver.Why(ctx, err)
		b.slot.Set(Event{State: StateStopped, Err: err})
		return err
	}
	b.slot.Ready(c, client, 0)
	go b.watch(c)
	return nil
}

// watch marks the backend failed when c dies while it serves.
func (b *Backend) watch(c *childserver.Server) {
	<-c.Done()
	if b.slot.Current(c) {
		b.slot.Set(Event{State: StateFailed, PID: c.PID, Err: c.Error("exited", nil)})
	}
}

// serveArgs are oflm's arguments for serving on port. --cors 0: oflm's
// server, like FLM's, allows any origin by default (vm_args.hpp: --cors
// 1), which would let any web page read answers from this private port;
// NPU Chat's own server faces browsers.
func (b *Backend) serveArgs(port int) []string {
	args := []string{"serve", b.opts.Tag, "--host", "127.0.0.1", "--port", strconv.Itoa(port)}
	if b.opts.ContextLength > 0 {
		args = append(args, "--ctx-len", strconv.Itoa(b.opts.ContextLength))
	}
	return append(args, "--cors", "0", "--quiet")
}

// loaded is the readiness probe: GET /api/ps. oflm loads the tag before
// it opens its port, so the first answer is final: models[0].name is the
// tag when loaded, "model-faker" (or nothing) after a failed load.
func (b *Backend) loaded(ctx context.Context, c *childserver.Server) (bool, error) {
	body, ok := childserver.Get(ctx, b.http, c.URL("/api/ps"), 5*time.Second)
	if !ok {
		return false, nil
	}
	var ps struct {
		Models []struct {
			Name string `json:"name"`
		} `json:"models"`
	}
	if err := json.Unmarshal(body, &ps); err != nil {
		return false, nil
	}
	name := ""
	if len(ps.Models) > 0 {
		name = ps.Models[0].Name
	}
	switch name {
	case b.opts.Tag:
		return true, nil
	case "model-faker", "":
		return false, c.Error(fmt.Sprintf("could not load %s (its server runs with no model)", b.opts.Tag), nil)
	default:
		return false, c.Error(fmt.Sprintf("serves %q, not %s", name, b.opts.Tag), nil)
	}
}

// ProcessError is a failure of `oflm serve`: it exited, failed to load,
// never answered, or died during a request. It wraps
// backend.ErrDeviceFailed, so the service falls back to the CPU, and its
// message quotes the child's last output.
type ProcessError = childserver.ProcessError

// Generate runs one request on oflm's /v1/chat/completions (a raw prompt
// on /v1/completions), always streamed, with a tight max_tokens (the request's, else
// Options.MaxTokens, within the served context). oflm ignores "stop", so
// the text is cut here at EndMarkers and at the request's stop strings,
// even when one is split across chunks, and the connection is then
// closed: the disconnect ends the job on the NPU. reasoning_content
// arrives as Token.Thinking.
func (b *Backend) Generate(ctx context.Context, req *backend.Request, emit func(backend.Token) error) (backend.Result, error) {
	if req == nil {
		return backend.Result{}, fmt.Errorf("generate: no request: %w", backend.ErrBadRequest)
	}
	if err := backend.CheckSupported(req, b.Info().Capabilities, "oflm, the NPU engine (use the CPU engine for this: --engine cpu)"); err != nil {
		return backend.Result{}, err
	}
	c, client, err := b.slot.Serving("oflm " + b.opts.Tag)
	if err != nil {
		return backend.Result{}, err
	}
	r := *req
	r.Stop = append(append([]string(nil), req.Stop...), EndMarkers...)
	r.MaxTokens = b.maxTokens(req.MaxTokens)
	seq := b.log.Seq()
	res, err := client.Generate(ctx, &r, emit)
	if contains(EndMarkers, res.StopSequence) {
		res.StopSequence = "" // the end of the turn, not one of the request's stop strings
	}
	if err == nil || ctx.Err() != nil {
		return res, err
	}
	var oe *oaicompat.Error
	if errors.As(err, &oe) && loadFailure(oe) {
		return res, fmt.Errorf("oflm could not load %s for the request: %w", b.opts.Tag, &ProcessError{
			Message: oe.Error(), Log: b.log.Since(seq, 8), Cause: err})
	}
	if !errors.Is(err, backend.ErrDeviceFailed) {
		return res, err
	}
	return res, c.RequestError(ctx, b.http, "oflm "+b.opts.Tag, seq, err)
}

// maxTokens is the max_tokens sent for a request that asked for asked
// (0: none): never oflm's default of 4096, never past the served context.
func (b *Backend) maxTokens(asked int) int {
	n := b.opts.MaxTokens
	if asked > 0 {
		n = asked
	}
	if ctx := b.Info().ContextLength; ctx > 0 {
		n = min(n, ctx)
	}
	return n
}

// loadFailure says whether an HTTP 400 or 500 error body is oflm's
// model_not_found or model_load_failed (openai_compat.hpp @15cdf9c).
func loadFailure(e *oaicompat.Error) bool {
	if e.StatusCode != http.StatusBadRequest && e.StatusCode != http.StatusInternalServerError {
		return false
	}
	m := strings.ToLower(e.Message)
	return strings.Contains(m, "model_load_failed") || strings.Contains(m, "model_not_found") || strings.Contains(m, "model-faker")
}

// Unload stops the child by killing it (oflm registers no signal
// handler; research/oflm.md §9) and makes a running Generate return, and
// a Load in progress: that one kills the child it was starting.
func (b *Backend) Unload(ctx context.Context) error {
	defer b.life.Unload()()
	return b.slot.Stop(ctx, 0)
}

var _ backend.Backend = (*Backend)(nil)
