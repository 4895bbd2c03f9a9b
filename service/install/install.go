// Package install runs model installs for the chat page and the tray:
// one at a time, in the background, with the same models.Installer that
// `npuchat install` runs, reporting progress (file, bytes, rate, ETA) to
// subscribers and able to be cancelled. A cancelled or failed install
// resumes where it stopped when started again, because the installer
// keeps its partial downloads.
//
// Status is the one shape of an install: the answer of GET
// /api/models/{name}/install, the payload of the service's install
// events (the page and the tray), and what `npuchat install` follows
// (through a Tracker, as the Runner does). Status.Words is the one
// wording of it; its JSON carries the words, so the page words nothing
// itself. Explain turns an install's error into a Failure: a short
// sentence that says what to do, and the whole error as the detail.
package install

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/npuchat/npuchat/eventbus"
	"github.com/npuchat/npuchat/models"
)

// Errors of Start and Cancel; test with errors.Is.
var (
	// ErrBusy: another install is running (one runs at a time).
	ErrBusy = errors.New("another install is running")
	// ErrNotRunning: there is no install of that model to cancel.
	ErrNotRunning = errors.New("no install of that model is running")
)

// Options configure a Runner.
type Options struct {
	// NewInstaller makes the installer for one run (the real one reads
	// the configuration; tests point it at a fake hub).
	NewInstaller func() (*models.Installer, error)
	// Install are the install choices (source, no-system).
	Install models.InstallOptions
	// OnDone, when set, is called after an install finishes well, with
	// its last status (the app switches the model on when st.Serve).
	OnDone func(st Status)
	// Publish, when set, receives every status change, in order, under
	// the runner's lock (the app sends it on as the service's install
	// event, so that /api/events and the tray see installs with the
	// model's other events). It must not call the Runner.
	Publish func(Status)
	// Logger, when set, gets a line for each install's start and end
	// (the page's Log view shows a failed install with its cause).
	Logger *slog.Logger
	// Now is the clock (time.Now by default).
	Now func() time.Time
}

// Runner runs one install at a time. Safe for concurrent use.
type Runner struct {
	opts Options

	mu      sync.Mutex // guards the fields below
	st      Status
	tracker *Tracker // the running install's (nil when none runs)
	cancel  context.CancelFunc
	done    chan struct{}
	bus     *eventbus.Bus // the statuses, for Subscribe
	last    time.Time     // last progress sent (throttled)
}

// New returns an idle Runner.
func New(opts Options) *Runner {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Runner{opts: opts, st: Status{State: StateIdle}, bus: eventbus.New()}
}

// Status returns the current or last install's status.
func (r *Runner) Status() Status {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.st
}

// Subscribe returns a channel of status changes (the latest ones; slow
// readers miss intermediate progress, never the final state) and a
// function that ends the subscription.
func (r *Runner) Subscribe() (<-chan Status, func()) {
	sub := eventbus.Subscribe(r.bus, eventbus.Options[Status]{
		Buffer:  16,
		Replace: func(old, next Status) bool { return old.State == StateRunning && old.Model == next.Model },
		Keep:    func(st Status) bool { return st.State != StateRunning },
	})
	return sub.Events(), sub.Close
}

// publishLocked sends the status to subscribers; progress is throttled
// to ten a second, state changes always go out.
func (r *Runner) publishLocked(force bool) {
	now := r.opts.Now()
	if !force && now.Sub(r.last) < 100*time.Millisecond {
		return
	}
	r.last = now
	if r.opts.Publish != nil {
		r.opts.Publish(r.st)
	}
	eventbus.Publish(r.bus, r.st)
}

// StartOptions are the choices of one install.
type StartOptions struct {
	// Serve switches the model on when the install finishes well
	// (Options.OnDone does it).
	Serve bool
}

// Start begins installing a catalog model in the background. It fails
// with ErrBusy while another install runs.
func (r *Runner) Start(model string, so ...StartOptions) error {
	model = strings.TrimSpace(model)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.st.State == StateRunning {
		return fmt.Errorf("install %s: %w (%s); wait for it or cancel it", model, ErrBusy, r.st.Model)
	}
	in, err := r.opts.NewInstaller()
	if err != nil {
		return fmt.Errorf("install %s: %w", model, err)
	}
	if _, err := in.Catalog.Lookup(model); err != nil {
		return fmt.Errorf("install: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel, r.done = cancel, make(chan struct{})
	r.tracker = NewTracker(model, r.opts.Now())
	for _, o := range so {
		r.tracker.st.Serve = r.tracker.st.Serve || o.Serve
	}
	r.st = r.tracker.Status()
	r.publishLocked(true)
	r.log(slog.LevelInfo, "install started", "model", model)
	in.Progress = r.progress
	go r.run(ctx, in, model, r.done)
	return nil
}

func (r *Runner) run(ctx context.Context, in *models.Installer, model string, done chan struct{}) {
	defer close(done)
	res, err := in.Install(ctx, model, r.opts.Install)
	if err != nil && ctx.Err() != nil {
		err = fmt.Errorf("%w (%v)", context.Canceled, err)
	}
	r.mu.Lock()
	r.st = r.tracker.End(res, err, r.opts.Now())
	r.tracker, r.cancel = nil, nil
	st := r.st
	// Logged before it is published, so that whoever sees the end can
	// find its line in the log.
	switch st.State {
	case StateDone:
		r.log(slog.LevelInfo, "install finished", "model", model)
	case StateCancelled:
		r.log(slog.LevelInfo, "install cancelled", "model", model, "kept_bytes", st.Kept())
	case StateFailed:
		// The Log view's line: the sentence, and the whole error.
		r.log(slog.LevelError, "install failed: "+st.Failure.Sentence, "model", model, "err", st.Failure.Detail)
	}
	r.publishLocked(true)
	r.mu.Unlock()
	if err == nil && r.opts.OnDone != nil {
		r.opts.OnDone(st)
	}
}

func (r *Runner) log(level slog.Level, msg string, args ...any) {
	if r.opts.Logger != nil {
		r.opts.Logger.Log(context.Background(), level, msg, args...)
	}
}

// progress receives the installer's events.
func (r *Runner) progress(e models.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.tracker == nil {
		return
	}
	important := r.tracker.Event(e)
	r.st = r.tracker.Status()
	r.publishLocked(important)
}

// Cancel stops the running install of model; it returns when the
// install has stopped (its partial files stay, for a resume).
func (r *Runner) Cancel(ctx context.Context, model string) error {
	r.mu.Lock()
	if r.st.State != StateRunning || !strings.EqualFold(r.st.Model, strings.TrimSpace(model)) {
		r.mu.Unlock()
		return fmt.Errorf("cancel install of %s: %w", model, ErrNotRunning)
	}
	cancel, done := r.cancel, r.done
	r.mu.Unlock()
	cancel()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Finished returns a channel that is closed when the latest install
// started has ended and its OnDone has returned; nil before the first
// Start. It is the observable end of an install's work, for tests that
// must not guess when OnDone is over.
func (r *Runner) Finished() <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.done
}

// Close cancels a running install and waits for it to stop.
func (r *Runner) Close() {
	r.mu.Lock()
	cancel, done := r.cancel, r.done
	r.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
}
