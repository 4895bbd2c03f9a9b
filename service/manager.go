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
	// QueueSize is how many requests may wait while one runs (default 8).
	QueueSize int
	// KeepAlive is how long an idle model stays loaded (default 5
	// minutes; negative: forever; 0: unload after each request).
	KeepAlive time.Duration
	// RetryAfter is the Retry-After hint for a full queue (default 2s).
	RetryAfter time.Duration
	Logger     *slog.Logger
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
	Fallback  string             `json:"fallback,omitempty"`
	Progress  *backend.Progress  `json:"progress,omitempty"`
	Info      *backend.ModelInfo `json:"info,omitempty"`
	Since     time.Time          `json:"since"`
	ExpiresAt *time.Time         `json:"expires_at,omitempty"` // idle unload time
	Running   int                `json:"running"`              // generations running now
	Waiting   int                `json:"waiting"`              // requests in the queue
	Stats     Stats              `json:"stats"`
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

// Event is something that happened, for the tray and the page.
type Event struct {
	Type     string            `json:"type"` // "status", "progress", "fallback", "error"
	Message  string            `json:"message,omitempty"`
	Progress *backend.Progress `json:"progress,omitempty"`
	Status   Status            `json:"status"`
	Time     time.Time         `json:"time"`
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
}

// Manager owns the model's state and its backend. All methods are safe
// for concurrent use.
type Manager struct {
	opts Options
	log  *slog.Logger

	slot chan struct{} // held by the one goroutine that uses the backend

	mu        sync.Mutex
	enabled   bool
	state     State
	model     string // loaded or loading or last wanted
	kind      string
	be        backend.Backend
	beModel   string // the model be has loaded
	info      *backend.ModelInfo
	reason    string
	errMsg    string
	fallback  string
	failed    map[string]string // kind -> why it failed, for model
	progress  *backend.Progress
	since     time.Time
	waiting   int
	running   int
	genCancel context.CancelFunc // cancels the running generation
	loadGen   int                // bumped by Stop to abandon loads
	idle      *time.Timer
	expires   time.Time
	keepAlive time.Duration
	stats     Stats
	subs      map[chan Event]struct{}
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
		subs:      map[chan Event]struct{}{},
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
		Running: m.running, Waiting: m.waiting, Stats: m.stats,
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

// Subscribe returns a channel of events, starting with the current
// status, and a function that ends the subscription. A subscriber that
// does not keep up loses events, never blocks the service; it can always
// read Status.
func (m *Manager) Subscribe() (<-chan Event, func()) {
	ch := make(chan Event, 64)
	m.mu.Lock()
	ch <- Event{Type: "status", Status: m.statusLocked(), Time: m.opts.Now()}
	if m.closed {
		close(ch)
	} else {
		m.subs[ch] = struct{}{}
	}
	m.mu.Unlock()
	var once sync.Once
	return ch, func() {
		once.Do(func() {
			m.mu.Lock()
			if _, ok := m.subs[ch]; ok {
				delete(m.subs, ch)
				close(ch)
			}
			m.mu.Unlock()
		})
	}
}

// publishLocked sends an event to every subscriber. m.mu must be held.
func (m *Manager) publishLocked(typ, msg string) {
	ev := Event{Type: typ, Message: msg, Status: m.statusLocked(), Time: m.opts.Now()}
	if typ == "progress" && m.progress != nil {
		p := *m.progress
		ev.Progress = &p
	}
	for ch := range m.subs {
		select {
		case ch <- ev:
		default: // a slow subscriber loses this event
		}
	}
}

// setStateLocked changes the state and publishes it.
func (m *Manager) setStateLocked(s State, msg string) {
	if m.state != s {
		m.since = m.opts.Now()
	}
	m.state = s
	if s != StateLoading {
		m.progress = nil
	}
	m.publishLocked("status", msg)
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
	m.enabled = true
	if model == "" {
		model = m.model
	}
	if model == "" {
		m.mu.Unlock()
		return fmt.Errorf("start: no model named: %w", ErrUnknownModel)
	}
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
	m.publishLocked("status", "starting "+model)
	m.mu.Unlock()
	go func() {
		m.slot <- struct{}{}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		_, err := m.ensureLoaded(ctx, model)
		<-m.slot
		if err != nil {
			m.log.Warn("start model", "model", model, "err", err)
			return
		}
		m.armIdle(nil)
	}()
	return nil
}

// Stop switches the model off: the running generation is cancelled, the
// backend unloaded, and requests answer ErrModelOff until Start.
func (m *Manager) Stop(ctx context.Context) error {
	m.mu.Lock()
	m.enabled = false
	m.loadGen++
	if m.genCancel != nil {
		m.genCancel()
	}
	m.mu.Unlock()
	if err := m.takeSlot(ctx); err != nil {
		return err
	}
	defer func() { <-m.slot }()
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.enabled { // Start was called while we waited
		return nil
	}
	m.unloadLocked(ctx, "switched off")
	return nil
}

// Close stops the model and ends every subscription.
func (m *Manager) Close(ctx context.Context) error {
	err := m.Stop(ctx)
	m.mu.Lock()
	m.closed = true
	if m.idle != nil {
		m.idle.Stop()
	}
	for ch := range m.subs {
		close(ch)
		delete(m.subs, ch)
	}
	m.mu.Unlock()
	return err
}

// unloadLocked sets the state off with reason and unloads the backend.
// m.mu must be held, and the slot (so that nothing else uses the
// backend); the lock is released while the backend unloads, which for
// FastFlowLM means waiting for its process to stop, so that Status and
// the events do not wait for it.
func (m *Manager) unloadLocked(ctx context.Context, reason string) {
	be, kind := m.be, m.kind
	m.be, m.beModel, m.kind, m.info = nil, "", "", nil
	m.expires = time.Time{}
	if m.idle != nil {
		m.idle.Stop()
	}
	m.reason, m.errMsg = reason, ""
	m.setStateLocked(StateOff, reason)
	if be != nil {
		m.mu.Unlock()
		err := be.Unload(ctx)
		m.mu.Lock()
		if err != nil {
			m.log.Warn("unload", "model", m.model, "backend", kind, "err", err)
		}
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
	if m.be != nil {
		m.unloadLocked(ctx, "switching to "+model)
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
		m.publishLocked("fallback", m.failed[kind])
		m.mu.Unlock()
	}
	if lastErr == nil {
		lastErr = fmt.Errorf("no backend can serve %s", model)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	switch {
	case errors.Is(lastErr, ErrModelOff) || m.loadGen != gen:
		if m.be == nil { // abandoned by Stop: say so even if Stop gave up waiting
			m.reason, m.errMsg = "switched off", ""
			m.setStateLocked(StateOff, m.reason)
		}
		return nil, ErrModelOff
	case errors.Is(lastErr, ErrNotInstalled):
		m.reason, m.errMsg = lastErr.Error(), ""
		m.setStateLocked(StateOff, m.reason)
	default:
		m.reason, m.errMsg = "", lastErr.Error()
		m.setStateLocked(StateError, m.errMsg)
		m.publishLocked("error", m.errMsg)
	}
	return nil, lastErr
}

// load makes and loads one backend. Stop abandons it (loadGen changes):
// the context given to NewBackend and Load is then cancelled.
func (m *Manager) load(ctx context.Context, model, kind string, gen int) (backend.Backend, error) {
	m.mu.Lock()
	if m.loadGen != gen {
		m.mu.Unlock()
		return nil, ErrModelOff
	}
	m.kind = kind
	m.reason, m.errMsg = "", ""
	m.progress = &backend.Progress{Stage: "preparing the " + kind + " backend"}
	m.setStateLocked(StateLoading, fmt.Sprintf("loading %s on %s", model, kind))
	m.mu.Unlock()

	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stopWatch := make(chan struct{})
	defer close(stopWatch)
	go func() {
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stopWatch:
				return
			case <-t.C:
				m.mu.Lock()
				abandoned := m.loadGen != gen
				m.mu.Unlock()
				if abandoned {
					cancel()
					return
				}
			}
		}
	}()
	fail := func(err error) (backend.Backend, error) {
		m.mu.Lock()
		defer m.mu.Unlock()
		m.kind = ""
		if m.loadGen != gen {
			return nil, ErrModelOff
		}
		return nil, fmt.Errorf("load %s on %s: %w", model, kind, err)
	}
	be, err := m.opts.NewBackend(lctx, model, kind)
	if err != nil {
		return fail(err)
	}
	start := m.opts.Now()
	err = be.Load(lctx, func(p backend.Progress) {
		m.mu.Lock()
		m.progress = &p
		m.publishLocked("progress", p.Stage)
		m.mu.Unlock()
	})
	if err == nil {
		m.mu.Lock()
		abandoned := m.loadGen != gen
		m.mu.Unlock()
		if abandoned { // loaded just after Stop: unload, outside the lock
			be.Unload(context.Background())
			err = ErrModelOff
		}
	}
	if err != nil {
		return fail(err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	info := be.Info()
	if info.Name == "" {
		info.Name = model
	}
	m.be, m.beModel, m.info = be, model, &info
	m.stats.LoadSeconds = m.opts.Now().Sub(start).Seconds()
	m.setStateLocked(StateOn, fmt.Sprintf("%s is on (%s)", model, kind))
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
	if err := m.acquire(ctx); err != nil {
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
		kind, emitted, res, err := m.run(ctx, be, &r, opts.OnRun, emit)
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
		why := fmt.Sprintf("%s backend failed: %v", kind, err)
		next := m.hasNextEngineLocked(model, kind)
		m.log.Warn("backend failed", "model", model, "backend", kind, "fallback", next, "err", err)
		if next {
			m.failed[kind] = why
			m.fallback = why
		}
		m.unloadLocked(context.Background(), why)
		if !next {
			m.mu.Unlock()
			return res, err
		}
		m.publishLocked("fallback", why)
		m.mu.Unlock()
		if emitted > 0 {
			return res, fmt.Errorf("the %s backend failed after %d tokens; NPU Chat switched to the next engine, ask again: %w", kind, emitted, err)
		}
	}
}

// run runs one generation on be, counted as running and cancellable by
// Stop, and says which backend kind ran it and how many tokens it emitted.
func (m *Manager) run(ctx context.Context, be backend.Backend, r *backend.Request, onRun func(kind, fallback string), emit func(backend.Token) error) (kind string, emitted int, res backend.Result, err error) {
	gctx, cancel := context.WithCancel(ctx)
	m.mu.Lock()
	m.genCancel = cancel
	m.running++
	kind, fallback := m.kind, m.fallback
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
	kinds := m.opts.Engines(model)
	for i, k := range kinds {
		if k != kind {
			continue
		}
		for _, later := range kinds[i+1:] {
			if _, bad := m.failed[later]; !bad {
				return true
			}
		}
	}
	return false
}

// acquire waits for the slot, counting as waiting meanwhile.
func (m *Manager) acquire(ctx context.Context) error {
	m.mu.Lock()
	if m.waiting >= m.opts.QueueSize {
		m.mu.Unlock()
		return ErrQueueFull
	}
	m.waiting++
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
	m.mu.Unlock()
	return err
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

// release gives the slot back and arms the idle timer.
func (m *Manager) release(keepAlive *time.Duration) {
	<-m.slot
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
	defer func() { <-m.slot }()
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.waiting > 0 || m.state != StateOn || m.expires.IsZero() || m.opts.Now().Before(m.expires) {
		return
	}
	m.unloadLocked(context.Background(), fmt.Sprintf("unloaded after %s idle; it loads again on the next request", m.keepAlive))
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
	defer func() { <-m.slot }()
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.be != nil && (model == "" || model == m.beModel) {
		m.unloadLocked(ctx, "unloaded on request; it loads again on the next request")
	}
	return nil
}

// Load loads model without generating (Ollama's empty /api/generate).
func (m *Manager) Load(ctx context.Context, model string, opts GenerateOptions) error {
	name, err := m.opts.Resolve(model)
	if err != nil {
		return err
	}
	if err := m.acquire(ctx); err != nil {
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
