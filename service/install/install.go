// Package install runs model installs for the chat page and the tray:
// one at a time, in the background, with the same models.Installer that
// `npuchat install` runs, reporting progress (file, bytes, rate, ETA) to
// subscribers and able to be cancelled. A cancelled or failed install
// resumes where it stopped when started again, because the installer
// keeps its partial downloads.
package install

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/npuchat/npuchat/eventbus"
	"github.com/npuchat/npuchat/models"
	"github.com/npuchat/npuchat/models/hub"
	"github.com/npuchat/npuchat/service"
)

// State is where an install is.
type State string

// The install states.
const (
	StateIdle      State = "idle"      // no install has run
	StateRunning   State = "running"   // downloading or installing
	StateDone      State = "done"      // finished; the model is installed
	StateFailed    State = "failed"    // stopped with an error (Error says why)
	StateCancelled State = "cancelled" // cancelled; starting again resumes
)

// Errors of Start and Cancel; test with errors.Is.
var (
	// ErrBusy: another install is running (one runs at a time).
	ErrBusy = errors.New("another install is running")
	// ErrNotRunning: there is no install of that model to cancel.
	ErrNotRunning = errors.New("no install of that model is running")
)

// Status is a snapshot of the current (or last) install.
type Status struct {
	Model   string `json:"model,omitempty"`
	State   State  `json:"state"`
	Phase   string `json:"phase,omitempty"`   // the installer's phase: list, download, install, register, ...
	Message string `json:"message,omitempty"` // the installer's last words for people
	// File is the file downloading now, with its bytes so far and size.
	File  string `json:"file,omitempty"`
	Bytes int64  `json:"bytes"`
	Total int64  `json:"total"`
	// Rate is in bytes per second; ETA in seconds, for the file.
	Rate       float64 `json:"rate"`
	ETASeconds float64 `json:"eta_s"`
	Files      int     `json:"files_done"` // files downloaded and verified
	// The whole install, once the installer has said what it downloads
	// (0 before, and when nothing needs downloading): the number of
	// files, the bytes of all of them so far and in all (a resumed file
	// counts what it had), and the time left for all of them at the
	// current rate.
	FilesTotal        int      `json:"files_total"`
	OverallBytes      int64    `json:"overall_bytes"`
	OverallTotal      int64    `json:"overall_total"`
	OverallETASeconds float64  `json:"overall_eta_s"`
	Error             string   `json:"error,omitempty"`
	Notes             []string `json:"notes,omitempty"`
	// Serve says the model is switched on when the install finishes
	// (the page's Install: the server starts it, not the browser).
	Serve    bool      `json:"serve,omitempty"`
	Started  time.Time `json:"started,omitzero"`
	Finished time.Time `json:"finished,omitzero"`
}

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
	// Publish, when set, receives every status change as the service's
	// EventInstall event (the manager's Publish, so that /api/events and
	// the tray see installs with the model's other events).
	Publish func(service.Event) error
	// Now is the clock (time.Now by default).
	Now func() time.Time
}

// Runner runs one install at a time. Safe for concurrent use.
type Runner struct {
	opts Options

	mu     sync.Mutex // guards the fields below
	st     Status
	cancel context.CancelFunc
	done   chan struct{}
	bus    *eventbus.Bus // the statuses, for Subscribe
	last   time.Time     // last progress sent (throttled)
	// have is what each file of the install's plan has on disk so far.
	have map[string]int64
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
		ev := service.Event{Type: service.EventInstall, Message: r.st.Message, Install: r.st.progress(), Time: now}
		// In order, under r.mu (the manager never calls the runner, so
		// r.mu before the manager's lock cannot deadlock). Publish only
		// fails once the service is closed: nothing to tell then.
		r.opts.Publish(ev)
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
	r.st = Status{Model: model, State: StateRunning, Phase: "start", Message: "starting", Started: r.opts.Now()}
	for _, o := range so {
		r.st.Serve = r.st.Serve || o.Serve
	}
	r.have = nil
	r.publishLocked(true)
	in.Progress = r.progress
	go r.run(ctx, in, model, r.done)
	return nil
}

func (r *Runner) run(ctx context.Context, in *models.Installer, model string, done chan struct{}) {
	defer close(done)
	res, err := in.Install(ctx, model, r.opts.Install)
	r.mu.Lock()
	r.st.Finished = r.opts.Now()
	r.st.Rate, r.st.ETASeconds, r.st.OverallETASeconds = 0, 0, 0
	switch {
	case err == nil:
		r.st.State, r.st.Phase, r.st.Message = StateDone, "done", "installed"
		r.st.OverallBytes = r.st.OverallTotal
		r.st.Notes = res.Notes
	case ctx.Err() != nil:
		r.st.State, r.st.Message = StateCancelled, "cancelled; install again to resume where it stopped"
	default:
		r.st.State, r.st.Error = StateFailed, err.Error()
		r.st.Message = "failed; install again to retry (downloaded files are kept)"
	}
	r.cancel = nil
	r.publishLocked(true)
	st := r.st
	r.mu.Unlock()
	if err == nil && r.opts.OnDone != nil {
		r.opts.OnDone(st)
	}
}

// progress receives the installer's events.
func (r *Runner) progress(e models.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.st.Phase = e.Phase
	if e.Message != "" {
		r.st.Message = e.Message
	}
	force := e.File == nil
	if pl := e.Plan; pl != nil {
		r.have = map[string]int64{}
		for _, f := range pl.Files {
			r.have[f.Path] = f.Have
		}
		r.st.FilesTotal, r.st.Files = len(pl.Files), 0
		r.st.OverallTotal, r.st.OverallBytes = pl.Bytes()
	}
	if p := e.File; p != nil {
		r.st.File, r.st.Bytes, r.st.Total, r.st.Rate, r.st.ETASeconds = p.File, p.Bytes, p.Total, p.Rate, p.ETA.Seconds()
		if p.Done {
			r.st.Files++
			force = true
		}
		r.overallLocked(p)
	}
	r.publishLocked(force)
}

// overallLocked updates the whole install's bytes and time left after
// a report on one of its files.
func (r *Runner) overallLocked(p *hub.Progress) {
	if _, ok := r.have[p.File]; !ok || r.st.OverallTotal == 0 {
		return
	}
	r.have[p.File] = p.Bytes
	var all int64
	for _, n := range r.have {
		all += n
	}
	r.st.OverallBytes = min(all, r.st.OverallTotal)
	// At the file's rate (the hub's, over this run's bytes of the file);
	// between files the last estimate stands.
	if left := r.st.OverallTotal - r.st.OverallBytes; left == 0 {
		r.st.OverallETASeconds = 0
	} else if !p.Done && p.Rate > 0 {
		r.st.OverallETASeconds = float64(left) / p.Rate
	}
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

// progress is the status as the service's install event carries it.
func (st Status) progress() *service.InstallProgress {
	p := &service.InstallProgress{Model: st.Model, Phase: st.Phase, Done: st.Bytes, Total: st.Total,
		BytesPerSecond: st.Rate, ETASeconds: st.ETASeconds, Error: st.Error,
		File: st.File, FileDone: st.Bytes, FileTotal: st.Total, Files: st.Files, FilesTotal: st.FilesTotal}
	if st.OverallTotal > 0 {
		p.Done, p.Total, p.ETASeconds = st.OverallBytes, st.OverallTotal, st.OverallETASeconds
	}
	switch st.State {
	case StateDone:
		p.Phase = "done"
	case StateFailed:
		p.Phase = "failed"
	case StateCancelled:
		p.Phase = "cancelled"
	default:
		if p.Phase == "download" {
			p.Phase = "downloading"
		}
	}
	return p
}
