package mcphost

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Options configure a Host. Zero values take the defaults.
type Options struct {
	// CallTimeout bounds one tool call (default 60 s); past it the call
	// is cancelled (the server is told) and CallTool returns ErrTimeout.
	CallTimeout time.Duration
	// ConnectTimeout bounds starting a server and the MCP handshake
	// (default 60 s: npx and uvx may download the server first).
	ConnectTimeout time.Duration
	// MaxResultBytes bounds the text of one result (default 64 KiB).
	MaxResultBytes int
	// IdleTimeout stops a server that has had no call for this long
	// (default 10 minutes; negative: never).
	IdleTimeout time.Duration
	// StopGrace is each wait of the stdio shutdown: after closing the
	// server's input, and after SIGTERM (default 2 s).
	StopGrace time.Duration
	// BaseEnv is a program's environment before its Server.Env; nil is
	// the few variables the official SDKs pass on (HOME, PATH, USER…;
	// on Windows APPDATA, PATH, USERPROFILE…), not NPU Chat's whole
	// environment.
	BaseEnv []string
	// Version is NPU Chat's version, told to servers as the client's.
	Version string
	// Log hears servers start, stop and fail; nil discards.
	Log *slog.Logger
	// AfterFunc runs f after d, as time.AfterFunc does (nil), returning a
	// function that cancels it; tests pass a clock they move by hand.
	AfterFunc func(d time.Duration, f func()) (stop func() bool)
}

// Defaults of Options.
const (
	DefaultCallTimeout    = 60 * time.Second
	DefaultConnectTimeout = 60 * time.Second
	DefaultMaxResultBytes = 64 << 10
	DefaultIdleTimeout    = 10 * time.Minute
	DefaultStopGrace      = 2 * time.Second
)

// maxMessageBytes bounds one message a stdio server sends: past it the
// server is stopped with an error (a result is cut far below this, but it
// has to arrive whole first).
const maxMessageBytes = 16 << 20

// maxTools bounds the tools kept from one server.
const maxTools = 500

// Errors a caller can tell apart with errors.Is.
var (
	// ErrUnknownServer: no server of that name in the configuration.
	ErrUnknownServer = errors.New("no MCP server of that name")
	// ErrDisabled: the server is turned off in Settings.
	ErrDisabled = errors.New("the MCP server is turned off in Settings")
	// ErrClosed: the Host has been closed (NPU Chat is quitting).
	ErrClosed = errors.New("MCP servers are shut down")
	// ErrTimeout: a call took longer than Options.CallTimeout.
	ErrTimeout = errors.New("the tool took too long")
	// ErrServerFailed: the server crashed, exited, broke the protocol or
	// could not be reached; it is started again on the next use.
	ErrServerFailed = errors.New("the MCP server failed")
)

// Tool is one tool a server offers.
type Tool struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	// InputSchema is the JSON Schema of the tool's arguments.
	InputSchema json.RawMessage `json:"input_schema"`
}

// Status is what a Host knows of one server, for Settings.
type Status struct {
	Name    string `json:"name"`
	Enabled bool   `json:"enabled"`
	Trusted bool   `json:"trusted"`
	// Running: a process is up (stdio) or a session is open (URL).
	Running bool `json:"running"`
	// PID is the stdio server's process id while it runs.
	PID int `json:"pid,omitempty"`
	// Tools are the tools it listed last (nil: never listed).
	Tools []Tool `json:"tools"`
	// LastError is its last failure, in words, and when it happened.
	LastError   string    `json:"last_error,omitempty"`
	LastErrorAt time.Time `json:"last_error_at,omitzero"`
}

// Host runs the MCP servers of one configuration. Its methods are safe
// for concurrent use.
type Host struct {
	opts   Options
	client *mcp.Client
	ctx    context.Context // ended by Close: every session's life
	end    context.CancelFunc

	mu      sync.Mutex
	closed  bool
	order   []string
	servers map[string]*entry
	busy    sync.WaitGroup // starts and stops under way
	watches sync.WaitGroup // watch goroutines
}

// entry is one configured server and its running session.
type entry struct {
	cfg      Server
	sem      chan struct{} // held while the session is being started
	live     *session      // nil while it is not running
	inflight int           // calls and listings using live
	idleStop func() bool
	tools    []Tool
	lastErr  string
	lastAt   time.Time
}

// session is one running server: the SDK's session, the process of a
// stdio server, and the context whose end stops both.
type session struct {
	cs    *mcp.ClientSession
	proc  *process // nil for a URL server
	life  context.Context
	end   context.CancelFunc
	ended chan struct{} // closed when the connection has ended
	// waitErr is why the connection ended (nil for the end of the
	// server's output), once ended is closed.
	waitErr error
	stopMu  sync.Once

	mu    sync.Mutex
	broke error // why it ended by itself, once its watcher knows
}

// setBroke keeps why the session ended by itself.
func (s *session) setBroke(err error) {
	s.mu.Lock()
	s.broke = err
	s.mu.Unlock()
}

// brokeErr is why the session ended by itself, or nil.
func (s *session) brokeErr() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.broke
}

// New makes a Host for servers, checked as Check does except for the
// files (a program missing now is that server's error when it starts).
// No server starts until it is used.
func New(servers []Server, opts Options) (*Host, error) {
	if err := check(servers, false); err != nil {
		return nil, fmt.Errorf("MCP servers: %w", err)
	}
	if opts.CallTimeout <= 0 {
		opts.CallTimeout = DefaultCallTimeout
	}
	if opts.ConnectTimeout <= 0 {
		opts.ConnectTimeout = DefaultConnectTimeout
	}
	if opts.MaxResultBytes <= 0 {
		opts.MaxResultBytes = DefaultMaxResultBytes
	}
	if opts.IdleTimeout == 0 {
		opts.IdleTimeout = DefaultIdleTimeout
	}
	if opts.StopGrace <= 0 {
		opts.StopGrace = DefaultStopGrace
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	if opts.AfterFunc == nil {
		opts.AfterFunc = func(d time.Duration, f func()) func() bool { return time.AfterFunc(d, f).Stop }
	}
	version := opts.Version
	if version == "" {
		version = "dev"
	}
	h := &Host{opts: opts, servers: map[string]*entry{}}
	h.ctx, h.end = context.WithCancel(context.Background())
	h.client = mcp.NewClient(&mcp.Implementation{Name: "npuchat", Title: "NPU Chat", Version: version},
		&mcp.ClientOptions{Logger: opts.Log, Capabilities: &mcp.ClientCapabilities{}})
	for _, s := range servers {
		h.order = append(h.order, s.Name)
		h.servers[s.Name] = &entry{cfg: s.clone(), sem: make(chan struct{}, 1)}
	}
	return h, nil
}

// Update replaces the configuration (checked as New does): servers that
// are gone, turned off, or run differently now are stopped; the others
// keep running, with their tools.
func (h *Host) Update(servers []Server) error {
	if err := check(servers, false); err != nil {
		return fmt.Errorf("MCP servers: %w", err)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return ErrClosed
	}
	next := map[string]*entry{}
	var order []string
	for _, s := range servers {
		order = append(order, s.Name)
		if e, ok := h.servers[s.Name]; ok && e.cfg.sameRun(s) {
			e.cfg = s.clone()
			if !s.Enabled {
				h.stopLocked(e)
			}
			next[s.Name] = e
			continue
		}
		next[s.Name] = &entry{cfg: s.clone(), sem: make(chan struct{}, 1)}
	}
	for name, e := range h.servers {
		if next[name] != e {
			h.stopLocked(e)
		}
	}
	h.order, h.servers = order, next
	return nil
}

// Status is every server's state, in the configuration's order.
func (h *Host) Status() []Status {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]Status, 0, len(h.order))
	for _, name := range h.order {
		e := h.servers[name]
		st := Status{Name: name, Enabled: e.cfg.Enabled, Trusted: e.cfg.Trusted,
			Tools: slices.Clone(e.tools), LastError: e.lastErr, LastErrorAt: e.lastAt}
		if e.live != nil && !e.live.isEnded() {
			st.Running = true
			if e.live.proc != nil {
				st.PID = e.live.proc.PID
			}
		}
		out = append(out, st)
	}
	return out
}

// ListTools asks a server for its tools (starting it if it is not
// running), keeps them for Status, and returns them.
func (h *Host) ListTools(ctx context.Context, server string) (tools []Tool, err error) {
	defer recoverAs(&err, server, "list tools")
	e, s, err := h.acquire(ctx, server)
	if err != nil {
		return nil, err
	}
	defer h.release(e, s)
	callCtx, cancel := context.WithTimeout(ctx, h.opts.CallTimeout)
	defer cancel()
	defer context.AfterFunc(s.life, cancel)()
	var cursor string
	for page := 0; ; page++ {
		res, err := s.cs.ListTools(callCtx, &mcp.ListToolsParams{Cursor: cursor})
		if err != nil {
			return nil, h.callError(ctx, callCtx, e, s, "list its tools", err)
		}
		for _, t := range res.Tools {
			if len(tools) < maxTools {
				tools = append(tools, toTool(t))
			}
		}
		if res.NextCursor == "" || len(tools) == maxTools || page == 100 {
			break
		}
		cursor = res.NextCursor
	}
	if tools == nil {
		tools = []Tool{} // listed, and none: not "never listed"
	}
	h.mu.Lock()
	e.tools = tools
	h.mu.Unlock()
	return slices.Clone(tools), nil
}

// CallTool calls tool on server with args (a JSON object; empty is {}),
// starting the server if it is not running. The call ends at
// Options.CallTimeout (ErrTimeout) or when ctx ends (ctx's error): the
// server is told to cancel it either way. A server that fails mid-call
// gives ErrServerFailed with what it said last, and is started again on
// the next use. A tool that reports a failure is not an error: its
// Result has IsError set.
func (h *Host) CallTool(ctx context.Context, server, tool string, args json.RawMessage) (res Result, err error) {
	defer recoverAs(&err, server, "call "+tool)
	if len(strings.TrimSpace(string(args))) == 0 {
		args = json.RawMessage("{}")
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(args, &obj); err != nil || obj == nil {
		return Result{}, fmt.Errorf("call %s on MCP server %q: the arguments are not a JSON object", tool, server)
	}
	e, s, err := h.acquire(ctx, server)
	if err != nil {
		return Result{}, err
	}
	defer h.release(e, s)
	callCtx, cancel := context.WithTimeout(ctx, h.opts.CallTimeout)
	defer cancel()
	defer context.AfterFunc(s.life, cancel)()
	out, cerr := s.cs.CallTool(callCtx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if cerr != nil {
		return Result{}, h.callError(ctx, callCtx, e, s, "call "+tool, cerr)
	}
	return toResult(out, h.opts.MaxResultBytes), nil
}

// Close stops every server and waits until their processes have exited.
// Calls under way end with ErrClosed.
func (h *Host) Close() error {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		h.busy.Wait()
		h.watches.Wait()
		return nil
	}
	h.closed = true
	h.end()
	for _, e := range h.servers {
		h.stopLocked(e)
	}
	h.mu.Unlock()
	h.busy.Wait()
	h.watches.Wait()
	return nil
}

// acquire returns the server's running session, starting it if needed,
// counted as in use until release.
func (h *Host) acquire(ctx context.Context, name string) (*entry, *session, error) {
	for {
		h.mu.Lock()
		if h.closed {
			h.mu.Unlock()
			return nil, nil, ErrClosed
		}
		e := h.servers[name]
		switch {
		case e == nil:
			h.mu.Unlock()
			return nil, nil, fmt.Errorf("MCP server %q: %w", name, ErrUnknownServer)
		case !e.cfg.Enabled:
			h.mu.Unlock()
			return nil, nil, fmt.Errorf("MCP server %q: %w", name, ErrDisabled)
		case e.live != nil && !e.live.isEnded():
			e.inflight++
			if e.idleStop != nil {
				e.idleStop()
				e.idleStop = nil
			}
			s := e.live
			h.mu.Unlock()
			return e, s, nil
		case e.live != nil:
			// It ended by itself; its watcher stops it.
			e.live = nil
		}
		h.mu.Unlock()

		select {
		case e.sem <- struct{}{}:
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		}
		h.mu.Lock()
		if h.closed || h.servers[name] != e || e.live != nil || !e.cfg.Enabled {
			// Closed, replaced, or started meanwhile: look again.
			<-e.sem
			h.mu.Unlock()
			continue
		}
		cfg := e.cfg
		h.busy.Add(1)
		h.mu.Unlock()

		s, err := h.start(ctx, cfg)
		h.mu.Lock()
		if err != nil {
			if ctx.Err() == nil {
				e.fail(err)
			}
			<-e.sem
			h.mu.Unlock()
			h.busy.Done()
			return nil, nil, err
		}
		if h.closed || h.servers[name] != e || !e.cfg.Enabled {
			// Closed, replaced or turned off while it started.
			<-e.sem
			h.mu.Unlock()
			s.stop(h.opts.StopGrace)
			h.busy.Done()
			continue
		}
		e.live = s
		e.inflight++
		<-e.sem
		h.watches.Add(1)
		go h.watch(e, s)
		h.mu.Unlock()
		h.busy.Done()
		return e, s, nil
	}
}

// release ends one use of s; the last one arms the idle stop.
func (h *Host) release(e *entry, s *session) {
	h.mu.Lock()
	defer h.mu.Unlock()
	e.inflight--
	if e.live != s || e.inflight > 0 || h.opts.IdleTimeout < 0 || h.closed {
		return
	}
	if e.idleStop != nil {
		e.idleStop()
	}
	e.idleStop = h.opts.AfterFunc(h.opts.IdleTimeout, func() { h.idle(e, s) })
}

// idle stops s if it is still e's session and unused; it returns when
// the server has stopped.
func (h *Host) idle(e *entry, s *session) {
	h.mu.Lock()
	if e.live != s || e.inflight > 0 || h.closed {
		h.mu.Unlock()
		return
	}
	e.live, e.idleStop = nil, nil
	h.busy.Add(1)
	h.mu.Unlock()
	h.opts.Log.Info("MCP server idle: stopping it", "server", e.cfg.Name)
	s.stop(h.opts.StopGrace)
	h.busy.Done()
}

// stopLocked stops e's session, if any, in the background (h.busy
// counts it). h.mu is held.
func (h *Host) stopLocked(e *entry) {
	if e.idleStop != nil {
		e.idleStop()
		e.idleStop = nil
	}
	s := e.live
	if s == nil {
		return
	}
	e.live = nil
	h.busy.Add(1)
	go func() {
		defer h.busy.Done()
		s.stop(h.opts.StopGrace)
	}()
}

// watch waits for s's connection to end. One that ends before s was
// stopped ended by itself (the server exited or broke the protocol): the
// error is kept and the session stopped.
func (h *Host) watch(e *entry, s *session) {
	defer h.watches.Done()
	select {
	case <-s.ended:
	case <-s.life.Done():
		return
	}
	h.mu.Lock()
	if e.live == s {
		e.live = nil
		if e.idleStop != nil {
			e.idleStop()
			e.idleStop = nil
		}
	}
	h.mu.Unlock()
	if s.life.Err() != nil {
		return // stopped on purpose meanwhile: whoever stopped it stops it
	}
	err := s.brokenError(e.cfg, h.opts.StopGrace)
	s.setBroke(err)
	h.mu.Lock()
	e.fail(err)
	h.mu.Unlock()
	h.opts.Log.Warn("MCP server stopped by itself", "server", e.cfg.Name, "err", err)
	s.stop(h.opts.StopGrace)
}

// start runs the server and does the MCP handshake within
// ConnectTimeout (and ctx).
func (h *Host) start(ctx context.Context, cfg Server) (*session, error) {
	s := &session{ended: make(chan struct{})}
	s.life, s.end = context.WithCancel(h.ctx)
	var transport mcp.Transport
	if cfg.Stdio() {
		p, err := spawn(cfg, h.opts.BaseEnv, h.opts.StopGrace)
		if err != nil {
			s.end()
			hint := ""
			if errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) {
				hint = ": install it, or write its whole path in Settings"
			}
			return nil, fmt.Errorf("start MCP server %q: run %s: %w: %v%s", cfg.Name, cfg.Command[0], ErrServerFailed, err, hint)
		}
		s.proc = p
		transport = &mcp.IOTransport{Reader: readOnly{p.stdout}, Writer: p.stdin, MaxLineLength: maxMessageBytes}
		h.opts.Log.Info("MCP server started", "server", cfg.Name, "pid", p.PID)
	} else {
		transport = &mcp.StreamableClientTransport{
			Endpoint: cfg.URL, HTTPClient: httpClient(cfg), DisableStandaloneSSE: true, MaxRetries: -1,
		}
	}
	// The session lives on s.life (the SDK keeps the connect context for
	// the connection's life); the time limit and ctx bound the handshake
	// only, by ending s.life if they fire first.
	connectCtx, cancel := context.WithTimeout(ctx, h.opts.ConnectTimeout)
	defer cancel()
	watch := context.AfterFunc(connectCtx, s.end)
	cs, err := h.client.Connect(s.life, transport, nil)
	if !watch() && err == nil {
		cs.Close()
		err = connectCtx.Err()
	}
	if err != nil {
		s.end()
		err = h.startError(ctx, connectCtx, cfg, s, err)
		if s.proc != nil {
			s.proc.stop(h.opts.StopGrace)
		}
		return nil, err
	}
	s.cs = cs
	go func() {
		s.waitErr = cs.Wait()
		close(s.ended)
	}()
	return s, nil
}

// startError says why a server could not be started.
func (h *Host) startError(ctx, connectCtx context.Context, cfg Server, s *session, err error) error {
	switch {
	case ctx.Err() != nil:
		return fmt.Errorf("start MCP server %q: %w", cfg.Name, ctx.Err())
	case connectCtx.Err() != nil:
		return fmt.Errorf("start MCP server %q: %w: it did not finish the MCP handshake within %s%s", cfg.Name, ErrServerFailed, h.opts.ConnectTimeout, s.procWords(0))
	case h.ctx.Err() != nil:
		return ErrClosed
	case s.proc != nil:
		hint := ""
		if strings.Contains(err.Error(), "invalid character") {
			hint = ": it wrote something that is not an MCP message on its standard output (is it an MCP server? its logs must go to standard error)"
		}
		return fmt.Errorf("start MCP server %q: %w: the MCP handshake failed (%v)%s%s", cfg.Name, ErrServerFailed, plainErr(err), hint, s.procWords(h.opts.StopGrace))
	}
	return fmt.Errorf("connect to MCP server %q at %s: %w: %s", cfg.Name, cfg.URL, ErrServerFailed, httpWords(err))
}

// callError says why a listing or call failed, and stops a session that
// broke.
func (h *Host) callError(ctx, callCtx context.Context, e *entry, s *session, what string, err error) error {
	name := e.cfg.Name
	var rpcErr *jsonrpc.Error
	switch {
	case ctx.Err() != nil:
		return fmt.Errorf("MCP server %q: %s: %w", name, what, ctx.Err())
	case h.ctx.Err() != nil:
		return fmt.Errorf("MCP server %q: %s: %w", name, what, ErrClosed)
	case s.brokeErr() != nil:
		// Its watcher saw it end first, and is stopping it.
		return fmt.Errorf("MCP server %q: %s: %w", name, what, s.brokeErr())
	case s.life.Err() != nil:
		return fmt.Errorf("MCP server %q: %s: %w: it was stopped during the call", name, what, ErrServerFailed)
	case errors.Is(callCtx.Err(), context.DeadlineExceeded):
		err := fmt.Errorf("MCP server %q: %s: %w: no answer within %s, so the call was cancelled", name, what, ErrTimeout, h.opts.CallTimeout)
		h.mu.Lock()
		e.fail(err)
		h.mu.Unlock()
		return err
	case errors.As(err, &rpcErr):
		// The server answered with an error: it is still well.
		return fmt.Errorf("MCP server %q refused to %s: %s", name, what, sanitizeLine(rpcErr.Message))
	}
	// The connection broke: the server exited or wrote something that is
	// not MCP. Wait for the watcher to see it, so the words are its.
	grace := time.NewTimer(h.opts.StopGrace)
	defer grace.Stop()
	select {
	case <-s.ended:
	case <-grace.C:
	}
	ferr := fmt.Errorf("MCP server %q: %s: %w", name, what, s.brokenError(e.cfg, h.opts.StopGrace))
	h.mu.Lock()
	e.fail(ferr)
	if e.live == s {
		h.stopLocked(e)
	}
	h.mu.Unlock()
	return ferr
}

// fail keeps err as the server's last error. h.mu is held.
func (e *entry) fail(err error) {
	e.lastErr, e.lastAt = err.Error(), time.Now()
}

// brokenError says how a session ended by itself.
func (s *session) brokenError(cfg Server, grace time.Duration) error {
	if s.proc == nil {
		return fmt.Errorf("%w: the connection to %s ended", ErrServerFailed, cfg.URL)
	}
	if s.isEnded() && s.waitErr != nil {
		return fmt.Errorf("%w: the server wrote something that is not an MCP message on its standard output (%s; a server must write only MCP messages there, and its logs to standard error)%s; it was stopped and will be started again on the next use", ErrServerFailed, plainErr(s.waitErr), s.procWords(0))
	}
	if s.proc.waitExit(grace) {
		return fmt.Errorf("%w: the server stopped (%s); it will be started again on the next use", ErrServerFailed, s.proc.exitWords())
	}
	return fmt.Errorf("%w: the server closed its output but still runs%s; it was stopped and will be started again on the next use", ErrServerFailed, s.procWords(0))
}

// procWords is "; " and how the process ended (waiting up to grace for
// it), or "" for a URL server.
func (s *session) procWords(grace time.Duration) string {
	if s.proc == nil {
		return ""
	}
	s.proc.waitExit(grace)
	if !s.proc.Exited() {
		if last := s.proc.stderr.lastLines(); last != "" {
			return "; its last words: " + last
		}
		return ""
	}
	return "; " + s.proc.exitWords()
}

// isEnded reports whether the connection has ended.
func (s *session) isEnded() bool {
	select {
	case <-s.ended:
		return true
	default:
		return false
	}
}

// stop ends the session: calls under way are cancelled, a stdio server
// is shut down as the specification says (process.stop), a URL session
// is closed. It returns when the process has exited.
func (s *session) stop(grace time.Duration) {
	s.stopMu.Do(func() {
		s.end()
		if s.proc != nil {
			s.proc.stop(grace)
		}
		if s.cs == nil {
			return
		}
		// Close waits for calls under way; they were all cancelled, but
		// a misbehaving transport must not hold NPU Chat's quit.
		closed := make(chan struct{})
		go func() {
			s.cs.Close()
			close(closed)
		}()
		t := time.NewTimer(grace + 5*time.Second)
		defer t.Stop()
		select {
		case <-closed:
		case <-t.C:
		}
	})
}

// toTool keeps what the chat needs of a tool, made safe to show.
func toTool(t *mcp.Tool) Tool {
	schema, err := json.Marshal(t.InputSchema)
	if err != nil || string(schema) == "null" {
		schema = json.RawMessage(`{"type":"object"}`)
	}
	desc := sanitize(t.Description)
	if len(desc) > 4096 {
		desc = strings.ToValidUTF8(desc[:4096], "") + "…"
	}
	return Tool{Name: sanitizeLine(t.Name), Description: desc, InputSchema: schema}
}

// httpClient is the client for a URL server: TLS verified (the default
// transport's settings, never InsecureSkipVerify), the bearer token sent
// only to the server's own host, no redirect elsewhere.
func httpClient(cfg Server) *http.Client {
	base := http.DefaultTransport.(*http.Transport).Clone()
	base.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	u, _ := url.Parse(cfg.URL)
	return &http.Client{
		Transport: &bearer{base: base, host: u.Host, token: cfg.Token},
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if req.URL.Host != u.Host || req.URL.Scheme != u.Scheme {
				return fmt.Errorf("the server redirected to %s://%s; NPU Chat follows no redirect to another server", req.URL.Scheme, req.URL.Host)
			}
			if len(via) >= 5 {
				return errors.New("too many redirects")
			}
			return nil
		},
	}
}

// bearer adds the Authorization header to requests to one host.
type bearer struct {
	base  http.RoundTripper
	host  string
	token Secret
}

func (b *bearer) RoundTrip(req *http.Request) (*http.Response, error) {
	if b.token == "" || req.URL.Host != b.host {
		return b.base.RoundTrip(req)
	}
	req = req.Clone(req.Context())
	req.Header.Set("Authorization", "Bearer "+b.token.Reveal())
	return b.base.RoundTrip(req)
}

// httpWords says why a URL server could not be reached, with a hint for
// the usual causes (the SDK words an HTTP status as its text:
// "Unauthorized").
func httpWords(err error) string {
	msg := plainErr(err)
	switch {
	case strings.Contains(msg, "connection refused"):
		return msg + ": nothing listens at that address; is the server running?"
	case strings.Contains(msg, "certificate"):
		return msg + ": its TLS certificate is not valid for this address (NPU Chat always checks it)"
	case strings.Contains(msg, http.StatusText(http.StatusUnauthorized)):
		return msg + ": the server wants a token, or refused this one: set the right token in Settings"
	case strings.Contains(msg, http.StatusText(http.StatusForbidden)):
		return msg + ": the server refused access with this token"
	}
	return msg
}

// plainErr is err's text on one line, made safe to show.
func plainErr(err error) string { return sanitizeLine(err.Error()) }

// recoverAs turns a panic in the SDK's code on this goroutine into an
// error: a server's bad answer must never take NPU Chat down.
func recoverAs(err *error, server, what string) {
	if r := recover(); r != nil {
		*err = fmt.Errorf("MCP server %q: %s: %w: NPU Chat's MCP client failed on its answer (%v)", server, what, ErrServerFailed, r)
	}
}
