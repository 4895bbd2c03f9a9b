package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/npuchat/npuchat/enginekind"
	"github.com/npuchat/npuchat/eventbus"
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
	// ForgetCache, when set, deletes what is kept on disk for a
	// backend.Request.CacheTag (a deleted chat's KV files) while no
	// backend that keeps them is loaded (ForgetCache).
	ForgetCache func(tag string)
	// Resolve maps a name a client sent ("minicpm5:2b", "MiniCPM5",
	// "my.gguf") to the canonical name it is served under, or an error
	// wrapping ErrUnknownModel.
	Resolve func(name string) (string, error)
	// Engines lists the backend kinds to try for a model, best first
	// ("npu", then "cpu" for the auto engine). The Manager falls back
	// along this list when a backend fails to load or its device fails.
	Engines func(model string) []enginekind.Kind
	// NewBackend makes a backend of a kind for a model; it may take a
	// while (the NPU check), and ctx ends when the load is abandoned. An
	// error wrapping ErrNotInstalled leaves the model off with that error
	// as the reason.
	NewBackend func(ctx context.Context, model string, kind enginekind.Kind) (backend.Backend, error)
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
	// RetryAfter is the Retry-After hint for a full queue and for KV
	// memory that stayed full (default 2s).
	RetryAfter time.Duration
	// MemoryWait is how long an admitted request may wait for memory
	// the requests beside it hold (the CPU engine's KV memory) before it
	// fails with backend.ErrKVMemoryFull (default
	// backend.DefaultMemoryWait): set on every request
	// (backend.Request.MemoryWait).
	MemoryWait time.Duration
	// Beside, when set, says whether a backend of kind may be loaded for
	// model while the serving backend stays loaded (for a request the
	// serving one cannot do, see Manager); an error says why not (not
	// enough free memory). nil allows it.
	Beside func(model string, kind enginekind.Kind) error
	Logger *slog.Logger
	// Now is the clock (time.Now by default).
	Now func() time.Time
}

// Status is a snapshot of the service, as /api/status and the tray show it.
type Status struct {
	State   State           `json:"state"`
	Model   string          `json:"model,omitempty"`   // model loaded, loading, or last asked for
	Backend enginekind.Kind `json:"backend,omitempty"` // kind of the backend serving it
	Enabled bool            `json:"enabled"`           // false when the user switched it off
	Reason  string          `json:"reason,omitempty"`  // why the model is off
	Error   string          `json:"error,omitempty"`   // why loading failed
	// Fallback says why the preferred backend is not the one serving.
	Fallback string `json:"fallback,omitempty"`
	// Beside is the kind of a second backend loaded beside the serving
	// one, for requests that one cannot do (FastFlowLM and tools), and
	// BesideReason why the last of them went there.
	Beside       enginekind.Kind    `json:"beside,omitempty"`
	BesideReason string             `json:"beside_reason,omitempty"`
	Progress     *backend.Progress  `json:"progress,omitempty"`
	Info         *backend.ModelInfo `json:"info,omitempty"`
	Since        time.Time          `json:"since"`
	ExpiresAt    *time.Time         `json:"expires_at,omitempty"` // idle unload time
	// Running, Waiting and WaitingMemory are the one count of the
	// requests the service has: Running the generations (and embeddings)
	// admitted and running on a backend, Waiting those in the service's
	// queue (service/doc.go), and WaitingMemory those of Running that
	// wait, admitted, for memory the others hold (backend.MemoryWaiter:
	// the CPU engine's KV memory). The backends count no queue of their
	// own; how many may run at once is Info.Parallel.
	Running       int   `json:"running"`
	Waiting       int   `json:"waiting"`
	WaitingMemory int   `json:"waiting_memory"`
	Stats         Stats `json:"stats"`
	// Cache is what the serving backend's KV cache holds (when it keeps
	// one: the CPU engine).
	Cache *backend.CacheStats `json:"cache,omitempty"`
	// Drafts counts the serving backend's guessed tokens (speculative
	// decoding), when it guesses and has guessed any.
	Drafts *DraftStats `json:"drafts,omitempty"`
	// Seq grows with every event the service sends: of two statuses
	// read at different times (an event and a GET /api/status whose
	// answers may arrive in either order), the one with the larger Seq
	// is the newer, and a client never shows an older one over it.
	Seq uint64 `json:"seq"`
}

// DraftStats are a model's speculative decoding counts since it was
// loaded: tokens guessed ahead and checked, how many of them the model
// kept, and the share kept (0..1).
type DraftStats struct {
	Drafted    int64   `json:"drafted"`
	Accepted   int64   `json:"accepted"`
	AcceptRate float64 `json:"accept_rate"`
}

// draftStats reads a backend's counts, nil when it does not guess or
// has not guessed yet.
func draftStats(be backend.Backend) *DraftStats {
	dc, ok := be.(backend.DraftCounter)
	if !ok {
		return nil
	}
	d, a := dc.DraftCounts()
	if d <= 0 {
		return nil
	}
	return &DraftStats{Drafted: d, Accepted: a, AcceptRate: float64(a) / float64(d)}
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
	OnRun func(kind enginekind.Kind, fallback string)
	// Ticket, when set, is the place in the queue the request reserved
	// before its body was read (Reserve); Generate and Load use it
	// instead of queueing again.
	Ticket *Ticket
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
// one goroutine at a time holds it (a generation, a load, an unload),
// or a group of generations together when the serving backend answers
// several at once (ModelInfo.Parallel: the CPU engine's batched decoding;
// see queue.go). Stop does not wait for the slot to change the state: it
// switches the model off at once, cancels the running generations and load through
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
	mu       sync.Mutex
	warmTag  string // the CacheTag last warmed (WarmCache), warmed again by the next load
	seq      uint64 // events sent so far (Status.Seq)
	enabled  bool   // false when the user switched the model off
	state    State
	model    string          // loaded or loading or last wanted
	kind     enginekind.Kind // kind of the backend loading or loaded
	be       backend.Backend
	beModel  string // the model be has loaded
	info     *backend.ModelInfo
	reason   string
	errMsg   string
	fallback string
	failed   map[enginekind.Kind]string // kind -> why it failed, for model
	progress *backend.Progress
	since    time.Time
	waiting  int
	running  int
	gens     map[*context.CancelFunc]struct{} // cancel the running generations
	// group is the generations running at once on the serving backend,
	// holding the slot together (queue.go); nil when none runs so.
	group *runGroup
	// groupCh is closed (and replaced) when group changes, for the
	// requests waiting to join it.
	groupCh chan struct{}
	// slotWanted counts the waiters that want the slot itself (a load,
	// another model): while there are any, no generation joins group.
	slotWanted int
	// abandon cancels the load running now (ensureLoaded's, for every
	// engine it tries, or loadBeside's) with the cause: Stop's
	// errSwitchedOff. The one way a load is abandoned: its context ends,
	// and every step of the load checks that context under mu, where
	// Stop cancels it. nil when no load runs.
	abandon   context.CancelCauseFunc
	orphans   []backend.Backend // set aside by Stop, unloaded by giveSlot
	side      backend.Backend   // a second backend beside be (see above)
	sideKind  enginekind.Kind   // its kind
	sideModel string            // the model it has loaded
	sideWhy   string            // why the last request went to it
	sideCaps  []string          // its capabilities
	idle      *time.Timer
	expires   time.Time
	keepAlive time.Duration // the default (Options.KeepAlive, then SetKeepAlive)
	lastIdle  time.Duration // the keep-alive the timer was armed with, for the unload's reason
	stats     Stats
	bus       *eventbus.Bus // the events (events.go)
	closed    bool
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
	if opts.MemoryWait <= 0 {
		opts.MemoryWait = backend.DefaultMemoryWait
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
		opts.Engines = func(string) []enginekind.Kind { return []enginekind.Kind{enginekind.CPU} }
	}
	m := &Manager{
		opts:      opts,
		log:       opts.Logger,
		slot:      make(chan struct{}, 1),
		enabled:   true,
		state:     StateOff,
		reason:    "not loaded yet; the model loads on the first request",
		failed:    map[enginekind.Kind]string{},
		since:     opts.Now(),
		keepAlive: opts.KeepAlive,
		lastIdle:  opts.KeepAlive,
		bus:       eventbus.New(),
		model:     opts.DefaultModel,
	}
	return m
}

// RetryAfter is the hint clients get with ErrQueueFull.
func (m *Manager) RetryAfter() time.Duration { return m.opts.RetryAfter }

// Resolve maps a requested model name to the name it is served under.
func (m *Manager) Resolve(name string) (string, error) { return m.opts.Resolve(name) }

// ForgetCache drops what is kept for a CacheTag (a deleted chat's keys
// and values): in the loaded backends that keep them, and on disk. It
// does not wait for a running answer.
func (m *Manager) ForgetCache(tag string) {
	m.mu.Lock()
	if m.warmTag == tag {
		m.warmTag = ""
	}
	var bes []backend.Backend
	for _, be := range []backend.Backend{m.be, m.side} {
		if be != nil {
			bes = append(bes, be)
		}
	}
	m.mu.Unlock()
	for _, be := range bes {
		if f, ok := be.(backend.CacheForgetter); ok {
			f.ForgetCache(tag)
		}
	}
	if m.opts.ForgetCache != nil {
		m.opts.ForgetCache(tag)
	}
}

// WarmCache asks the loaded backend, if it keeps keys and values on
// disk, to read those of a CacheTag (a chat just opened) back into
// memory, so that the chat's next message starts from them at once;
// while the model loads (the app just started), the backend is asked
// once it is loaded. It returns at once.
func (m *Manager) WarmCache(tag string) {
	m.mu.Lock()
	m.warmTag = tag
	be := m.be
	m.mu.Unlock()
	if w, ok := be.(backend.CacheWarmer); ok {
		w.WarmCache(tag)
	}
}

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
	if cr, ok := m.be.(backend.CacheReporter); ok && m.state == StateOn {
		c := cr.CacheStats()
		s.Cache = &c
	}
	if m.state == StateOn {
		s.Drafts = draftStats(m.be)
	}
	for _, be := range []backend.Backend{m.be, m.side} {
		if w, ok := be.(backend.MemoryWaiter); ok {
			s.WaitingMemory += w.WaitingForMemory()
		}
	}
	return s
}

// targets is the state machine's table (see Manager): the states from
// may change to. TestStateTable checks it against the table in
// Manager's doc comment, row by row.
func targets(from State) []State {
	switch from {
	case StateOff:
		return []State{StateLoading, StateOff}
	case StateLoading:
		return []State{StateLoading, StateOn, StateOff, StateError}
	case StateOn:
		return []State{StateOff}
	case StateError:
		return []State{StateLoading, StateOff}
	}
	return nil
}

// allowed reports whether the state machine (see Manager) has the
// transition from -> to.
func allowed(from, to State) bool {
	return slices.Contains(targets(from), to)
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
		m.failed = map[enginekind.Kind]string{}
	}
	if m.state == StateError || m.state == StateOff {
		// A new attempt: forget earlier failures, the user may have fixed them.
		m.failed = map[enginekind.Kind]string{}
		m.fallback = ""
	}
	m.model = model
	m.reason = ""
	m.publishLocked(EventStatus, "starting "+model)
	m.mu.Unlock()
	go func() {
		m.slot <- struct{}{}
		_, err := m.ensureLoaded(context.Background(), model, true)
		m.giveSlot()
		if err != nil {
			m.log.Warn("start model", "model", model, "err", err)
			return
		}
		// The timer was armed as the model went on; had it fired while
		// this held the slot, it would have found it busy and left it.
		m.mu.Lock()
		m.rearmIdleLocked()
		m.mu.Unlock()
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
	for cancel := range m.gens {
		(*cancel)()
	}
	if m.abandon != nil {
		m.abandon(errSwitchedOff)
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
	m.bus.Close()
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

// errSwitchedOff is the cause a load is abandoned with when Stop
// switches the model off.
var errSwitchedOff = fmt.Errorf("the load was abandoned: %w", ErrModelOff)

// beginLoadLocked makes the context of a load (ensureLoaded's, or
// loadBeside's) and stores its cancel as m.abandon, for Stop; done
// removes it when the load ends. The context keeps ctx's values but not
// its end: a client that gives up does not abandon the load, so that
// the next request finds the model ready. A model switched off already
// is ErrModelOff. m.mu is held; the caller holds the slot, so at most
// one load runs.
func (m *Manager) beginLoadLocked(ctx context.Context) (lctx context.Context, done func(), err error) {
	if !m.enabled {
		return nil, nil, errSwitchedOff
	}
	lctx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	m.abandon = cancel
	return lctx, func() {
		m.mu.Lock()
		m.abandon = nil
		m.mu.Unlock()
		cancel(nil)
	}, nil
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
//
// idle arms the keep-alive timer as the model goes on (Start, whose
// model is idle once loaded, so that the "on" status carries its unload
// time); a request arms it when it ends instead (release).
func (m *Manager) ensureLoaded(ctx context.Context, model string, idle bool) (backend.Backend, error) {
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
		m.failed = map[enginekind.Kind]string{}
		m.fallback = ""
	}
	m.model = model
	lctx, done, err := m.beginLoadLocked(ctx)
	m.mu.Unlock()
	if err != nil {
		return nil, err
	}
	defer done()

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
		be, err := m.load(lctx, model, kind, idle)
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
	case errors.Is(lastErr, ErrModelOff) || lctx.Err() != nil:
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
// abandons it by cancelling ctx (beginLoad's), the context given to
// NewBackend and Load.
func (m *Manager) load(lctx context.Context, model string, kind enginekind.Kind, idle bool) (backend.Backend, error) {
	m.mu.Lock()
	if lctx.Err() != nil {
		m.mu.Unlock()
		return nil, context.Cause(lctx)
	}
	m.kind = kind
	m.reason, m.errMsg = "", ""
	m.progress = &backend.Progress{Stage: "preparing the " + string(kind) + " backend"}
	m.transitionLocked(StateLoading, fmt.Sprintf("loading %s on %s", model, kind))
	m.mu.Unlock()

	fail := func(err error) (backend.Backend, error) {
		m.mu.Lock()
		defer m.mu.Unlock()
		if lctx.Err() != nil {
			return nil, context.Cause(lctx)
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
		if lctx.Err() != nil {
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
		abandoned := context.Cause(lctx)
		m.mu.Unlock()
		if abandoned != nil { // loaded just after Stop: unload, outside the lock
			m.unload(context.Background(), be)
			err = abandoned
		}
	}
	if err != nil {
		return fail(err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := context.Cause(lctx); err != nil { // Stop came between the check above and here
		m.orphans = append(m.orphans, be)
		return nil, err
	}
	info := be.Info()
	if info.Name == "" {
		info.Name = model
	}
	m.be, m.beModel, m.info = be, model, &info
	if w, ok := be.(backend.CacheWarmer); ok && m.warmTag != "" {
		w.WarmCache(m.warmTag) // the chat open while it loaded
	}
	m.stats.LoadSeconds = m.opts.Now().Sub(start).Seconds()
	if info.Kernels != "" {
		m.log.Info("model loaded", "model", model, "backend", kind, "kernels", info.Kernels)
	}
	if idle && !m.closed {
		m.setIdleLocked(m.keepAlive)
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
	joined, err := m.acquireRun(ctx, opts.Ticket, model)
	if err != nil {
		return backend.Result{}, err
	}
	grouped := joined != nil // in the group of generations running at once
	defer func() {
		if grouped {
			m.leaveGroup(opts.KeepAlive)
		} else {
			m.release(opts.KeepAlive)
		}
	}()

	r := *req
	r.Model = model
	if joined != nil {
		// the backend is loaded and serving model; it answers r beside
		// the group's others
		kind, _, res, err := m.run(ctx, joined, &r, "", opts.OnRun, emit)
		if res.Backend == "" {
			res.Backend = kind
		}
		if err == nil {
			m.record(res)
			return res, nil
		}
		m.mu.Lock()
		enabled := m.enabled
		m.mu.Unlock()
		if !enabled && ctx.Err() == nil {
			return res, ErrModelOff
		}
		return res, err
	}
	for {
		be, err := m.ensureLoaded(ctx, model, false)
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
		if !grouped {
			grouped = m.openGroup(be, model)
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
		if grouped {
			// others may be running on be: no fallback that unloads it
			// (a backend that answers several at once is the CPU engine,
			// which has no device to fail)
			return res, err
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
func (m *Manager) run(ctx context.Context, be backend.Backend, r *backend.Request, beside string, onRun func(kind enginekind.Kind, fallback string), emit func(backend.Token) error) (kind enginekind.Kind, emitted int, res backend.Result, err error) {
	gctx, cancel := context.WithCancel(ctx)
	r.MemoryWait = m.opts.MemoryWait // the service decides how long it may wait
	m.mu.Lock()
	if m.gens == nil {
		m.gens = map[*context.CancelFunc]struct{}{}
	}
	m.gens[&cancel] = struct{}{}
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
		delete(m.gens, &cancel)
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
func (m *Manager) hasNextEngineLocked(model string, kind enginekind.Kind) bool {
	return m.nextEngineLocked(model, kind) != ""
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
	_, err = m.ensureLoaded(ctx, name, false)
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
	if res.DraftTokens > 0 {
		// The acceptance rate, of this answer and of the model so far
		// (when the serving backend answered: not one beside it).
		args := []any{"model", m.model, "backend", res.Backend, "drafted", res.DraftTokens, "accepted", res.DraftAccepted,
			"rate", fmt.Sprintf("%.0f%%", 100*float64(res.DraftAccepted)/float64(res.DraftTokens))}
		if d := draftStats(m.be); d != nil && res.Backend == m.kind {
			args = append(args, "model_rate", fmt.Sprintf("%.0f%% of %d", 100*d.AcceptRate, d.Drafted))
		}
		m.log.Info("tokens guessed", args...)
	}
}
