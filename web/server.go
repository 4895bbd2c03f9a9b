package web

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/npuchat/npuchat/config"
	"github.com/npuchat/npuchat/history"
	"github.com/npuchat/npuchat/pdftext"
	"github.com/npuchat/npuchat/service"
	"github.com/npuchat/npuchat/service/install"
)

// Options configure the HTTP server.
type Options struct {
	// Addr is where to listen (host:port). A non-loopback address needs
	// an APIKey.
	Addr string
	// APIKey, when set, is required as "Authorization: Bearer KEY" on
	// every API route.
	APIKey string
	// Origins are browser origins allowed besides loopback ones
	// (e.g. "https://my.tool.example").
	Origins []string
	// Hosts are Host header values allowed besides loopback names and
	// the listening address (for a reverse proxy's name).
	Hosts []string
	// MaxBodyBytes caps a request body (default 8 MiB).
	MaxBodyBytes int64
	// QueuedBodyBytes bounds the memory generation bodies being read at
	// once hold beyond their first 256 KiB each (default 4 ×
	// MaxBodyBytes): a larger body arriving when it is used up is
	// refused with 429 (body.go, readQueued).
	QueuedBodyBytes int64
	// Version is reported by /api/version.
	Version string
	// CheckNPU runs the NPU check for GET /api/check (the report the
	// tray's "Check NPU" and the page's check view show); nil: 404.
	CheckNPU func(ctx context.Context) (any, error)
	// History is the chat history for /api/conversations; nil: 404.
	History *history.Handle
	// Settings are the settings the page changes (/api/settings); nil: 404.
	Settings Settings
	// MCP runs the MCP servers of the settings (/api/settings/mcp);
	// nil: none run, their tools cannot be listed.
	MCP MCPHost
	// Library is the model library for /api/library; nil: 404.
	Library Library
	// Installs runs model installs for /api/models/{name}/install; nil: 404.
	Installs *install.Runner
	// Sessions are the chat page's one-time links and sessions
	// (session.go); nil: kept in memory only.
	Sessions *Sessions
	// LogFile is the log the page's log view tails (/api/logs).
	LogFile string
	Logger  *slog.Logger
	// WriteTimeout bounds each write of an answer: a client that reads
	// nothing for this long is dropped and its generation ended, so that
	// it cannot hold the one generation slot (default 30 s).
	WriteTimeout time.Duration
	// BodyTimeout bounds the time a request body may take to arrive
	// (default 30 s); headers have 10 s.
	BodyTimeout time.Duration
	// ShutdownGrace is how long running answers may go on when the
	// server shuts down (Serve's ctx ends) before they are ended with an
	// explicit error (default 1.5 s, inside the app's 2 s grace).
	ShutdownGrace time.Duration
}

// Server is NPU Chat's HTTP server.
type Server struct {
	mgr      *service.Manager
	opts     Options
	log      *slog.Logger
	sessions *Sessions
	// chats are the conversations answering now (chatwriter.go).
	chats chatWriters
	// convChanges signals a change to the conversations (convevents.go).
	convChanges changeSignal
	// bodies is the memory generation bodies being read hold (body.go).
	bodies *bodyBudget
	// pdfs reads PDF attachments, two at a time (attachments.go).
	pdfs *pdftext.Extractor

	// stopping is closed when shutdown begins: event streams end, and
	// answers that fail from then on say the server is shutting down.
	stopping     chan struct{}
	stopOnce     sync.Once
	endAnswers   context.Context // cancelled when the shutdown grace is over
	endAnswersFn context.CancelCauseFunc

	mu  sync.Mutex   // guards srv and port
	srv *http.Server // the running server, nil before Serve
	// port is the port the server listens on: Options.Addr's until
	// Serve, then the listener's (0: not known yet). The Host check and
	// the session cookie's name use it.
	port int
}

// errShuttingDown ends the answers still running when the shutdown grace
// is over.
var errShuttingDown = errors.New("NPU Chat is shutting down; the answer was cut short. Ask again when it is back")

// NewServer returns a server for the manager. It refuses a non-loopback
// address without an API key: the API would be open to the network.
func NewServer(mgr *service.Manager, opts Options) (*Server, error) {
	if opts.Addr == "" {
		opts.Addr = config.DefaultAddr
	}
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = 8 << 20
	}
	if opts.QueuedBodyBytes <= 0 {
		opts.QueuedBodyBytes = 4 * opts.MaxBodyBytes
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Version == "" {
		opts.Version = "dev"
	}
	if opts.WriteTimeout <= 0 {
		opts.WriteTimeout = writeTimeout
	}
	if opts.BodyTimeout <= 0 {
		opts.BodyTimeout = 30 * time.Second
	}
	if opts.ShutdownGrace <= 0 {
		opts.ShutdownGrace = 1500 * time.Millisecond
	}
	if opts.APIKey != "" && strings.TrimSpace(opts.APIKey) == "" {
		return nil, errors.New("the API key is blank (only spaces): it would lock every client out; set a real key (NPUCHAT_API_KEY) or none")
	}
	opts.APIKey = strings.TrimSpace(opts.APIKey)
	if !config.IsLoopback(opts.Addr) && opts.APIKey == "" {
		return nil, fmt.Errorf("serve on %s: this address is reachable from other machines; set an API key (NPUCHAT_API_KEY) or bind to 127.0.0.1", opts.Addr)
	}
	if opts.Sessions == nil {
		opts.Sessions = NewSessions("", nil)
	}
	end, endFn := context.WithCancelCause(context.Background())
	return &Server{mgr: mgr, opts: opts, log: opts.Logger, sessions: opts.Sessions, stopping: make(chan struct{}), endAnswers: end, endAnswersFn: endFn, port: addrPort(opts.Addr), pdfs: newPDFExtractor(),
		bodies: &bodyBudget{max: opts.QueuedBodyBytes}}, nil
}

// addrPort is the port of a host:port address, 0 when it has none.
func addrPort(addr string) int {
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		return 0
	}
	n, err := strconv.Atoi(p)
	if err != nil {
		return 0
	}
	return n
}

// listenPort is the port the server listens on (0: not known yet).
func (s *Server) listenPort() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.port
}

// Handler returns the root handler: routes behind the security checks.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	// OpenAI-compatible API.
	mux.HandleFunc("POST /v1/chat/completions", s.openAIChat)
	mux.HandleFunc("POST /v1/completions", s.openAICompletions)
	mux.HandleFunc("POST /v1/messages", s.anthropicMessages)
	mux.HandleFunc("POST /v1/responses", s.openAIResponses)
	mux.HandleFunc("POST /v1/embeddings", s.openAIEmbeddings)
	mux.HandleFunc("GET /v1/models", s.openAIModels)
	mux.HandleFunc("GET /v1/models/{id...}", s.openAIModel)
	// Ollama-compatible API.
	mux.HandleFunc("POST /api/chat", s.ollamaChat)
	mux.HandleFunc("POST /api/generate", s.ollamaGenerate)
	mux.HandleFunc("POST /api/embed", func(w http.ResponseWriter, r *http.Request) { s.ollamaEmbed(w, r, false) })
	mux.HandleFunc("POST /api/embeddings", func(w http.ResponseWriter, r *http.Request) { s.ollamaEmbed(w, r, true) })
	mux.HandleFunc("GET /api/tags", s.ollamaTags)
	mux.HandleFunc("GET /api/ps", s.ollamaPs)
	mux.HandleFunc("POST /api/show", s.ollamaShow)
	mux.HandleFunc("GET /api/version", s.ollamaVersion)
	// Control API for the tray and the page.
	mux.HandleFunc("GET /api/status", s.status)
	mux.HandleFunc("POST /api/model/start", s.modelStart)
	mux.HandleFunc("POST /api/model/stop", s.modelStop)
	mux.HandleFunc("GET /api/events", s.events)
	mux.HandleFunc("GET /api/check", s.checkNPU)
	// The chat page's API (conversations.go, install.go, settings.go).
	mux.HandleFunc("GET /api/history", s.historyStatus)
	mux.HandleFunc("GET /api/conversations", s.listConversations)
	mux.HandleFunc("POST /api/conversations", s.changesConversations(s.createConversation))
	mux.HandleFunc("GET /api/conversations/{id}", s.getConversation)
	mux.HandleFunc("PATCH /api/conversations/{id}", s.changesConversations(s.updateConversation))
	mux.HandleFunc("DELETE /api/conversations/{id}", s.changesConversations(s.deleteConversation))
	mux.HandleFunc("GET /api/conversations/{id}/export", s.exportConversation)
	mux.HandleFunc("GET /api/conversations/{id}/messages", s.listMessages)
	mux.HandleFunc("POST /api/conversations/{id}/messages", s.changesConversations(s.sendMessage))
	mux.HandleFunc("PUT /api/conversations/{id}/current", s.changesConversations(s.selectVersion))
	mux.HandleFunc("GET /api/models/{name}/install", s.installStatus)
	mux.HandleFunc("POST /api/models/{name}/install", s.installStart)
	mux.HandleFunc("DELETE /api/models/{name}/install", s.installCancel)
	mux.HandleFunc("GET /api/library", s.libraryList)
	mux.HandleFunc("POST /api/library", s.libraryAdd)
	mux.HandleFunc("GET /api/library/browse", s.libraryBrowse)
	mux.HandleFunc("GET /api/library/catalog", s.libraryCatalog)
	mux.HandleFunc("POST /api/library/{name}/use", s.libraryUse)
	mux.HandleFunc("POST /api/library/{name}/prepare-oflm", s.libraryPrepareOFLM)
	mux.HandleFunc("DELETE /api/library/{name}", s.libraryRemove)
	mux.HandleFunc("GET /api/settings", s.getSettings)
	mux.HandleFunc("PUT /api/settings", s.putSettings)
	mux.HandleFunc("GET /api/settings/mcp", s.mcpServers)
	mux.HandleFunc("GET /api/settings/mcp/{name}/tools", s.mcpTools)
	mux.HandleFunc("GET /api/logs", s.logTail)
	mux.HandleFunc("POST /api/attachments/pdf", s.pdfText)
	// The chat page.
	mux.HandleFunc("GET /open", s.openLink)
	mux.HandleFunc("GET /{$}", s.page)
	mux.HandleFunc("GET /c/{id}", s.page)
	mux.Handle("GET /static/", s.staticFiles())
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, r, http.StatusNotFound, "not_found", fmt.Sprintf("no route for %s %s", r.Method, r.URL.Path))
	})
	return s.secure(mux)
}

// ListenAndServe serves until ctx ends, then shuts down gracefully.
// ready, if not nil, is called with the bound address once listening.
func (s *Server) ListenAndServe(ctx context.Context, ready func(addr string)) error {
	ln, err := net.Listen("tcp", s.opts.Addr)
	if err != nil {
		if strings.Contains(err.Error(), "address already in use") {
			return fmt.Errorf("listen on %s: the port is taken (is NPU Chat or FastFlowLM already running?): %w", s.opts.Addr, err)
		}
		return fmt.Errorf("listen on %s: %w", s.opts.Addr, err)
	}
	return s.Serve(ctx, ln, ready)
}

// Serve serves on ln until ctx ends, then shuts down as Shutdown does,
// with Options.ShutdownGrace for the running answers.
func (s *Server) Serve(ctx context.Context, ln net.Listener, ready func(addr string)) error {
	srv := &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
		// Requests do not end with ctx: shutting down lets running
		// answers finish, then ends them with an explicit error.
		BaseContext: func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
	}
	s.mu.Lock()
	s.srv = srv
	// The listener's port is the one the Host check accepts and the
	// session cookie is named for, also when the system chose it (":0").
	s.port = addrPort(ln.Addr().String())
	s.mu.Unlock()
	if ready != nil {
		ready(ln.Addr().String())
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), s.opts.ShutdownGrace)
	defer cancel()
	shutErr := s.Shutdown(sctx)
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return shutErr
}

// endWait is how long answers ended by Shutdown have to write their
// error before their connections are closed.
const endWait = time.Second

// Shutdown stops accepting connections and ends the event streams, lets
// running answers finish until ctx ends, then ends those still running
// with an explicit error (a 503 JSON body, an SSE error event, an Ollama
// error line: see Server.drive), gives them endWait to write it, and
// closes what is left. Answers waiting in the queue are ended the same
// way.
func (s *Server) Shutdown(ctx context.Context) error {
	s.stopOnce.Do(func() { close(s.stopping) })
	s.mu.Lock()
	srv := s.srv
	s.mu.Unlock()
	if srv == nil {
		s.endAnswersFn(errShuttingDown)
		return nil
	}
	err := srv.Shutdown(ctx)
	if err == nil {
		return nil
	}
	s.endAnswersFn(errShuttingDown)
	wctx, cancel := context.WithTimeout(context.Background(), endWait)
	defer cancel()
	if err := srv.Shutdown(wctx); err != nil {
		srv.Close()
		return fmt.Errorf("shut down the web server: connections still open after the grace were closed: %w", err)
	}
	return nil
}

// shuttingDown reports whether Shutdown has begun.
func (s *Server) shuttingDown() bool {
	select {
	case <-s.stopping:
		return true
	default:
		return false
	}
}
