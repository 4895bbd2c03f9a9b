// Package flm runs a model on the NPU through FastFlowLM: a
// backend.Backend that starts `flm serve <tag>` as a supervised child
// process on a private loopback port and talks to it through its
// OpenAI-compatible API (service/backend/oaicompat).
//
// FastFlowLM's engine libraries export no C ABI, so its executable and
// REST server are its one interface; this package drives them the way
// Lemonade does (flm serve <tag> --host 127.0.0.1 --port <free> --quiet
// [--ctx-len N], readiness by polling GET /api/tags), plus --cors 0.
//
// Supervision:
//   - the child dies with NPU Chat: on Linux the kernel kills it when its
//     parent dies (Pdeathsig, from a thread that lives as long as the
//     child); on Windows it runs in a job object that kills it when NPU
//     Chat's last handle closes;
//   - Unload stops it with SIGINT (FLM's "Press Ctrl+C to stop"), then
//     SIGTERM, and kills it if it is still there after Options.StopGrace
//     (on Windows, where a child without a console cannot be asked to
//     stop, it terminates its job object at once);
//   - when it dies while loaded, it is restarted with exponential backoff,
//     a bounded number of times, and Options.OnState hears every change;
//   - its output goes to Options.Log, and its last lines are quoted in
//     errors.
//
// Errors: a request that fails on the device (FastFlowLM's
// ERT_CMD_STATE_TIMEOUT, runlist failures, a missing device, the process
// dying mid-answer) wraps backend.ErrDeviceFailed and unwraps to
// *oaicompat.Error, whose Emitted says how much text the caller had
// already received (0: the request can be retried elsewhere whole).
//
// Dependencies: golang.org/x/sys v0.50.0 for the Windows job object and
// console control events (the standard syscall package lacks them).
package flm

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/npuchat/npuchat/childproc"
	"github.com/npuchat/npuchat/enginekind"
	"github.com/npuchat/npuchat/npu/childserver"
	"github.com/npuchat/npuchat/service/backend"
	"github.com/npuchat/npuchat/service/backend/oaicompat"
)

// Options configure a Backend. The caller passes everything; the package
// reads no environment variable of its own.
type Options struct {
	// Executable is the path of `flm` (or flm.exe).
	Executable string
	// Model is the FastFlowLM tag to serve, e.g. "minicpm5:2b".
	Model string
	// BaseEnv is the child's environment before Env; nil means this
	// process's environment (flm needs PATH, HOME and the XRT variables).
	BaseEnv []string
	// Env adds "KEY=value" entries to the child's environment, e.g.
	// FLM_CONFIG_PATH, FLM_XCLBIN_PATH and FLM_MODEL_PATH.
	Env []string
	// ContextLength, when > 0, is passed as --ctx-len (FLM raises it to at
	// least 512 and rounds it up to a power of two: childserver.ServedContext). When
	// 0, FLM serves the model's default_context_length from its
	// model_list.json entry, which Info.ContextLength should give.
	ContextLength int
	// Count gives a chat's length in tokens with the model's own
	// tokenizer and chat template (read from its folder); a chat longer
	// than the served context is sent without its oldest turns, as the
	// CPU engine does (oaicompat's fit). nil counts an estimate from the
	// text's bytes.
	Count oaicompat.Counter
	// Log receives the child's stdout and stderr (NPU Chat's log folder);
	// nil discards them. LogLines recent lines are kept for error messages
	// (default 200).
	Log      io.Writer
	LogLines int
	// StartTimeout bounds the wait for the server to answer (default 3m:
	// FLM loads the weights to the NPU before it listens).
	StartTimeout time.Duration
	// PollInterval is the readiness poll period (default 250ms).
	PollInterval time.Duration
	// StopGrace is how long Unload waits after SIGINT before it kills
	// (default 5s; SIGTERM goes half way).
	StopGrace time.Duration
	// IdleTimeout ends a request on which FLM has sent nothing for this
	// long as a device failure: a hung NPU (default 10m, which exceeds the
	// prefill of a full 32K context; negative: never). FLM's own watchdog
	// (the amdxdna TDR, ERT_CMD_STATE_TIMEOUT) normally answers first.
	IdleTimeout time.Duration
	// Restart says how a child that died while loaded is restarted.
	Restart RestartPolicy
	// HTTPClient talks to the child; nil means a client without timeout
	// (cancellation comes from contexts).
	HTTPClient *http.Client
	// OnState, if set, hears every state change. It is called from the
	// backend's goroutines and must not block or call the Backend.
	OnState func(Event)
	// Info fills what Info reports beyond the name, format and context
	// length (family, parameter size, quantization, path).
	Info backend.ModelInfo
}

// RestartPolicy bounds restarts after crashes.
type RestartPolicy struct {
	// MaxAttempts is how many restarts are tried in a row before the
	// backend gives up and enters StateFailed (default 3; negative: never
	// restart).
	MaxAttempts int
	// Backoff is the wait before the first restart, doubled for each
	// further attempt (default 1s), up to MaxBackoff (default 30s).
	Backoff, MaxBackoff time.Duration
	// ResetAfter: a child that ran this long counts as healthy, and the
	// attempt count starts again (default 1m).
	ResetAfter time.Duration
}

// State is where the backend is in its life: childserver's states, of
// which FLM's supervision uses all.
type State = childserver.State

// States.
const (
	StateStopped    = childserver.StateStopped    // not loaded
	StateStarting   = childserver.StateStarting   // flm serve started, not answering yet
	StateReady      = childserver.StateReady      // serving
	StateRestarting = childserver.StateRestarting // the child died; a restart is pending
	StateFailed     = childserver.StateFailed     // the child died and restarts failed; Unload to reset
)

// Event is a state change.
type Event = childserver.Event

// Backend is FastFlowLM serving one model. Make one with New.
type Backend struct {
	opts Options
	log  *childproc.LogRing
	http *http.Client
	slot *childserver.Slot // the child, its client and the state

	life childserver.Lifecycle // serialises Load and Unload; Unload cancels a Load

	mu       sync.Mutex // guards the supervisor's fields
	stopSup  context.CancelFunc
	supDone  chan struct{}
	stopping bool
}

// New checks opts, fills defaults and returns an unloaded Backend.
func New(opts Options) (*Backend, error) {
	if opts.Executable == "" {
		return nil, errors.New("flm backend: no flm executable given")
	}
	if opts.Model == "" {
		return nil, errors.New("flm backend: no model tag given")
	}
	if opts.StartTimeout <= 0 {
		opts.StartTimeout = 3 * time.Minute
	}
	if opts.PollInterval <= 0 {
		opts.PollInterval = 250 * time.Millisecond
	}
	if opts.StopGrace <= 0 {
		opts.StopGrace = 5 * time.Second
	}
	if opts.IdleTimeout == 0 {
		opts.IdleTimeout = 10 * time.Minute
	}
	r := &opts.Restart
	if r.MaxAttempts == 0 {
		r.MaxAttempts = 3
	}
	if r.Backoff <= 0 {
		r.Backoff = time.Second
	}
	if r.MaxBackoff <= 0 {
		r.MaxBackoff = 30 * time.Second
	}
	if r.ResetAfter <= 0 {
		r.ResetAfter = time.Minute
	}
	b := &Backend{opts: opts, log: childproc.NewLogRing(opts.Log, opts.LogLines), http: cmp.Or(opts.HTTPClient, &http.Client{}), slot: childserver.NewSlot(opts.OnState)}
	return b, nil
}

// Kind is enginekind.NPU.
func (b *Backend) Kind() enginekind.Kind { return enginekind.NPU }

// Info describes the model.
func (b *Backend) Info() backend.ModelInfo {
	info := b.opts.Info
	info.Name = b.opts.Model
	if info.Format == "" {
		info.Format = "q4nx"
	}
	if b.opts.ContextLength > 0 {
		info.ContextLength = childserver.ServedContext(b.opts.ContextLength)
	}
	info.Capabilities = Capabilities()
	return info
}

// Capabilities is what the backend does with any model: plain
// completion (see Generate for why not tools, JSON or logprobs).
func Capabilities() []string { return []string{backend.CapCompletion} }

// State is the backend's state now.
func (b *Backend) State() State { return b.slot.State() }

// PID is the running child's process id, or 0.
func (b *Backend) PID() int { return b.slot.PID() }

// BaseURL is the running child's address (http://127.0.0.1:port), or "".
func (b *Backend) BaseURL() string {
	if c := b.slot.Server(); c != nil {
		return c.URL("")
	}
	return ""
}

// RecentLog returns up to n of the child's last output lines.
func (b *Backend) RecentLog(n int) []string { return b.log.Since(0, n) }

// Load starts `flm serve` and returns when it answers and lists the model.
// An Unload meanwhile stops the child and makes it return
// childserver.ErrUnloaded.
func (b *Backend) Load(ctx context.Context, progress func(backend.Progress)) error {
	ctx, end := b.life.Load(ctx)
	defer end()
	switch b.slot.State() {
	case StateStopped:
	case StateFailed:
		return fmt.Errorf("FastFlowLM failed; unload it first: %w", cmp.Or(b.slot.LastErr(), backend.ErrDeviceFailed))
	default:
		return nil // loaded, or restarting under supervision
	}
	b.mu.Lock()
	b.stopping = false
	b.mu.Unlock()

	c, client, err := childserver.Launch(ctx, b.slot, b.launcher(progress, 0))
	if err != nil {
		err = childserver.Why(ctx, err)
		b.slot.Set(Event{State: StateStopped, Err: err})
		return err
	}
	supCtx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	b.mu.Lock()
	b.stopSup, b.supDone = stop, done
	b.mu.Unlock()
	b.slot.Ready(c, client, 0)
	go b.supervise(supCtx, c, done)
	return nil
}

// launcher says how to start `flm serve`: ready when GET /api/tags
// answers 200.
func (b *Backend) launcher(progress func(backend.Progress), attempt int) childserver.Launcher {
	return childserver.Launcher{
		Spec: childserver.Spec{
			Name: "FastFlowLM", Command: "flm serve " + b.opts.Model, Executable: b.opts.Executable,
			Args: b.serveArgs, Log: b.log, Missing: "is FastFlowLM installed?", Alive: "/api/tags",
			// FLM checks GitHub for a newer version at every serve unless
			// told not to (its README); NPU Chat pins the version it runs.
			// Options.Env, coming after, can override it.
			BaseEnv: b.opts.BaseEnv, Env: append([]string{"FLM_DISABLE_UPDATE_CHECK=1"}, b.opts.Env...),
		},
		Wait:    childserver.Wait{Timeout: b.opts.StartTimeout, PollInterval: b.opts.PollInterval},
		Loading: fmt.Sprintf("loading %s on the NPU", b.opts.Model),
		Report:  progress,
		Probe: func(c *childserver.Server) childserver.Probe {
			return func(ctx context.Context) (bool, error) {
				_, ok := childserver.Get(ctx, b.http, c.URL("/api/tags"), 2*time.Second)
				return ok, nil
			}
		},
		Client: oaicompat.Options{
			Model: b.opts.Model, HTTPClient: b.http, Kind: enginekind.NPU, Info: b.Info(), IdleTimeout: max(b.opts.IdleTimeout, 0),
			// FLM's /v1/models says no context: the one it serves is known here
			ContextLength: b.Info().ContextLength, Count: b.opts.Count,
		},
		Grace: b.opts.StopGrace, Attempt: attempt,
		Unknown: func(pe *ProcessError) error {
			// Not a device failure: FLM's list lacks the tag (v0.9.45 exits).
			return fmt.Errorf("FastFlowLM does not know model %q: is it in the model_list.json that FLM_CONFIG_PATH names? %s", b.opts.Model, pe.Message)
		},
		NotServed: func(err error) error {
			// Older FLM versions serve llama3.2:1b instead of an unknown tag.
			return fmt.Errorf("FastFlowLM does not serve %q: is it in the model_list.json that FLM_CONFIG_PATH names? %w", b.opts.Model, err)
		},
	}
}

// serveArgs are flm's arguments for serving on port. --cors 0: FLM
// answers CORS preflights with "*" by default, which would let any web
// page drive the NPU on this private port; NPU Chat's own server is the
// one that faces browsers.
func (b *Backend) serveArgs(port int) []string {
	args := []string{"serve", b.opts.Model, "--host", "127.0.0.1", "--port", strconv.Itoa(port), "--cors", "0", "--quiet"}
	if b.opts.ContextLength > 0 {
		args = append(args, "--ctx-len", strconv.Itoa(b.opts.ContextLength))
	}
	return args
}

// ProcessError is a failure of the `flm serve` process: it exited while
// starting, never answered, or died. It wraps backend.ErrDeviceFailed.
type ProcessError = childserver.ProcessError

// supervise restarts the child when it dies, until ctx is cancelled.
func (b *Backend) supervise(ctx context.Context, c *childserver.Server, done chan struct{}) {
	defer close(done)
	attempt := 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.Done():
		}
		crash := c.Error("exited", nil)
		b.mu.Lock()
		stopping := b.stopping
		b.mu.Unlock()
		if stopping {
			return
		}
		b.slot.Forget(c)
		c.Release()
		if time.Since(c.ReadyAt) >= b.opts.Restart.ResetAfter {
			attempt = 0
		}
		var err error = crash
		for {
			attempt++
			if b.opts.Restart.MaxAttempts < 0 || attempt > b.opts.Restart.MaxAttempts {
				b.log.Note(fmt.Sprintf("giving up after %d restarts: %v", attempt-1, err))
				b.slot.Set(Event{State: StateFailed, Err: err})
				return
			}
			b.slot.Set(Event{State: StateRestarting, Attempt: attempt, Err: err})
			wait := b.opts.Restart.Backoff << (attempt - 1)
			if wait > b.opts.Restart.MaxBackoff || wait <= 0 {
				wait = b.opts.Restart.MaxBackoff
			}
			b.log.Note(fmt.Sprintf("flm exited; restart %d in %v", attempt, wait))
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
			var nc *childserver.Server
			var client *oaicompat.Client
			nc, client, err = childserver.Launch(ctx, b.slot, b.launcher(nil, attempt))
			if ctx.Err() != nil {
				return
			}
			if err == nil {
				b.slot.Ready(nc, client, attempt)
				c = nc
				break
			}
		}
	}
}

// Generate runs one request on the child's /v1/chat/completions (or
// /v1/completions). When the device or the process fails, the error wraps
// backend.ErrDeviceFailed and *oaicompat.Error (how much was emitted).
func (b *Backend) Generate(ctx context.Context, req *backend.Request, emit func(backend.Token) error) (backend.Result, error) {
	// FastFlowLM's server reads "tools" but NPU Chat does not pass them
	// or read its calls back: what its answers carry for a call (OpenAI's
	// tool_calls or the template's markup) and for which families is not
	// known here (research/flm.md says only that the server reads the
	// field, and the catalog's port is not labelled "tool-calling"). It has
	// no response_format and no logprobs (configure_chat_engine_parameters).
	// Refuse them plainly; in auto mode the service sends such requests
	// to the CPU engine loaded beside this one (service.Manager).
	if err := backend.CheckSupported(req, b.Info().Capabilities, "FastFlowLM, the NPU engine (use the CPU engine for this: --engine cpu)"); err != nil {
		return backend.Result{}, err
	}
	c, client, err := b.slot.Serving("FastFlowLM " + b.opts.Model)
	if err != nil {
		return backend.Result{}, err
	}
	seq := b.log.Seq()
	res, err := client.Generate(ctx, req, emit)
	if err == nil || ctx.Err() != nil || !errors.Is(err, backend.ErrDeviceFailed) {
		return res, err
	}
	// A device failure: FLM's own error messages come from a live process.
	return res, c.RequestError(ctx, b.http, "FastFlowLM "+b.opts.Model, seq, err)
}

// Unload stops the child: SIGINT, SIGTERM, then, after Options.StopGrace,
// a kill (on Windows a kill at once). It makes a running Generate return,
// and a Load in progress: that one kills the child it was starting.
func (b *Backend) Unload(ctx context.Context) error {
	defer b.life.Unload()()
	if b.slot.State() == StateStopped && b.slot.Server() == nil {
		return nil
	}
	b.mu.Lock()
	b.stopping = true
	stop, supDone := b.stopSup, b.supDone
	b.stopSup, b.supDone = nil, nil
	b.mu.Unlock()
	if stop != nil {
		stop()
		<-supDone // a restart in progress stops its own child
	}
	return b.slot.Stop(ctx, b.opts.StopGrace)
}

var _ backend.Backend = (*Backend)(nil)
