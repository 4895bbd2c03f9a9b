package app

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"syscall"
	"time"

	"github.com/npuchat/npuchat/eventbus"
)

// Shutdown's time budget: Quit and SIGTERM must end the process within
// 5 seconds.
const (
	// ShutdownGrace is how long answers being written may go on after
	// the server stopped accepting, before the model is switched off and
	// what still runs is ended.
	ShutdownGrace = 2 * time.Second
	// ShutdownTimeout bounds the whole of Shutdown when Run ends it.
	ShutdownTimeout = 4 * time.Second
)

// ModelAtStart says what Run does with the model when it starts.
type ModelAtStart int

const (
	// ModelOnRequest leaves the model enabled but not loaded: the first
	// request loads it (`npuchat serve --lazy`).
	ModelOnRequest ModelAtStart = iota
	// ModelOn loads the model at once (`npuchat serve`, and the tray
	// with "serve at start").
	ModelOn
	// ModelOff switches the model off: the API listens and answers 503
	// until the user starts the model (the tray's default).
	ModelOff
)

// RunOptions say how Run serves.
type RunOptions struct {
	// Model is what happens to the model at start.
	Model ModelAtStart
	// RetryListen, when positive, is how often Run tries again to listen
	// when the address is taken (the tray: the status says why, and the
	// tray stays up); zero returns the error (`npuchat serve`).
	RetryListen time.Duration
	// Ready is called with the chat page's URL once listening.
	Ready func(url string)
}

// ServerStatus is the web server's state, for the tray's status line.
type ServerStatus struct {
	// Listening is true while the API and the page are served.
	Listening bool
	// Addr is the address asked for, or the bound one once listening.
	Addr string
	// URL is the chat page's URL.
	URL string
	// Err says why the server is not listening (the port is taken, ...).
	Err error
}

// Server returns the web server's state now.
func (a *App) Server() ServerStatus {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.server
}

// WatchServer returns a channel that receives the web server's state
// each time it changes (the latest state wins when the reader is slow),
// and a function that ends the watch.
func (a *App) WatchServer() (<-chan ServerStatus, func()) {
	sub := eventbus.Subscribe(a.bus, eventbus.Options[ServerStatus]{
		Buffer:  1,
		Replace: func(old, next ServerStatus) bool { return true },
	})
	return sub.Events(), sub.Close
}

func (a *App) setServer(s ServerStatus) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.server = s
	eventbus.Publish(a.bus, s) // under a.mu: in the order of the changes
}

// OnShutdown adds f to what Shutdown runs after the server and the model
// stopped (the history store's flush and close), in the order added.
func (a *App) OnShutdown(f func(ctx context.Context) error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.closers = append(a.closers, f)
}

// Run serves the API and the chat page until ctx ends or Shutdown is
// called, then shuts down (within ShutdownTimeout) and returns. It
// returns an error when the server cannot listen and RetryListen is
// zero, or when it fails while serving.
func (a *App) Run(ctx context.Context, ro RunOptions) error {
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	a.mu.Lock()
	if a.stop != nil {
		a.mu.Unlock()
		return errors.New("app: Run called twice")
	}
	a.stop = stop
	a.mu.Unlock()
	shutdown := func() error {
		sctx, cancel := context.WithTimeout(context.Background(), ShutdownTimeout)
		defer cancel()
		return a.Shutdown(sctx)
	}

	switch ro.Model {
	case ModelOn:
		if err := a.mgr.Start(a.Model()); err != nil {
			a.log.Warn("model not started", "model", a.Model(), "err", err)
		}
	case ModelOff:
		if err := a.mgr.Stop(runCtx); err != nil {
			a.log.Warn("model not switched off", "err", err)
		}
	}
	ln, err := a.listen(runCtx, ro.RetryListen)
	if err != nil {
		if runCtx.Err() != nil {
			err = nil // stopped while waiting for the port
		}
		return errors.Join(err, shutdown())
	}
	served := make(chan struct{})
	a.mu.Lock()
	a.running = served
	a.mu.Unlock()
	var serveErr error
	go func() {
		defer close(served)
		serveErr = a.srv.Serve(runCtx, ln, func(bound string) {
			a.setServer(ServerStatus{Listening: true, Addr: bound, URL: chatURL(bound)})
			a.log.Info("serving", "url", chatURL(bound), "model", a.Model(), "engine", a.Engine(), "data", a.cfg.DataDir)
			if ro.Ready != nil {
				ro.Ready(chatURL(bound))
			}
		})
	}()
	select {
	case <-served:
	case <-runCtx.Done():
	}
	err = shutdown()
	select {
	case <-served:
		if serveErr != nil && !errors.Is(serveErr, context.Canceled) {
			err = errors.Join(fmt.Errorf("serve: %w", serveErr), err)
		}
	default:
	}
	return err
}

// listen listens on the configured address; when the address is taken
// and retry is positive it says so in the server status and tries again
// every retry until ctx ends.
func (a *App) listen(ctx context.Context, retry time.Duration) (net.Listener, error) {
	for {
		var lc net.ListenConfig
		ln, err := lc.Listen(ctx, "tcp", a.cfg.Addr)
		if err == nil {
			return ln, nil
		}
		if isAddrInUse(err) {
			err = fmt.Errorf("listen on %s: the port is taken by another program (is NPU Chat or FastFlowLM already running?); "+
				"quit it, or set another address with --addr or NPUCHAT_ADDR: %w", a.cfg.Addr, err)
		} else {
			err = fmt.Errorf("listen on %s: %w", a.cfg.Addr, err)
		}
		a.setServer(ServerStatus{Addr: a.cfg.Addr, URL: chatURL(a.cfg.Addr), Err: err})
		if retry <= 0 {
			return nil, err
		}
		a.log.Warn("cannot listen; trying again", "addr", a.cfg.Addr, "every", retry, "err", err)
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(retry):
		}
	}
}

// isAddrInUse tells "the port is taken" from other listen errors, on
// Unix (EADDRINUSE) and Windows (WSAEADDRINUSE, 10048).
func isAddrInUse(err error) bool {
	if errors.Is(err, syscall.EADDRINUSE) {
		return true
	}
	var errno syscall.Errno
	if errors.As(err, &errno) && errno == 10048 {
		return true
	}
	s := err.Error()
	return strings.Contains(s, "address already in use") || strings.Contains(s, "Only one usage of each socket address")
}

// Shutdown stops serving, lets running answers finish for up to
// ShutdownGrace, switches the model off (ending what still runs and
// stopping any FastFlowLM child), runs the OnShutdown functions (the
// history's flush), and closes the logs. It is bounded by ctx, and
// calling it again returns the first call's result.
func (a *App) Shutdown(ctx context.Context) error {
	a.shutOnce.Do(func() { a.shutErr = a.shutdown(ctx) })
	return a.shutErr
}

func (a *App) shutdown(ctx context.Context) error {
	a.mu.Lock()
	stop, running, closers := a.stop, a.running, a.closers
	a.mu.Unlock()
	if stop != nil {
		stop()
	}
	if running != nil {
		grace := time.NewTimer(ShutdownGrace)
		select {
		case <-running:
		case <-grace.C:
		case <-ctx.Done():
		}
		grace.Stop()
	}
	var errs []error
	if err := a.mgr.Close(ctx); err != nil {
		errs = append(errs, fmt.Errorf("switch the model off: %w", err))
	}
	if running != nil {
		select {
		case <-running:
		case <-ctx.Done():
			errs = append(errs, fmt.Errorf("the web server did not stop in time: %w", ctx.Err()))
		}
	}
	for _, f := range closers {
		if err := f(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	if err := a.mcp.Close(); err != nil { // returns once every server has exited
		errs = append(errs, fmt.Errorf("stop the MCP servers: %w", err))
	}
	a.setServer(ServerStatus{Addr: a.cfg.Addr, URL: a.ChatURL(), Err: errors.New("NPU Chat has stopped")})
	a.log.Info("stopped")
	a.closeFiles()
	return errors.Join(errs...)
}
