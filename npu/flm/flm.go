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
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/npuchat/npuchat/npu/childproc"
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

// State is where the backend is in its life.
type State string

// States.
const (
	StateStopped    State = "stopped"    // not loaded
	StateStarting   State = "starting"   // flm serve started, not answering yet
	StateReady      State = "ready"      // serving
	StateRestarting State = "restarting" // the child died; a restart is pending
	StateFailed     State = "failed"     // the child died and restarts failed; Unload to reset
)

// Event is a state change.
type Event struct {
	State   State
	PID     int   // the child's process id, when there is one
	Attempt int   // the restart attempt (1-based), in StateStarting and StateRestarting after a crash
	Err     error // why, in StateRestarting and StateFailed
}

// Backend is FastFlowLM serving one model. Make one with New.
type Backend struct {
	opts Options
	log  *childproc.LogRing
	http *http.Client

	lifecycle sync.Mutex          // serialises Load and Unload
	loading   childserver.Loading // the Load in progress, which Unload cancels

	mu       sync.Mutex
	state    State
	cur      *child
	client   *oaicompat.Client
	lastErr  error
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
	b := &Backend{opts: opts, log: childproc.NewLogRing(opts.Log, opts.LogLines), http: opts.HTTPClient, state: StateStopped}
	if b.http == nil {
		b.http = &http.Client{}
	}
	return b, nil
}

// Kind is backend.NPU.
func (b *Backend) Kind() backend.Kind { return backend.NPU }

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
func (b *Backend) State() State {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.state
}

// PID is the running child's process id, or 0.
func (b *Backend) PID() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.cur == nil {
		return 0
	}
	return b.cur.PID
}

// BaseURL is the running child's address (http://127.0.0.1:port), or "".
func (b *Backend) BaseURL() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.cur == nil {
		return ""
	}
	return b.cur.URL("")
}

// RecentLog returns up to n of the child's last output lines.
func (b *Backend) RecentLog(n int) []string { return b.log.Since(0, n) }

func (b *Backend) setState(ev Event) {
	b.mu.Lock()
	b.state = ev.State
	if ev.Err != nil {
		b.lastErr = ev.Err
	}
	b.mu.Unlock()
	if b.opts.OnState != nil {
		b.opts.OnState(ev)
	}
}

// Load starts `flm serve` and returns when it answers and lists the model.
// An Unload meanwhile stops the child and makes it return
// childserver.ErrUnloaded.
func (b *Backend) Load(ctx context.Context, progress func(backend.Progress)) error {
	b.lifecycle.Lock()
	defer b.lifecycle.Unlock()
	ctx, end := b.loading.Begin(ctx)
	defer end()
	b.mu.Lock()
	if b.state != StateStopped {
		st := b.state
		b.mu.Unlock()
		if st == StateFailed {
			return fmt.Errorf("FastFlowLM failed; unload it first: %w", b.lastErrOr())
		}
		return nil // loaded, or restarting under supervision
	}
	b.stopping = false
	b.mu.Unlock()

	c, client, err := b.launch(ctx, progress, 0)
	if err != nil {
		err = childserver.Why(ctx, err)
		b.setState(Event{State: StateStopped, Err: err})
		return err
	}
	supCtx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	b.mu.Lock()
	b.cur, b.client, b.stopSup, b.supDone, b.lastErr = c, client, stop, done, nil
	b.mu.Unlock()
	b.setState(Event{State: StateReady, PID: c.PID})
	go b.supervise(supCtx, c, done)
	return nil
}

func (b *Backend) lastErrOr() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.lastErr != nil {
		return b.lastErr
	}
	return backend.ErrDeviceFailed
}

// launch starts a child and waits until it is ready. When the child
// could not bind the port picked for it (another program took it in the
// meantime), it tries once more with another port.
func (b *Backend) launch(ctx context.Context, progress func(backend.Progress), attempt int) (*child, *oaicompat.Client, error) {
	c, client, err := b.launchOnce(ctx, progress, attempt)
	if childserver.PortTaken(err) && ctx.Err() == nil {
		b.log.Note("the port was taken; trying another")
		return b.launchOnce(ctx, progress, attempt)
	}
	return c, client, err
}

// launchOnce starts one child and waits until it is ready.
func (b *Backend) launchOnce(ctx context.Context, progress func(backend.Progress), attempt int) (*child, *oaicompat.Client, error) {
	report := func(p backend.Progress) {
		if progress != nil {
			progress(p)
		}
	}
	env := b.opts.BaseEnv
	if env == nil {
		env = os.Environ()
	}
	report(backend.Progress{Stage: "starting FastFlowLM"})
	s, err := childserver.Start(childserver.Spec{
		Name: "FastFlowLM", Command: "flm serve " + b.opts.Model, Executable: b.opts.Executable,
		Args: b.serveArgs, Log: b.log, Missing: "is FastFlowLM installed?",
		// FLM checks GitHub for a newer version at every serve unless told
		// not to (its README); NPU Chat pins the version it runs.
		// Options.Env, coming after, can override it.
		Env: append(append(append([]string(nil), env...), "FLM_DISABLE_UPDATE_CHECK=1"), b.opts.Env...),
	})
	if err != nil {
		return nil, nil, err
	}
	c := &child{Server: s}
	b.mu.Lock()
	b.cur = c // so that PID sees a child that is still starting
	b.mu.Unlock()
	b.setState(Event{State: StateStarting, PID: c.PID, Attempt: attempt})

	fail := func(err error) (*child, *oaicompat.Client, error) {
		grace := b.opts.StopGrace
		if ctx.Err() != nil {
			grace = 0 // cancelled (by Unload, perhaps): a loading child keeps nothing
		}
		c.Stop(context.Background(), grace)
		b.mu.Lock()
		if b.cur == c {
			b.cur = nil
		}
		b.mu.Unlock()
		return nil, nil, err
	}
	wait := childserver.Wait{Timeout: b.opts.StartTimeout, PollInterval: b.opts.PollInterval, Progress: func(elapsed time.Duration) {
		report(backend.Progress{
			Stage: fmt.Sprintf("loading %s on the NPU (%ds)", b.opts.Model, int(elapsed.Seconds())),
			Done:  int64(elapsed / time.Second), Total: int64(b.opts.StartTimeout / time.Second),
		})
	}}
	// Ready when GET /api/tags answers 200.
	if err := c.WaitReady(ctx, wait, func(ctx context.Context) (bool, error) {
		_, ok := childserver.Get(ctx, b.http, c.URL("/api/tags"), 2*time.Second)
		return ok, nil
	}); err != nil {
		var pe *ProcessError
		if errors.As(err, &pe) && childserver.LogSays(pe.Log, "model not found") {
			// Not a device failure: FLM's list lacks the tag (v0.9.45 exits).
			err = fmt.Errorf("FastFlowLM does not know model %q: is it in the model_list.json that FLM_CONFIG_PATH names? %s", b.opts.Model, pe.Message)
		}
		return fail(err)
	}
	client, err := oaicompat.New(oaicompat.Options{
		BaseURL: c.URL(""), Model: b.opts.Model,
		HTTPClient: b.http, Kind: backend.NPU, Info: b.Info(), IdleTimeout: max(b.opts.IdleTimeout, 0),
		// FLM's /v1/models says no context: the one it serves is known here
		ContextLength: b.Info().ContextLength, Count: b.opts.Count,
	})
	if err == nil {
		err = client.Load(ctx, nil)
	}
	if err != nil {
		if ctx.Err() != nil {
			return fail(ctx.Err())
		}
		// Older FLM versions serve llama3.2:1b instead of an unknown tag.
		return fail(fmt.Errorf("FastFlowLM does not serve %q: is it in the model_list.json that FLM_CONFIG_PATH names? %w", b.opts.Model, err))
	}
	c.readyAt = time.Now()
	report(backend.Progress{Stage: "FastFlowLM ready", Frac: 1})
	return c, client, nil
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
func (b *Backend) supervise(ctx context.Context, c *child, done chan struct{}) {
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
		if b.stopping {
			b.mu.Unlock()
			return
		}
		if b.cur == c {
			b.cur, b.client = nil, nil
		}
		b.mu.Unlock()
		c.Release()
		if time.Since(c.readyAt) >= b.opts.Restart.ResetAfter {
			attempt = 0
		}
		var err error = crash
		for {
			attempt++
			if b.opts.Restart.MaxAttempts < 0 || attempt > b.opts.Restart.MaxAttempts {
				b.log.Note(fmt.Sprintf("giving up after %d restarts: %v", attempt-1, err))
				b.setState(Event{State: StateFailed, Err: err})
				return
			}
			b.setState(Event{State: StateRestarting, Attempt: attempt, Err: err})
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
			var nc *child
			var client *oaicompat.Client
			nc, client, err = b.launch(ctx, nil, attempt)
			if ctx.Err() != nil {
				return
			}
			if err == nil {
				b.mu.Lock()
				b.cur, b.client = nc, client
				b.mu.Unlock()
				b.setState(Event{State: StateReady, PID: nc.PID, Attempt: attempt})
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
	b.mu.Lock()
	state, c, client, lastErr := b.state, b.cur, b.client, b.lastErr
	b.mu.Unlock()
	switch {
	case state == StateStopped:
		return backend.Result{}, fmt.Errorf("FastFlowLM %s: %w", b.opts.Model, backend.ErrNotLoaded)
	case state == StateFailed:
		return backend.Result{}, fmt.Errorf("FastFlowLM %s is down: %w", b.opts.Model, cmp.Or(lastErr, backend.ErrDeviceFailed))
	case client == nil || state != StateReady:
		return backend.Result{}, fmt.Errorf("FastFlowLM %s is not ready (%s): %w", b.opts.Model, state, backend.ErrDeviceFailed)
	}
	seq := b.log.Seq()
	res, err := client.Generate(ctx, req, emit)
	if err == nil || ctx.Err() != nil || !errors.Is(err, backend.ErrDeviceFailed) {
		return res, err
	}
	// A device failure. When the connection broke, say whether the process
	// died with it; FLM's own error messages come from a live process.
	var oe *oaicompat.Error
	if errors.As(err, &oe) && oe.Cause != nil && c.Died(ctx, b.http, "/api/tags") || c.Exited() {
		return res, c.Error("died during the request", err)
	}
	if lines := b.log.Since(seq, 8); len(lines) > 0 {
		return res, fmt.Errorf("FastFlowLM %s on the NPU: %w; its output during the request:\n\t%s", b.opts.Model, err, strings.Join(lines, "\n\t"))
	}
	return res, fmt.Errorf("FastFlowLM %s on the NPU: %w", b.opts.Model, err)
}

// Unload stops the child: SIGINT, SIGTERM, then, after Options.StopGrace,
// a kill (on Windows a kill at once). It makes a running Generate return,
// and a Load in progress: that one kills the child it was starting.
func (b *Backend) Unload(ctx context.Context) error {
	b.loading.Cancel()
	b.lifecycle.Lock()
	defer b.lifecycle.Unlock()
	b.mu.Lock()
	if b.state == StateStopped && b.cur == nil {
		b.mu.Unlock()
		return nil
	}
	b.stopping = true
	stop, supDone, client := b.stopSup, b.supDone, b.client
	b.mu.Unlock()
	if client != nil {
		client.Unload(ctx)
	}
	if stop != nil {
		stop()
		<-supDone // a restart in progress stops its own child
	}
	b.mu.Lock()
	c := b.cur
	b.cur, b.client, b.stopSup, b.supDone = nil, nil, nil, nil
	b.mu.Unlock()
	var err error
	if c != nil {
		err = c.Stop(ctx, b.opts.StopGrace)
	}
	b.setState(Event{State: StateStopped})
	b.mu.Lock()
	b.lastErr = nil
	b.mu.Unlock()
	return err
}

var _ backend.Backend = (*Backend)(nil)
