package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/npuchat/npuchat/app"
	"github.com/npuchat/npuchat/gui"
	"github.com/npuchat/npuchat/gui/fynelocale"
	"github.com/npuchat/npuchat/instance"
)

// runDefault implements `npuchat` with no command: the tray and the
// server on a desktop, `serve` without a display. Both take serve's
// flags; --hidden (launch at login) starts the tray without a window.
func runDefault(ctx context.Context, env *Env, args []string) int {
	fs := flag.NewFlagSet("npuchat", flag.ContinueOnError)
	fs.SetOutput(env.Stderr)
	flags := serverFlags(fs)
	hidden := fs.Bool("hidden", false, "start in the tray without opening a window (as when launched at login)")
	lazy := fs.Bool("lazy", false, "without a display: load the model on the first request instead of at start")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(env.Stderr, "npuchat: unknown command %q; run `npuchat help`\n", fs.Arg(0))
		return 2
	}
	if !hasDisplay(env.GOOS, env.Getenv) {
		fynelocale.Undo() // no GUI: the environment as it was (see the package)
		return serve(ctx, env, *flags, *lazy, "")
	}
	var given []string // serve's flags on the command line, for a second launch to name
	fs.Visit(func(f *flag.Flag) {
		if f.Name != "hidden" && f.Name != "lazy" {
			given = append(given, "--"+f.Name)
		}
	})
	return runTray(ctx, env, *flags, *hidden, given)
}

// hasDisplay reports whether a desktop session can show a tray icon:
// always on Windows, on Linux and the BSDs when DISPLAY (X11) or
// WAYLAND_DISPLAY is set.
func hasDisplay(goos string, getenv func(string) string) bool {
	switch goos {
	case "windows", "darwin":
		return true
	default:
		return getenv("DISPLAY") != "" || getenv("WAYLAND_DISPLAY") != ""
	}
}

// listenRetry is how often the tray tries the port again when another
// program holds it.
const listenRetry = 5 * time.Second

// secondLaunchWait is how long a second launch's request for the chat
// waits for this instance to start and serve its page (within the 5 s
// the second launch waits for an answer, instance.Notify).
const secondLaunchWait = 4 * time.Second

// runTray runs the tray app: this user's one instance (a second launch
// asks this one to open the chat, except at login, and exits 0: see
// secondLaunch), the same server as `serve` with the model off unless
// "serve at start" is on, and the tray on top. Quit (the tray returns) and SIGTERM (ctx ends) stop serving,
// stop any FastFlowLM child, flush the history and return 0 within 5 s.
func runTray(ctx context.Context, env *Env, flags app.Flags, hidden bool, given []string) int {
	dir, err := instance.DefaultDir(env.GOOS, env.Getenv)
	if err != nil {
		return trayStartFailed(ctx, env, flags, err, 1)
	}
	inst, err := instance.Acquire(instance.Options{Dir: dir})
	if errors.Is(err, instance.ErrRunning) {
		return secondLaunch(ctx, env, dir, hidden, given)
	}
	if err != nil {
		return trayStartFailed(ctx, env, flags, err, 1)
	}
	defer inst.Close()

	// A second launch is answered from now on: one that comes while
	// this instance starts gets the chat once its page is served.
	ctx, quit := context.WithCancel(ctx)
	defer quit()
	settled := make(chan struct{}) // closed when a or startErr is set
	var a *app.App
	var startErr error
	go inst.Serve(ctx, func(ctx context.Context, req string) error {
		if req != instance.OpenChat {
			return fmt.Errorf("unknown request %q", req)
		}
		ctx, cancel := context.WithTimeout(ctx, secondLaunchWait)
		defer cancel()
		select {
		case <-settled:
		case <-ctx.Done():
			return errors.New("it is still starting; try again in a moment")
		}
		if startErr != nil {
			return fmt.Errorf("it could not start: %w", startErr)
		}
		a.Logger().Info("a second launch asked for the chat")
		return a.OpenChatWhenServing(ctx)
	})
	a, startErr = app.New(ctx, appOptions(env, flags, ""))
	close(settled)
	if startErr != nil {
		return trayStartFailed(ctx, env, flags, startErr, 2)
	}
	model := app.ModelOff
	if a.ServeAtStart() {
		model = app.ModelOn
	}
	ran := make(chan error, 1)
	go func() {
		ran <- a.Run(ctx, app.RunOptions{Model: model, RetryListen: listenRetry, Ready: func(url string) {
			fmt.Fprintf(env.Stdout, "NPU Chat is serving on %s (model %s, engine %s; the model is %s)\n",
				url[:len(url)-1], a.Model(), a.Engine(), a.Status().State)
		}})
	}()
	trayErr := startTray(ctx, a, trayOptions{Hidden: hidden})
	quit()
	runErr := <-ran
	if err := errors.Join(trayErr, runErr); err != nil {
		fmt.Fprintln(env.Stderr, "npuchat:", err)
		return 1
	}
	return 0
}

// secondLaunch is a launch while NPU Chat already runs for this user. At
// login (--hidden) it opens nothing: the running one is in the tray.
// Otherwise it asks the running one to open the chat; the flags given
// (the names in given) cannot change the running one, so they are named
// as not applied rather than silently dropped.
func secondLaunch(ctx context.Context, env *Env, dir string, hidden bool, given []string) int {
	if hidden {
		fmt.Fprintln(env.Stdout, "NPU Chat is already running.")
		return 0
	}
	if err := instance.Notify(ctx, dir, nil, instance.OpenChat); err != nil {
		fmt.Fprintln(env.Stderr, "npuchat: NPU Chat is already running, but:", err)
		return 1
	}
	fmt.Fprintln(env.Stdout, "NPU Chat is already running; the chat is opening in your browser.")
	if len(given) > 0 {
		fmt.Fprintf(env.Stderr, "npuchat: %s not applied: the running NPU Chat keeps its own; quit it from the tray icon, then start NPU Chat again with them\n", strings.Join(given, ", "))
	}
	return 0
}

// trayStartFailed reports an error the tray cannot start without (a
// malformed settings file, a data folder that cannot be written, the
// instance lock) on stderr, in the log file, and on the desktop until
// the user quits (gui.ShowStartupError), since the Windows GUI build has
// no console. It returns code, the exit status.
func trayStartFailed(ctx context.Context, env *Env, flags app.Flags, err error, code int) int {
	fmt.Fprintln(env.Stderr, "npuchat:", err)
	logFile, logErr := app.LogStartupError(appOptions(env, flags, ""), err)
	if logErr != nil {
		fmt.Fprintln(env.Stderr, "npuchat: the error could not be written to the log:", logErr)
	}
	if gerr := gui.ShowStartupError(ctx, gui.StartupError{Err: err, LogFile: logFile, LogErr: logErr}); gerr != nil {
		fmt.Fprintln(env.Stderr, "npuchat:", gerr)
	}
	return code
}

// trayOptions are what the tray needs besides the app.
type trayOptions struct {
	// Hidden: started at login; open no window.
	Hidden bool
}

// startTray runs the tray on this goroutine (the main one: fyne draws
// from the main thread) until the user quits or ctx ends. The setup
// window opens at start when the model is not installed, unless
// launched at login.
func startTray(ctx context.Context, a *app.App, opts trayOptions) error {
	return gui.Run(ctx, a, gui.Options{ShowSetup: !opts.Hidden && !a.ModelInstalled(), Logger: a.Logger()})
}
