package app

import (
	"context"
	"fmt"
	"github.com/npuchat/npuchat/history"
	"github.com/npuchat/npuchat/models"
	"github.com/npuchat/npuchat/models/library"
	"github.com/npuchat/npuchat/service/install"
	"io"
	"log/slog"
	"net"
	neturl "net/url"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/npuchat/npuchat/autostart"
	"github.com/npuchat/npuchat/config"
	"github.com/npuchat/npuchat/enginekind"
	"github.com/npuchat/npuchat/eventbus"
	"github.com/npuchat/npuchat/mcphost"
	"github.com/npuchat/npuchat/models/catalog"
	flmfiles "github.com/npuchat/npuchat/models/flm"
	"github.com/npuchat/npuchat/npu/flm"
	"github.com/npuchat/npuchat/npu/oflm"
	"github.com/npuchat/npuchat/npu/xrt"
	"github.com/npuchat/npuchat/service"
	"github.com/npuchat/npuchat/service/cpu"
	"github.com/npuchat/npuchat/web"
	"gopkg.in/natefinch/lumberjack.v2"
)

// Flags are the command-line settings `npuchat serve` and the tray share
// (--addr, --model, --name, --engine, --remote-url, --keep-alive,
// --flm-root). An empty field keeps the setting or environment variable.
type Flags struct {
	Addr string
	// Model is a catalog name (minicpm5:2b) or a GGUF file, Hugging Face
	// folder or FastFlowLM model folder, served under Name.
	Model     string
	Name      string
	Engine    string
	RemoteURL string
	KeepAlive string
	FLMRoot   string
	// OFLM is the oflm executable to run instead of finding it (PATH,
	// then its packaged locations).
	OFLM string
	// KVCacheType overrides the kv_cache_type setting for this run.
	KVCacheType string
	// Speculative overrides the speculative setting for this run.
	Speculative string
	// Parallel is how many requests the CPU engine answers at once, as
	// the parallel setting has it ("0" automatic; "" the setting).
	Parallel string
}

// Options are what New needs from the program, and what tests swap.
type Options struct {
	// Getenv reads the environment (os.Getenv in the program): the
	// settings, FastFlowLM discovery, XILINX_XRT, XDG folders.
	Getenv func(string) string
	// GOOS picks the folders and the launch-at-login mechanism
	// (runtime.GOOS when empty).
	GOOS string
	// Flags override the settings for this run (never saved).
	Flags Flags
	// Version is reported by /api/version and the About box.
	Version string
	// Stderr, when set, also receives the log as text (the log file gets
	// JSON either way).
	Stderr io.Writer
	// Logger replaces the log (stderr and logs/npuchat.log) when set.
	Logger *slog.Logger
	// NPUSysroot, when set, is a recorded system tree the NPU check reads
	// instead of this machine (`npuchat check --record` makes one).
	NPUSysroot string
	// XRT probes the XRT runtime for the NPU check. The program passes a
	// child-process prober running its own executable (`npuchat check
	// --xrt-probe-child`); nil looks for XRT on disk only.
	XRT xrt.Prober
	// FLMExecutable, when set, is run instead of the flm FastFlowLM's
	// layout names.
	FLMExecutable string
	// Now is the service's clock (time.Now when nil).
	Now func() time.Time
	// MemAvailable is the memory free now, in bytes, for loading the CPU
	// engine beside FastFlowLM (/proc/meminfo's MemAvailable when nil).
	MemAvailable func() (int64, error)
	// OpenURL opens a URL in the user's browser (xdg-open on Linux, the
	// URL protocol handler on Windows, when nil).
	OpenURL func(url string) error
	// LaunchAtLogin reads and writes the launch-at-login entry (the XDG
	// autostart file or the Run registry value for this user, when nil).
	LaunchAtLogin autostart.Entry
	// Executable is the program launch at login starts (os.Executable
	// when empty).
	Executable string
}

// App is NPU Chat assembled. Its methods are safe for concurrent use.
type App struct {
	opts Options
	cfg  *config.Config
	log  *slog.Logger
	mgr  *service.Manager
	cat  *catalog.Catalog
	srv  *web.Server
	// lib is the one owner of the models and of which is current;
	// layout is FastFlowLM's layout, found once (layoutOnce).
	lib        *library.Library
	layoutOnce sync.Once
	layout     *flmfiles.Layout
	// flmLog receives FastFlowLM's output (logs/flm.log), oflmLog oflm's
	// (logs/oflm.log).
	flmLog, oflmLog io.WriteCloser
	// closeLog closes the log file (nil with Options.Logger).
	closeLog func()
	// lastNPU is the FastFlowLM backend made last, for its process id.
	lastNPU atomic.Pointer[flm.Backend]
	// lastOFLM is the oflm backend made last; prep is where the page's
	// preparation of the weights for oflm stands.
	lastOFLM atomic.Pointer[oflm.Backend]
	prep     prepStatus
	// login is the launch-at-login entry.
	login autostart.Entry
	// settings owns the settings (config.Store): the page and the tray
	// read and change them through the App (UpdateSettings), which puts
	// each change into effect; applyMu orders those.
	settings *config.Store
	applyMu  sync.Mutex
	// mcp runs the MCP servers of the settings (docs/mcp.md): given
	// each change of them (UpdateSettings), closed at Shutdown.
	mcp *mcphost.Host

	mu sync.Mutex // guards the fields below
	// server is the web server's state; its changes go out on bus
	// (WatchServer).
	server ServerStatus
	// bus carries the server's state and the library's changes.
	bus *eventbus.Bus
	// stop ends Run's serving; running is closed when the web server
	// has returned.
	stop    context.CancelFunc
	running chan struct{}
	// history is the chat page's history; installs runs model installs
	// for the page and the tray.
	history  *history.Handle
	installs *install.Runner
	// closers run at Shutdown (OnShutdown).
	closers []func(context.Context) error

	shutOnce sync.Once // Shutdown runs once; shutErr is its result
	shutErr  error
}

// New loads the configuration, applies opts.Flags, loads the catalog and
// wires the model library, the backends, the service and the web server. A
// setting or flag that cannot work (an unknown engine, a remote engine
// without a URL, a --model that does not exist, a non-loopback address
// without an API key) is an error that says what to change.
func New(ctx context.Context, opts Options) (*App, error) {
	if opts.Getenv == nil {
		opts.Getenv = func(string) string { return "" }
	}
	if opts.GOOS == "" {
		opts.GOOS = runtime.GOOS
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	cfg, err := config.Load(opts.Getenv, opts.GOOS)
	if err != nil {
		return nil, err
	}
	localModel, err := applyFlags(cfg, opts.Flags, opts.Getenv)
	if err != nil {
		return nil, err
	}
	a := &App{opts: opts, cfg: cfg, bus: eventbus.New()}
	a.server = ServerStatus{Addr: cfg.Addr, URL: chatURL(cfg.Addr)}
	a.settings = config.NewStore(cfg)
	a.log = opts.Logger
	if a.log == nil {
		if a.log, a.closeLog, err = newLogger(opts.Stderr, cfg.LogDir, cfg.LogLevel); err != nil {
			return nil, err
		}
	}
	a.login = opts.LaunchAtLogin
	if a.login == nil {
		a.login = autostart.ForOS(opts.GOOS, opts.Getenv)
	}
	a.flmLog = &lumberjack.Logger{Filename: filepath.Join(cfg.LogDir, "flm.log"), MaxSize: 10, MaxBackups: 3}
	a.oflmLog = &lumberjack.Logger{Filename: filepath.Join(cfg.LogDir, "oflm.log"), MaxSize: 10, MaxBackups: 3}
	a.mcp = newMCPHost(cfg.Settings.MCPServers, opts.Version, a.log)
	fail := func(err error) (*App, error) {
		a.mcp.Close()
		a.closeFiles()
		return nil, err
	}
	if a.cat, err = catalog.Load(); err != nil {
		return fail(err)
	}
	a.lib = a.openLibrary(ctx)
	if localModel != "" {
		if _, err := a.lib.AddForRun(ctx, localModel, opts.Flags.Name); err != nil {
			return fail(err)
		}
	}
	a.mgr = service.New(service.Options{
		Resolve:      a.resolve,
		DefaultModel: a.lib.Current(),
		Models:       a.models,
		Engines:      a.engines,
		NewBackend:   a.backendFor,
		Beside:       a.beside,
		Capabilities: a.capabilities,
		ForgetCache: func(tag string) {
			if err := cpu.ForgetKVFiles(a.kvCache(), tag); err != nil {
				a.log.Warn("KV disk cache: forget a chat", "tag", tag, "err", err)
			}
		},
		QueueSize: cfg.QueueSize,
		KeepAlive: cfg.KeepAliveDur,
		Logger:    a.log,
		Now:       opts.Now,
	})
	if cfg.Engine == string(enginekind.Remote) {
		a.addRemoteModels(ctx)
	}
	// The chat page's history, installs and settings.
	a.history = history.NewHandle(filepath.Join(cfg.DataDir, "history.db"), history.Options{})
	a.installs = install.New(install.Options{
		NewInstaller: func() (*models.Installer, error) {
			// The hub and models folder of the settings now (installConfig).
			return models.NewInstaller(a.installConfig(), models.Options{FLMRoot: cfg.FLMRoot, Getenv: opts.Getenv, GOOS: opts.GOOS})
		},
		// Each status goes out as the service's install event (it fails
		// only once the service is closed: nothing to tell then).
		Publish: func(st install.Status) {
			if st.State.Ended() {
				// The library lists what the install left before anyone
				// hears it ended.
				a.lib.Rescan(context.Background())
			}
			a.mgr.Publish(service.Event{Type: service.EventInstall, Message: st.Message, Install: &st})
		},
		Logger: a.log,
		// An install the page asked to finish switches the model on
		// here, in the server, whatever the browser does meanwhile.
		OnDone: func(st install.Status) {
			if !st.Serve {
				return
			}
			if err := a.mgr.Start(st.Model); err != nil {
				a.log.Warn("start the installed model", "model", st.Model, "err", err)
			}
		},
	})
	a.srv, err = web.NewServer(a.mgr, web.Options{
		Addr: cfg.Addr, APIKey: cfg.APIKey, Origins: cfg.Origins, Version: opts.Version, Logger: a.log,
		CheckNPU: func(ctx context.Context) (any, error) { return a.CheckNPU(ctx) },
		History:  a.history, Installs: a.installs, Settings: pageSettings{a}, Library: pageLibrary{a}, MCP: a.mcp,
		LogFile:  filepath.Join(cfg.LogDir, "npuchat.log"),
		Sessions: web.NewSessions(filepath.Join(cfg.DataDir, "sessions.json"), opts.Now),
	})
	if err != nil {
		a.mgr.Close(ctx)
		return fail(err)
	}
	return a, nil
}

// newMCPHost makes the host of the MCP servers. Servers the host refuses
// (a settings file edited by hand: two of one name) are logged and none
// runs until Settings saves a list it takes.
func newMCPHost(servers []mcphost.Server, version string, log *slog.Logger) *mcphost.Host {
	opts := mcphost.Options{Version: version, Log: log.With("part", "mcp")}
	h, err := mcphost.New(servers, opts)
	if err != nil {
		log.Warn("MCP servers in the settings file cannot run; fix them in Settings", "err", err)
		h, _ = mcphost.New(nil, opts) // no server: nothing to refuse
	}
	return h
}

// applyFlags puts the flags over the loaded configuration (getenv is the
// environment it was loaded with) and checks the result; it returns the
// --model path when Model names a file or folder.
func applyFlags(cfg *config.Config, f Flags, getenv func(string) string) (localModel string, err error) {
	set := func(dst *string, v string) {
		if v != "" {
			*dst = v
		}
	}
	set(&cfg.Addr, f.Addr)
	cfg.Addr = config.CanonicalAddr(cfg.Addr)
	set(&cfg.Engine, f.Engine)
	set(&cfg.RemoteURL, f.RemoteURL)
	set(&cfg.FLMRoot, f.FLMRoot)
	if f.KeepAlive != "" {
		if cfg.KeepAliveDur, err = config.ParseKeepAlive(f.KeepAlive); err != nil {
			return "", fmt.Errorf("--keep-alive: %w", err)
		}
		// The page shows the keep-alive in effect; its settings store
		// writes only what the page changes, so this never reaches the
		// file unless changed there.
		cfg.KeepAlive = f.KeepAlive
	}
	if f.Parallel != "" {
		n, err := strconv.Atoi(strings.TrimSpace(f.Parallel))
		if err != nil || n < 0 || n > config.MaxParallel {
			return "", fmt.Errorf("--parallel %q: write 0 (automatic: as many as the KV memory holds, at most 4) or a number of requests from 1 to %d", f.Parallel, config.MaxParallel)
		}
		cfg.Parallel = n // like the keep-alive: for this run, saved only if changed in Settings
	}
	if f.KVCacheType != "" {
		if err := config.CheckKVCacheType(f.KVCacheType); err != nil {
			return "", fmt.Errorf("--kv-cache-type: %w", err)
		}
		// as --keep-alive: shown in Settings, never saved unless changed there
		cfg.KVCacheType = f.KVCacheType
	}
	if f.Speculative != "" {
		if err := config.CheckSpeculative(f.Speculative); err != nil {
			return "", fmt.Errorf("--speculative: %w", err)
		}
		cfg.Speculative = f.Speculative // like --kv-cache-type
	}
	if !ValidEngine(cfg.Engine) {
		return "", fmt.Errorf("--engine %q is not one of %s", cfg.Engine, enginekind.EngineNames())
	}
	if cfg.Engine == string(enginekind.Remote) && cfg.RemoteURL == "" {
		return "", noRemoteURL(cfg.SettingsPath, f.Engine != "", getenv("NPUCHAT_ENGINE") != "")
	}
	if f.Model != "" && LooksLikePath(f.Model) {
		return f.Model, nil
	}
	set(&cfg.Model, f.Model)
	return "", nil
}

// noRemoteURL is the error of the remote engine without a URL, saying
// where the engine came from (the --engine flag, NPUCHAT_ENGINE, or the
// settings file at settings: the order they override each other in) and
// how to fix it there.
func noRemoteURL(settings string, fromFlag, fromEnv bool) error {
	const example = "http://bigbox:8000/v1"
	switch {
	case fromFlag:
		return fmt.Errorf("--engine remote needs the remote server's address: pass --remote-url too (or set NPUCHAT_REMOTE_URL, or put \"remote_url\" in %s), e.g. --remote-url %s", settings, example)
	case fromEnv:
		return fmt.Errorf("the environment variable NPUCHAT_ENGINE=remote is set, but no remote server's address is: set NPUCHAT_REMOTE_URL too (or put \"remote_url\" in %s), e.g. NPUCHAT_REMOTE_URL=%s; or unset NPUCHAT_ENGINE", settings, example)
	}
	return fmt.Errorf("the settings file %s says \"engine\": \"remote\" but has no \"remote_url\": add \"remote_url\": \"%s\" (the remote server's address) to it, or set NPUCHAT_REMOTE_URL; or change \"engine\" to \"auto\" there", settings, example)
}

// Manager is the service: the model's state, its events, generation.
func (a *App) Manager() *service.Manager { return a.mgr }

// Installs runs model installs (the page's and the tray's Install), one
// at a time, reporting progress as EventInstall events.
func (a *App) Installs() *install.Runner { return a.installs }

// WebServer is the web server (API and chat page).
func (a *App) WebServer() *web.Server { return a.srv }

// Config is the resolved configuration of this run (settings, flags and
// environment). Treat it as read-only; change settings with the Set
// methods, which also save them.
func (a *App) Config() *config.Config { return a.cfg }

// Logger is the app's log.
func (a *App) Logger() *slog.Logger { return a.log }

// Version is the program's version.
func (a *App) Version() string { return a.opts.Version }

// Model is the model served by default (a catalog name or a --model
// file's name).
func (a *App) Model() string { return a.lib.Current() }

// ModelInstalled reports whether the default model's files are here (a
// --model file always is), so that the tray knows to offer the setup
// window.
func (a *App) ModelInstalled() bool {
	e, ok := a.lib.Lookup(a.Model())
	return ok && e.Installed
}

// LogDir is the folder of the log files (npuchat.log, flm.log), for the
// tray's "Open logs folder".
func (a *App) LogDir() string { return a.cfg.LogDir }

// Status is the service's state now (what /api/status says).
func (a *App) Status() service.Status { return a.mgr.Status() }

// Subscribe returns the service's events (status, progress, fallback,
// error) and a function that ends the subscription.
func (a *App) Subscribe() (<-chan service.Event, func()) { return a.mgr.Subscribe() }

// StartModel switches the default model on; it loads in the background
// and its progress and outcome arrive as events.
func (a *App) StartModel() error { return a.mgr.Start(a.Model()) }

// StopModel switches the model off (any FastFlowLM child stops).
func (a *App) StopModel(ctx context.Context) error { return a.mgr.Stop(ctx) }

// ChatURL is the chat page's address (the bound one once listening).
func (a *App) ChatURL() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.server.URL
}

// OpenChat opens the chat page in the user's browser through a fresh
// one-time link (OpenLink), so the person at the desktop always gets in
// with a session. When the web server cannot listen (another program
// holds the port) or has stopped, it says why instead of opening a page
// NPU Chat does not serve.
func (a *App) OpenChat() error {
	if s := a.Server(); s.Err != nil {
		return fmt.Errorf("the chat page is not served: %w", s.Err)
	}
	url := a.OpenLink(web.LinkTTL)
	if a.opts.OpenURL != nil {
		return a.opts.OpenURL(url)
	}
	return openURL(a.opts.GOOS, url)
}

// OpenSettings opens the chat page's Settings view (where the MCP
// servers are edited) in the user's browser, through a fresh one-time
// link as OpenChat does.
func (a *App) OpenSettings() error {
	if s := a.Server(); s.Err != nil {
		return fmt.Errorf("the chat page is not served: %w", s.Err)
	}
	url := a.OpenLink(web.LinkTTL) + "&next=" + neturl.QueryEscape(web.SettingsPath)
	if a.opts.OpenURL != nil {
		return a.opts.OpenURL(url)
	}
	return openURL(a.opts.GOOS, url)
}

// OpenLink returns a fresh one-time link to the chat page: opened in a
// browser, it starts the session the page's history and settings need
// (web.Sessions). ttl bounds how long it works (0: until used).
func (a *App) OpenLink(ttl time.Duration) string {
	return strings.TrimSuffix(a.ChatURL(), "/") + a.srv.OpenLink(ttl)
}

// OpenChatWhenServing opens the chat page once the web server listens:
// a second launch may ask for the chat while this instance is still
// starting, and a page opened before the server listens does not load.
// When the server cannot listen (the port is taken) or has stopped, it
// returns why instead of opening a page that cannot load; when ctx ends
// first, ctx's error.
func (a *App) OpenChatWhenServing(ctx context.Context) error {
	watch, stop := a.WatchServer()
	defer stop()
	for {
		if s := a.Server(); s.Listening || s.Err != nil {
			return a.OpenChat()
		}
		select {
		case <-watch:
		case <-ctx.Done():
			return fmt.Errorf("the chat page is not served yet: %w", ctx.Err())
		}
	}
}

// openURL opens url with the desktop's handler.
func openURL(goos, url string) error {
	var cmd *exec.Cmd
	switch goos {
	case "windows":
		cmd = exec.Command("rundll32", "url.dll,FileProtocolHandler", url)
	case "darwin":
		cmd = exec.Command("open", url)
	default:
		cmd = exec.Command("xdg-open", url)
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("open %s in the browser: %w", url, err)
	}
	go cmd.Wait()
	return nil
}

// chatURL is the page's URL for a listening address. A server on every
// interface (0.0.0.0, [::], ":port") is reached through loopback, since
// browsers will not open the unspecified address.
func chatURL(addr string) string {
	if host, port, err := net.SplitHostPort(addr); err == nil {
		ip := net.ParseIP(host)
		switch {
		case host == "" || (ip != nil && ip.IsUnspecified() && ip.To4() != nil):
			addr = net.JoinHostPort("127.0.0.1", port)
		case ip != nil && ip.IsUnspecified():
			addr = net.JoinHostPort("::1", port)
		}
	}
	return "http://" + addr + "/"
}

// closeFiles closes the log files.
func (a *App) closeFiles() {
	a.settings.Close()
	if a.installs != nil {
		a.installs.Close()
	}
	if a.history != nil {
		a.history.Close()
	}
	a.flmLog.Close()
	a.oflmLog.Close()
	if a.closeLog != nil {
		a.closeLog()
	}
}
