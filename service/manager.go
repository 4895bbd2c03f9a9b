package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/npuchat/npuchat/service/backend"
)

// State is the model's state as people see it in the tray and the page.
type State string

// The model states.
const (
	StateOff     State = "off"     // no model in memory (Reason says why)
	StateLoading State = "loading" // a backend is loading the model
	StateOn      State = "on"      // ready to answer
	StateError   State = "error"   // loading failed (Error says why)
)

// Errors the Manager returns; the web layer maps them to HTTP statuses.
var (
	// ErrQueueFull: too many requests are waiting (HTTP 429).
	ErrQueueFull = errors.New("server busy: too many requests are waiting")
	// ErrModelOff: the user switched the model off (HTTP 503).
	ErrModelOff = errors.New("the model is switched off; start it from the tray, the chat page or POST /api/model/start")
	// ErrUnknownModel: no such model (HTTP 404).
	ErrUnknownModel = errors.New("model not found")
	// ErrNotInstalled: the model is known but its files are not here
	// (HTTP 503); the message says how to install it.
	ErrNotInstalled = errors.New("model not installed")
)

// Options configure a Manager. NewBackend and Engines connect it to the
// real backends (or fakes in tests); everything else has a default.
type Options struct {
	// Resolve maps a name a client sent ("minicpm5:2b", "MiniCPM5",
	// "my.gguf") to the canonical name it is served under, or an error
	// wrapping ErrUnknownModel.
	Resolve func(name string) (string, error)
	// Engines lists the backend kinds to try for a model, best first
	// ("npu", then "cpu" for the auto engine). The Manager falls back
	// along this list when a backend fails to load or its device fails.
	Engines func(model string) []string
	// NewBackend makes a backend of a kind for a model; it may take a
	// while (the NPU check), and ctx ends when the load is abandoned. An
	// error wrapping ErrNotInstalled leaves the model off with that error
	// as the reason.
	NewBackend func(ctx context.Context, model, kind string) (backend.Backend, error)
	// Models lists the models that can be served (catalog and local
	// files) for /v1/models and /api/tags.
	Models func() []ModelDesc
	// Capabilities says what model will be able to do when served with
	// the engines Engines lists (backend.CapTools, ...), from its files,
	// without loading it (nil, or an empty answer: unknown).
	Capabilities func(model string) []string
	// DefaultModel is the model Start("") starts before any model was
	// asked for, and the one Status names then (the tray's and the
	// page's switch start it; "" leaves Start("") an error).
	DefaultModel string
	// QueueSize is how many requests may wait while one runs (default 8).
	QueueSize int
	// KeepAlive is how long an idle model stays loaded (default 5
	// minutes; negative: forever; 0: unload after each request).
	KeepAlive time.Duration
	// RetryAfter is the Retry-After hint for a full queue (default 2s).
	RetryAfter time.Duration
	// Beside, when set, says whether a backend of kind may be loaded for
	// model while the serving backend stays loaded (for a request the
	// serving one cannot do, see Manager); an error says why not (not
	// enough free memory). nil allows it.
	Beside func(model, kind string) error
	Logger *slog.Logger
	// Now is the clock (time.Now by default).
	Now func() time.Time
}

// Status is a snapshot of the service, as /api/status and the tray show it.
type Status struct {
	State   State  `json:"state"`
	Model   string `json:"model,omitempty"`   // model loaded, loading, or last asked for
	Backend string `json:"backend,omitempty"` // kind of the backend serving it
	Enabled bool   `json:"enabled"`           // false when the user switched it off
	Reason  string `json:"reason,omitempty"`  // why the model is off
	Error   string `json:"error,omitempty"`   // why loading failed
	// Fallback says why the preferred backend is not the one serving.
	Fallback string `json:"fallback,omitempty"`
	// Beside is the kind of a second backend loaded beside the serving
	// one, for requests that one cannot do (FastFlowLM and tools), and
	// BesideReason why the last of them went there.
	Beside       string             `json:"beside,omitempty"`
	BesideReason string             `json:"beside_reason,omitempty"`
	Progress     *backend.Progress  `json:"progress,omitempty"`
	Info         *backend.ModelInfo `json:"info,omitempty"`
	Since        time.Time          `json:"since"`
	ExpiresAt    *time.Time         `json:"expires_at,omitempty"` // idle unload time
	Running      int                `json:"running"`              // generations running now
	Waiting      int                `json:"waiting"`              // requests in the queue
	Stats        Stats              `json:"stats"`
	// Seq grows with every event the service sends: of two statuses
	// read at different times (an event and a GET /api/status whose
	// answers may arrive in either order), the one with the larger Seq
	// is the newer, and a client never shows an older one over it.
	Seq uint64 `json:"seq"`
}

// Stats are counters and the last measured speeds.
type Stats struct {
	Requests         int64   `json:"requests"`
	PromptTokens     int64   `json:"prompt_tokens"`
	CompletionTokens int64   `json:"completion_tokens"`
	PrefillTokPerSec float64 `json:"prefill_tok_s"`
	DecodeTokPerSec  float64 `json:"decode_tok_s"`
	LoadSeconds      float64 `json:"load_s"`
}

// EventKind names what an Event reports. The manager publishes the
// status, progress, fallback and error kinds; other service-level
// components publish their own kinds (install) through Publish.
type EventKind string

// The event kinds, as /api/events names them ("event: status").
const (
	// EventStatus: the state, the model or the reason changed.
	EventStatus EventKind = "status"
	// EventProgress: loading moved on (Progress says how far).
	EventProgress EventKind = "progress"
	// EventFallback: a backend failed and the next engine is used
	// (Message says why).
	EventFallback EventKind = "fallback"
	// EventError: loading failed on every engine (Message says why).
	EventError EventKind = "error"
	// EventInstall: a model install moved on, finished or failed
	// (Install says how far); published by the install runner.
	EventInstall EventKind = "install"
)

// managerOwns reports whether the manager alone publishes kind: those
// events describe its state, and another publisher could contradict
// Status.
func managerOwns(kind EventKind) bool {
	switch kind {
	case EventStatus, EventProgress, EventFallback, EventError:
		return true
	}
	return false
}

// Event is something that happened, for the tray and the page. Status is
// the service's status when it was published.
type Event struct {
	Type     EventKind         `json:"type"`
	Message  string            `json:"message,omitempty"`
	Progress *backend.Progress `json:"progress,omitempty"`
	Install  *InstallProgress  `json:"install,omitempty"`
	Status   Status            `json:"status"`
	Time     time.Time         `json:"time"`
}

// InstallProgress is how far a model install has come, carried by
// EventInstall events.
type InstallProgress struct {
	Model string `json:"model"` // the model being installed, e.g. "minicpm5:2b"
	// Phase is a word for the step: "downloading", "verifying",
	// "done", "failed" or "cancelled".
	Phase          string  `json:"phase"`
	Done           int64   `json:"done,omitempty"`             // bytes fetched so far (of the whole install once known, else of the file)
	Total          int64   `json:"total,omitempty"`            // bytes in all, 0 if unknown
	BytesPerSecond float64 `json:"bytes_per_second,omitempty"` // current rate
	ETASeconds     float64 `json:"eta_s,omitempty"`            // time left, 0 if unknown
	Error          string  `json:"error,omitempty"`            // why it failed, for a person
	// The file downloading now, with its own bytes, and how many files
	// are done of how many the install downloads (0 if unknown).
	File       string `json:"file,omitempty"`
	FileDone   int64  `json:"file_done,omitempty"`
	FileTotal  int64  `json:"file_total,omitempty"`
	Files      int    `json:"files_done,omitempty"`
	FilesTotal int    `json:"files_total,omitempty"`
}

// GenerateOptions are per-request settings that are not the model's.
type GenerateOptions struct {
	// KeepAlive overrides the idle time after this request (Ollama's
	// keep_alive); nil keeps the default.
	KeepAlive *time.Duration
	// OnRun, when set, is called each time the request starts running on
	// a backend (again after a fallback, before any token of that run),
	// with the backend's kind and why the preferred backend is not the
	// one serving ("" when it is). The web layer names the engine in the
	// answer from it before the first token.
	OnRun func(kind, fallback string)
	// Ticket, when set, is the place in the queue the request reserved
	// before its body was read (Reserve); Generate and Load use it
	// instead of queueing again.
	Ticket *Ticket
}

// Ticket is a place in the request queue, taken with Reserve before a
// request's body is read, so that what the queue cannot take is refused
// before its body is held in memory.
type Ticket struct {
	m    *Manager
	used bool // m.mu guards: given to acquire or released
}

// Reserve takes a place in the queue (ErrQueueFull when there is none).
// Pass the ticket in GenerateOptions; Release it in any case when done
// (a no-op once Generate or Load used it).
func (m *Manager) Reserve() (*Ticket, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.waiting >= m.opts.QueueSize {
		return nil, ErrQueueFull
	}
	m.waiting++
	if m.idle != nil {
		m.idle.Stop() // busy: no idle unload while requests wait
	}
	return &Ticket{m: m}, nil
}

// Release gives the place back unless Generate or Load used it.
func (t *Ticket) Release() {
	if t == nil {
		return
	}
	t.m.mu.Lock()
	defer t.m.mu.Unlock()
	if !t.used {
		t.used = true
		t.m.waiting--
		t.m.rearmIdleLocked()
	}
}

// Manager owns the model's state and its backend. All methods are safe
// for concurrent use.
//
// # The state machine
//
// The model is in one of four states; every change goes through
// transitionLocked, which checks it against this table (allowed):
//
//	from     to       when
//	off      loading  Start, or a request while enabled
//	error    loading  Start, or a request (a new attempt)
//	loading  loading  an engine failed to load; the next is tried ("fallback" event)
//	loading  on       a backend loaded
//	loading  off      Stop (the load is cancelled), or the model is not installed
//	loading  error    the last engine failed to load ("error" event)
//	on       off      Stop, the idle keep-alive, Unload, another model wanted,
//	                  or the device failed (the next request loads the next engine)
//	error    off      Stop
//	off      off      the reason changed (Stop while off, an abandoned load ended)
//
// # A second backend beside the first
//
// A request that asks for what the serving backend cannot do (tools, a
// JSON format or logprobs on FastFlowLM, which refuses them) goes to the
// next engine for the model that is not failed (the CPU engine in auto
// mode), loaded beside the first one if Options.Beside allows it, while
// the first keeps serving everything else. The reason is recorded as a
// fallback's is, for that answer (OnRun, Result.Fallback) and in
// Status.Beside and BesideReason; the state does not change. The second
// backend shares the slot and the keep-alive, and goes with the first
// (Stop, the idle unload, Unload, another model, a device failure).
// When it may not be loaded, the request gets the first backend's
// UnsupportedError with the reason.
//
// Who may use the backend is a separate question, answered by the slot:
// one goroutine at a time holds it (a generation, a load, an unload).
// Stop does not wait for the slot to change the state: it switches the
// model off at once, cancels the running generation and load through
// their stored cancel functions, and sets the backend aside; the backend
// is unloaded by whoever gives the slot back next (giveSlot), so that a
// stuck answer cannot leave /api/status saying "on" for a model that is
// switched off.
type Manager struct {
	opts Options
	log  *slog.Logger

	slot chan struct{} // held by the one goroutine that uses the backend

	// mu guards everything below. It is never held while a backend
	// loads, generates or unloads.
	mu         sync.Mutex
	seq        uint64 // events sent so far (Status.Seq)
	enabled    bool   // false when the user switched the model off
	state      State
	model      string // loaded or loading or last wanted
	kind       string // kind of the backend loading or loaded
	be         backend.Backend
	beModel    string // the model be has loaded
	info       *backend.ModelInfo
	reason     string
	errMsg     string
	fallback   string
	failed     map[string]string // kind -> why it failed, for model
	progress   *backend.Progress
	since      time.Time
	waiting    int
	running    int
	genCancel  context.CancelFunc // cancels the running generation
	loadCancel context.CancelFunc // cancels the running load
	loadGen    int                // bumped by Stop to abandon loads
	orphans    []backend.Backend  // set aside by Stop, unloaded by giveSlot
	side       backend.Backend    // a second backend beside be (see above)
	sideKind   string             // its kind
	sideModel  string             // the model it has loaded
	sideWhy    string             // why the last request went to it
	sideCaps   []string           // its capabilities
	idle       *time.Timer
	expires    time.Time
	keepAlive  time.Duration
	stats      Stats
	subs       map[*subscriber]struct{}
	closed     bool
}

// New returns a Manager with the model off but enabled: the first request
// (or Start) loads it.
func New(opts Options) *Manager {
	if opts.QueueSize <= 0 {
		opts.QueueSize = 8
	}
	if opts.RetryAfter <= 0 {
		opts.RetryAfter = 2 * time.Second
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Resolve == nil {
		opts.Resolve = func(name string) (string, error) { return name, nil }
	}
	if opts.Engines == nil {
		opts.Engines = func(string) []string { return []string{"cpu"} }
	}
	m := &Manager{
		opts:      opts,
		log:       opts.Logger,
		slot:      make(chan struct{}, 1),
		enabled:   true,
		state:     StateOff,
		reason:    "not loaded yet; the model loads on the first request",
		failed:    map[string]string{},
		since:     opts.Now(),
		keepAlive: opts.KeepAlive,
		subs:      map[*subscriber]struct{}{},
		model:     opts.DefaultModel,
	}
	return m
}

// RetryAfter is the hint clients get with ErrQueueFull.
func (m *Manager) RetryAfter() time.Duration { return m.opts.RetryAfter }

// Resolve maps a requested model name to the name it is served under.
func (m *Manager) Resolve(name string) (string, error) { return m.opts.Resolve(name) }

// Status returns a snapshot of the state.
func (m *Manager) Status() Status {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.statusLocked()
}

func (m *Manager) statusLocked() Status {
	s := Status{
		State: m.state, Model: m.model, Backend: m.kind, Enabled: m.enabled,
		Reason: m.reason, Error: m.errMsg, Fallback: m.fallback, Since: m.since,
		Beside: m.sideKind, BesideReason: m.sideWhy,
		Running: m.running, Waiting: m.waiting, Stats: m.stats, Seq: m.seq,
	}
	if m.progress != nil {
		p := *m.progress
		s.Progress = &p
	}
	if m.info != nil {
		i := *m.info
		s.Info = &i
	}
	if !m.expires.IsZero() && m.state == StateOn {
		e := m.expires
		s.ExpiresAt = &e
	}
	return s
}

// publishLocked sends an event to every subscriber. m.mu must be held.
func (m *Manager) publishLocked(kind EventKind, msg string) {
	ev := Event{Type: kind, Message: msg}
	if kind == EventProgress && m.progress != nil {
		p := *m.progress
		ev.Progress = &p
	}
	m.sendLocked(ev)
}

// Publish sends an event of another service-level component (the
// install runner's EventInstall) to the same subscribers as the
// manager's own, stamped with the current status. The kinds that
// describe the model's state are the manager's alone.
func (m *Manager) Publish(ev Event) error {
	if ev.Type == "" || managerOwns(ev.Type) {
		return fmt.Errorf("publish %q event: only the manager publishes status, progress, fallback and error events", ev.Type)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return errors.New("publish: service closed")
	}
	m.sendLocked(ev)
	return nil
}

// allowed reports whether the state machine (see Manager) has the
// transition from -> to.
func allowed(from, to State) bool {
	switch from {
	case StateOff:
		return to == StateOff || to == StateLoading
	case StateLoading:
		return true // on, off, error, or loading the next engine
	case StateOn:
		return to == StateOff
	case StateError:
		return to == StateLoading || to == StateOff
	}
	return false
}

// transitionLocked changes the state and publishes it. m.mu must be held.
// A change the table does not have is a bug: it is logged, and made, so
// that the state stays what the service really is.
func (m *Manager) transitionLocked(to State, msg string) {
	if !allowed(m.state, to) {
		m.log.Error("illegal state transition (a bug)", "from", m.state, "to", to, "msg", msg)
	}
	if m.state != to {
		m.since = m.opts.Now()
	}
	m.state = to
	if to != StateLoading {
		m.progress = nil
	}
	m.publishLocked(EventStatus, msg)
}

// Start switches the model on and loads it in the background; progress
// and the outcome arrive as events. model "" means the last one.
func (m *Manager) Start(model string) error {
	if model != "" {
		name, err := m.opts.Resolve(model)
		if err != nil {
			return err // a typo changes nothing: what is loaded stays loaded
		}
		model = name
	}
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return errors.New("service closed")
	}
	if model == "" {
		model = m.model
	}
	if model == "" { // nothing changes: a switched-off model stays off
		m.mu.Unlock()
		return fmt.Errorf("start: no model named: %w", ErrUnknownModel)
	}
	m.enabled = true
	if m.model != model {
		m.failed = map[string]string{}
	}
	if m.state == StateError || m.state == StateOff {
		// A new attempt: forget earlier failures, the user may have fixed them.
		m.failed = map[string]string{}
		m.fallback = ""
	}
	m.model = model
	m.reason = ""
	m.publishLocked(EventStatus, "starting "+model)
	m.mu.Unlock()
	go func() {
		m.slot <- struct{}{}
		_, err := m.ensureLoaded(context.Background(), model)
		m.giveSlot()
		if err != nil {
			m.log.Warn("start model", "model", model, "err", err)
			return
		}
		m.armIdle(nil)
	}()
	return nil
}

// Stop switches the model off: at once the state is off, requests answer
// ErrModelOff until Start, the running generation and load are
// cancelled and the backend is set aside. Stop then waits (within ctx)
// for the slot and unloads the backend; if ctx ends first (an answer
// that does not stop), the state is still off and the backend is
// unloaded as soon as the slot is given back.
func (m *Manager) Stop(ctx context.Context) error {
	m.mu.Lock()
	m.enabled = false
	m.loadGen++
	if m.genCancel != nil {
		m.genCancel()
	}
	if m.loadCancel != nil {
		m.loadCancel()
	}
	if be := m.detachLocked("switched off"); be != nil {
		m.orphans = append(m.orphans, be)
	}
	if side := m.takeSideLocked(); side != nil {
		m.orphans = append(m.orphans, side)
	}
	m.mu.Unlock()
	if err := m.takeSlot(ctx); err != nil {
		m.log.Warn("stop: the running answer or load has not ended yet; its backend unloads when it does", "err", err)
		return nil
	}
	m.giveSlot()
	return nil
}

// Close stops the model and ends every subscription. The process is
// ending: a backend Stop set aside because an answer still held the slot
// is unloaded now (within ctx) rather than when the answer ends, so
// that no FastFlowLM child outlives NPU Chat.
func (m *Manager) Close(ctx context.Context) error {
	// Wait for the slot half the time there is, keeping the rest for
	// unloading what a stuck answer holds.
	sctx := ctx
	if dl, ok := ctx.Deadline(); ok {
		var cancel context.CancelFunc
		sctx, cancel = context.WithTimeout(ctx, time.Until(dl)/2)
		defer cancel()
	}
	err := m.Stop(sctx)
	m.mu.Lock()
	orphans := m.orphans
	m.orphans = nil
	m.mu.Unlock()
	if len(orphans) > 0 {
		done := make(chan struct{})
		go func() {
			defer close(done)
			for _, be := range orphans {
				m.unload(ctx, be)
			}
		}()
		select {
		case <-done:
		case <-ctx.Done():
			err = errors.Join(err, fmt.Errorf("close: the backend did not unload in time: %w", ctx.Err()))
		}
	}
	m.mu.Lock()
	m.closed = true
	if m.idle != nil {
		m.idle.Stop()
	}
	for sub := range m.subs {
		m.endLocked(sub)
	}
	m.mu.Unlock()
	return err
}

// detachLocked takes the backend out of service: the state becomes off
// with reason and the backend is returned for the caller to unload after
// releasing m.mu (unloading FastFlowLM means waiting for its process, and
// Status must not wait for that). m.mu must be held; the caller holds
// the slot or hands the backend to giveSlot (m.orphans).
func (m *Manager) detachLocked(reason string) backend.Backend {
	be := m.be
	m.be, m.beModel, m.kind, m.info = nil, "", "", nil
	m.expires = time.Time{}
	if m.idle != nil {
		m.idle.Stop()
	}
	m.reason, m.errMsg = reason, ""
	m.transitionLocked(StateOff, reason)
	return be
}

// unload unloads a detached backend. m.mu must not be held; the caller
// holds the slot.
func (m *Manager) unload(ctx context.Context, be backend.Backend) {
	if be == nil {
		return
	}
	if err := be.Unload(ctx); err != nil {
		m.log.Warn("unload", "backend", be.Kind(), "err", err)
	}
}

// ensureLoaded makes model loaded on the best backend that works. The
// caller holds the slot. It returns the backend to use. Loading goes on
// when the caller's ctx ends (a client that gave up), so that the next
// request finds the model ready; Stop abandons it.
func (m *Manager) ensureLoaded(ctx context.Context, model string) (backend.Backend, error) {
	m.mu.Lock()
	if !m.enabled {
		m.mu.Unlock()
		return nil, ErrModelOff
	}
	if m.be != nil && m.beModel == model && m.state == StateOn {
		be := m.be
		m.mu.Unlock()
		return be, nil
	}
	if m.be != nil || m.side != nil {
		be := m.detachLocked("switching to " + model)
		side := m.takeSideLocked()
		m.mu.Unlock()
		m.unload(ctx, be)
		m.unload(ctx, side)
		m.mu.Lock()
	}
	if m.beModel != model && m.model != model {
		m.failed = map[string]string{}
		m.fallback = ""
	}
	m.model = model
	gen := m.loadGen
	m.mu.Unlock()

	lctx := context.WithoutCancel(ctx)
	kinds := m.opts.Engines(model)
	var lastErr error
	for i, kind := range kinds {
		m.mu.Lock()
		why, bad := m.failed[kind]
		m.mu.Unlock()
		if bad {
			lastErr = errors.New(why)
			continue
		}
		be, err := m.load(lctx, model, kind, gen)
		if err == nil {
			return be, nil
		}
		lastErr = err
		if errors.Is(err, ErrModelOff) {
			break
		}
		if errors.Is(err, ErrNotInstalled) || i == len(kinds)-1 {
			// Not a failure to remember: it may be installed or fixed by
			// the next request, and there is nothing to fall back to.
			continue
		}
		m.mu.Lock()
		m.failed[kind] = fmt.Sprintf("%s backend: %v", kind, err)
		m.fallback = m.failed[kind]
		m.publishLocked(EventFallback, m.failed[kind])
		m.mu.Unlock()
	}
	if lastErr == nil {
		lastErr = fmt.Errorf("no backend can serve %s", model)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	switch {
	case errors.Is(lastErr, ErrModelOff) || m.loadGen != gen:
		if m.be == nil && m.state != StateOff { // abandoned by Stop
			m.reason, m.errMsg = "switched off", ""
			m.transitionLocked(StateOff, m.reason)
		}
		return nil, ErrModelOff
	case errors.Is(lastErr, ErrNotInstalled):
		m.reason, m.errMsg = lastErr.Error(), ""
		m.transitionLocked(StateOff, m.reason)
	default:
		m.reason, m.errMsg = "", lastErr.Error()
		m.transitionLocked(StateError, m.errMsg)
		m.publishLocked(EventError, m.errMsg)
	}
	return nil, lastErr
}

// load makes and loads one backend. The caller holds the slot. Stop
// abandons it: loadGen changes and the stored loadCancel cancels the
// context given to NewBackend and Load.
func (m *Manager) load(ctx context.Context, model, kind string, gen int) (backend.Backend, error) {
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	m.mu.Lock()
	if m.loadGen != gen {
		m.mu.Unlock()
		return nil, ErrModelOff
	}
	m.loadCancel = cancel
	m.kind = kind
	m.reason, m.errMsg = "", ""
	m.progress = &backend.Progress{Stage: "preparing the " + kind + " backend"}
	m.transitionLocked(StateLoading, fmt.Sprintf("loading %s on %s", model, kind))
	m.mu.Unlock()
	defer func() {
		m.mu.Lock()
		m.loadCancel = nil
		m.mu.Unlock()
	}()

	fail := func(err error) (backend.Backend, error) {
		m.mu.Lock()
		defer m.mu.Unlock()
		if m.loadGen != gen {
			return nil, ErrModelOff
		}
		m.kind = ""
		return nil, fmt.Errorf("load %s on %s: %w", model, kind, err)
	}
	be, err := m.opts.NewBackend(lctx, model, kind)
	if err != nil {
		return fail(err)
	}
	start := m.opts.Now()
	var lastSent time.Time
	lastStage := ""
	err = be.Load(lctx, func(p backend.Progress) {
		m.mu.Lock()
		defer m.mu.Unlock()
		if m.loadGen != gen {
			return // abandoned: the state is off already
		}
		m.progress = &p
		// At most ten progress events a second (an engine may report
		// every tensor); a new stage and the end always go out.
		now := m.opts.Now()
		if p.Stage == lastStage && p.Frac < 1 && now.Sub(lastSent) < 100*time.Millisecond {
			return
		}
		lastSent, lastStage = now, p.Stage
		m.publishLocked(EventProgress, p.Stage)
	})
	if err == nil {
		m.mu.Lock()
		abandoned := m.loadGen != gen
		m.mu.Unlock()
		if abandoned { // loaded just after Stop: unload, outside the lock
			m.unload(context.Background(), be)
			err = ErrModelOff
		}
	}
	if err != nil {
		return fail(err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.loadGen != gen { // Stop came between the check above and here
		m.orphans = append(m.orphans, be)
		return nil, ErrModelOff
	}
	info := be.Info()
	if info.Name == "" {
		info.Name = model
	}
	m.be, m.beModel, m.info = be, model, &info
	m.stats.LoadSeconds = m.opts.Now().Sub(start).Seconds()
	if info.Kernels != "" {
		m.log.Info("model loaded", "model", model, "backend", kind, "kernels", info.Kernels)
	}
	m.transitionLocked(StateOn, fmt.Sprintf("%s is on (%s)", model, kind))
	return be, nil
}

// Generate runs one request: it waits its turn in the queue (or fails
// with ErrQueueFull), loads the model if needed, and streams the answer
// through emit. When the backend's device fails it falls back to the
// next engine and retries there if nothing was emitted yet.
func (m *Manager) Generate(ctx context.Context, req *backend.Request, opts GenerateOptions, emit func(backend.Token) error) (backend.Result, error) {
	model, err := m.opts.Resolve(req.Model)
	if err != nil {
		return backend.Result{}, err
	}
	if err := m.acquire(ctx, opts.Ticket); err != nil {
		return backend.Result{}, err
	}
	defer m.release(opts.KeepAlive)

	r := *req
	r.Model = model
	for {
		be, err := m.ensureLoaded(ctx, model)
		if err != nil {
			return backend.Result{}, err
		}
		if err := ctx.Err(); err != nil {
			return backend.Result{}, err // the client left while the model loaded
		}
		if side, why, err := m.route(ctx, model, be, &r); err != nil {
			return backend.Result{}, err
		} else if side != nil {
			return m.runBeside(ctx, side, why, &r, opts.OnRun, emit)
		}
		kind, emitted, res, err := m.run(ctx, be, &r, "", opts.OnRun, emit)
		m.mu.Lock()
		enabled := m.enabled
		m.mu.Unlock()
		if res.Backend == "" {
			res.Backend = kind
		}
		if err == nil {
			m.record(res)
			return res, nil
		}
		if !enabled && ctx.Err() == nil {
			return res, ErrModelOff
		}
		if !errors.Is(err, backend.ErrDeviceFailed) || ctx.Err() != nil {
			return res, err
		}
		// The device failed: fall back for this model, if there is a
		// next engine; otherwise unload, and the next request tries again.
		m.mu.Lock()
		if !m.enabled { // Stop came meanwhile and set the backend aside
			m.mu.Unlock()
			return res, ErrModelOff
		}
		why := fmt.Sprintf("%s backend failed: %v", kind, err)
		next := m.hasNextEngineLocked(model, kind)
		m.log.Warn("backend failed", "model", model, "backend", kind, "fallback", next, "err", err)
		if next {
			m.failed[kind] = why
			m.fallback = why
		}
		failed := m.detachLocked(why)
		side := m.takeSideLocked() // the next engine loads afresh, never twice in memory
		if next {
			m.publishLocked(EventFallback, why)
		}
		m.mu.Unlock()
		m.unload(context.Background(), failed)
		m.unload(context.Background(), side)
		if !next {
			return res, err
		}
		if emitted > 0 {
			return res, fmt.Errorf("the %s backend failed after %d tokens; NPU Chat switched to the next engine, ask again: %w", kind, emitted, err)
		}
	}
}

// run runs one generation on be, counted as running and cancellable by
// Stop, and says which backend kind ran it and how many tokens it emitted.
// beside is "" for the serving backend, else why be is the one beside it.
func (m *Manager) run(ctx context.Context, be backend.Backend, r *backend.Request, beside string, onRun func(kind, fallback string), emit func(backend.Token) error) (kind string, emitted int, res backend.Result, err error) {
	gctx, cancel := context.WithCancel(ctx)
	m.mu.Lock()
	m.genCancel = cancel
	m.running++
	kind, fallback := m.kind, m.fallback
	if beside != "" {
		kind, fallback = m.sideKind, beside
	}
	m.mu.Unlock()
	if onRun != nil {
		onRun(kind, fallback)
	}
	defer func() {
		cancel()
		m.mu.Lock()
		m.running--
		m.genCancel = nil
		m.mu.Unlock()
	}()
	res, err = be.Generate(gctx, r, func(t backend.Token) error {
		emitted++
		return emit(t)
	})
	res.Fallback = fallback
	return kind, emitted, res, err
}

// hasNextEngineLocked reports whether an engine after kind, not failed
// yet, can serve model.
func (m *Manager) hasNextEngineLocked(model, kind string) bool {
	return m.nextEngineLocked(model, kind) != ""
}

// acquire waits for the slot, counting as waiting meanwhile. With a
// ticket from Reserve the place in the queue is already taken.
func (m *Manager) acquire(ctx context.Context, t *Ticket) error {
	m.mu.Lock()
	switch {
	case t != nil && !t.used:
		t.used = true // its place is ours now: given back below
	case t != nil:
		m.mu.Unlock()
		return errors.New("a queue ticket used twice (a bug)")
	case m.waiting >= m.opts.QueueSize:
		m.mu.Unlock()
		return ErrQueueFull
	default:
		m.waiting++
	}
	if m.idle != nil {
		m.idle.Stop() // busy: no idle unload while requests wait
	}
	m.mu.Unlock()
	var err error
	select {
	case m.slot <- struct{}{}:
	case <-ctx.Done():
		err = ctx.Err()
	}
	m.mu.Lock()
	m.waiting--
	if err != nil {
		m.rearmIdleLocked()
	}
	m.mu.Unlock()
	return err
}

// rearmIdleLocked puts back the keep-alive timer that Reserve or acquire
// stopped, for a request that never ran (its ticket was released unused,
// or its client left while it waited): with nobody else waiting, the
// model unloads when it would have. A request holding the slot re-arms
// the timer itself when it ends. m.mu is held.
func (m *Manager) rearmIdleLocked() {
	if m.waiting > 0 || m.expires.IsZero() || m.state != StateOn || m.closed {
		return
	}
	if m.idle != nil {
		m.idle.Stop()
	}
	m.idle = time.AfterFunc(m.expires.Sub(m.opts.Now()), m.idleUnload)
}

// takeSlot waits for the slot outside the request queue (Stop, Unload).
func (m *Manager) takeSlot(ctx context.Context) error {
	select {
	case m.slot <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// giveSlot gives the slot back, first unloading the backends Stop set
// aside while someone else held it. Every holder of the slot ends with it.
func (m *Manager) giveSlot() {
	m.mu.Lock()
	orphans := m.orphans
	m.orphans = nil
	m.mu.Unlock()
	for _, be := range orphans {
		m.unload(context.Background(), be)
	}
	<-m.slot
}

// release ends a request's turn: the slot back, the idle timer armed.
func (m *Manager) release(keepAlive *time.Duration) {
	m.giveSlot()
	m.armIdle(keepAlive)
}

// armIdle sets the keep-alive timer after a request (or a Start): the
// request's own keep_alive when it gave one, else the default. As in
// Ollama, one request's keep_alive does not change the default.
func (m *Manager) armIdle(keepAlive *time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	d := m.opts.KeepAlive
	if keepAlive != nil {
		d = *keepAlive
	}
	m.keepAlive = d // for the reason text of the unload
	if m.idle != nil {
		m.idle.Stop()
	}
	m.expires = time.Time{}
	if m.state != StateOn || d < 0 || m.closed {
		return
	}
	m.expires = m.opts.Now().Add(d)
	m.idle = time.AfterFunc(d, m.idleUnload)
}

// idleUnload unloads the model when nothing has used it for keep-alive.
func (m *Manager) idleUnload() {
	select {
	case m.slot <- struct{}{}:
	default:
		return // busy: the request that holds the slot re-arms the timer
	}
	defer m.giveSlot()
	m.mu.Lock()
	if m.waiting > 0 || m.state != StateOn || m.expires.IsZero() || m.opts.Now().Before(m.expires) {
		m.mu.Unlock()
		return
	}
	be := m.detachLocked(fmt.Sprintf("unloaded after %s idle; it loads again on the next request", m.keepAlive))
	side := m.takeSideLocked()
	m.mu.Unlock()
	m.unload(context.Background(), be)
	m.unload(context.Background(), side)
}

// Unload unloads model now, if it is the one loaded, without switching
// it off (Ollama's keep_alive 0 with an empty request); "" unloads
// whatever is loaded.
func (m *Manager) Unload(ctx context.Context, model string) error {
	if model != "" {
		name, err := m.opts.Resolve(model)
		if err != nil {
			return err
		}
		model = name
	}
	if err := m.takeSlot(ctx); err != nil {
		return err
	}
	defer m.giveSlot()
	m.mu.Lock()
	var be, side backend.Backend
	if m.be != nil && (model == "" || model == m.beModel) {
		be = m.detachLocked("unloaded on request; it loads again on the next request")
	}
	if m.side != nil && (model == "" || model == m.sideModel) {
		side = m.takeSideLocked()
	}
	m.mu.Unlock()
	m.unload(ctx, be)
	m.unload(ctx, side)
	return nil
}

// Load loads model without generating (Ollama's empty /api/generate).
func (m *Manager) Load(ctx context.Context, model string, opts GenerateOptions) error {
	name, err := m.opts.Resolve(model)
	if err != nil {
		return err
	}
	if err := m.acquire(ctx, opts.Ticket); err != nil {
		return err
	}
	defer m.release(opts.KeepAlive)
	_, err = m.ensureLoaded(ctx, name)
	return err
}

func (m *Manager) record(res backend.Result) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.stats.Requests++
	m.stats.PromptTokens += int64(res.PromptTokens)
	m.stats.CompletionTokens += int64(res.CompletionTokens)
	if v := res.PrefillTokensPerSecond(); v > 0 {
		m.stats.PrefillTokPerSec = v
	}
	if v := res.DecodeTokensPerSecond(); v > 0 {
		m.stats.DecodeTokPerSec = v
	}
}
