package web

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/npuchat/npuchat/config"
	"github.com/npuchat/npuchat/history"
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
	// Version is reported by /api/version.
	Version string
	// CheckNPU runs the NPU check for GET /api/check (the report the
	// tray's "Check NPU" and the page's check view show); nil: 404.
	CheckNPU func(ctx context.Context) (any, error)
	// History is the chat history for /api/conversations; nil: 404.
	History *history.Handle
	// Settings are the settings the page changes (/api/settings); nil: 404.
	Settings *SettingsStore
	// Installs runs model installs for /api/models/{name}/install; nil: 404.
	Installs *install.Runner
	// LogFile is the log the page's log view tails (/api/logs).
	LogFile string
	Logger  *slog.Logger
}

// Server is NPU Chat's HTTP server.
type Server struct {
	mgr  *service.Manager
	opts Options
	log  *slog.Logger
}

// NewServer returns a server for the manager. It refuses a non-loopback
// address without an API key: the API would be open to the network.
func NewServer(mgr *service.Manager, opts Options) (*Server, error) {
	if opts.Addr == "" {
		opts.Addr = config.DefaultAddr
	}
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = 8 << 20
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Version == "" {
		opts.Version = "dev"
	}
	if !config.IsLoopback(opts.Addr) && opts.APIKey == "" {
		return nil, fmt.Errorf("serve on %s: this address is reachable from other machines; set an API key (NPUCHAT_API_KEY) or bind to 127.0.0.1", opts.Addr)
	}
	return &Server{mgr: mgr, opts: opts, log: opts.Logger}, nil
}

// Handler returns the root handler: routes behind the security checks.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	// OpenAI-compatible API.
	mux.HandleFunc("POST /v1/chat/completions", s.openAIChat)
	mux.HandleFunc("POST /v1/completions", s.openAICompletions)
	mux.HandleFunc("GET /v1/models", s.openAIModels)
	mux.HandleFunc("GET /v1/models/{id...}", s.openAIModel)
	// Ollama-compatible API.
	mux.HandleFunc("POST /api/chat", s.ollamaChat)
	mux.HandleFunc("POST /api/generate", s.ollamaGenerate)
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
	mux.HandleFunc("POST /api/conversations", s.createConversation)
	mux.HandleFunc("GET /api/conversations/{id}", s.getConversation)
	mux.HandleFunc("PATCH /api/conversations/{id}", s.updateConversation)
	mux.HandleFunc("DELETE /api/conversations/{id}", s.deleteConversation)
	mux.HandleFunc("GET /api/conversations/{id}/export", s.exportConversation)
	mux.HandleFunc("GET /api/conversations/{id}/messages", s.listMessages)
	mux.HandleFunc("POST /api/conversations/{id}/messages", s.sendMessage)
	mux.HandleFunc("GET /api/models/{name}/install", s.installStatus)
	mux.HandleFunc("POST /api/models/{name}/install", s.installStart)
	mux.HandleFunc("DELETE /api/models/{name}/install", s.installCancel)
	mux.HandleFunc("GET /api/settings", s.getSettings)
	mux.HandleFunc("PUT /api/settings", s.putSettings)
	mux.HandleFunc("GET /api/logs", s.logTail)
	// The chat page.
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

// Serve serves on ln until ctx ends.
func (s *Server) Serve(ctx context.Context, ln net.Listener, ready func(addr string)) error {
	srv := &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
	// The listener's own address lets the Host check accept it when the
	// port was chosen by the system (":0").
	s.opts.Hosts = append(s.opts.Hosts, ln.Addr().String())
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
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		srv.Close()
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
