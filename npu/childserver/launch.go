package childserver

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/npuchat/npuchat/service/backend"
	"github.com/npuchat/npuchat/service/backend/oaicompat"
)

// Launcher says how Launch starts a route's server child and tells when
// it serves.
type Launcher struct {
	// Spec is the child to start.
	Spec Spec
	// Wait bounds the wait for it; Launch reports its progress.
	Wait Wait
	// Loading names the wait in progress reports: "loading minicpm5:2b on
	// the NPU" (Launch adds the seconds).
	Loading string
	// Report, if set, hears the progress of the start.
	Report func(backend.Progress)
	// Probe makes the readiness probe of a started child.
	Probe func(*Server) Probe
	// Client configures the client that talks to the child; Launch fills
	// in BaseURL.
	Client oaicompat.Options
	// Grace is how long a child that failed to start is given to stop
	// (Server.Stop); one whose start was cancelled is killed at once.
	Grace time.Duration
	// Attempt is the restart attempt this start is (0: a first start).
	Attempt int
	// Unknown, if set, rewrites the error of a child that exited saying
	// it does not know the model ("model not found" in its output).
	Unknown func(*ProcessError) error
	// NotServed, if set, rewrites the error of a child that answers but
	// whose model list lacks the model.
	NotServed func(error) error
}

// Launch starts l's child, records it in slot as starting, waits until
// its probe says it is ready and loads its client, which it returns with
// the child (ReadyAt set). When the child could not bind the port picked
// for it (another program took it meanwhile), it tries once more on
// another. A child that fails to start is stopped and forgotten; a
// cancelled ctx (an Unload) stops it at once and returns ctx's error.
func Launch(ctx context.Context, slot *Slot, l Launcher) (*Server, *oaicompat.Client, error) {
	c, client, err := launchOnce(ctx, slot, l)
	if PortTaken(err) && ctx.Err() == nil {
		l.Spec.Log.Note("the port was taken; trying another")
		return launchOnce(ctx, slot, l)
	}
	return c, client, err
}

func launchOnce(ctx context.Context, slot *Slot, l Launcher) (*Server, *oaicompat.Client, error) {
	report := func(p backend.Progress) {
		if l.Report != nil {
			l.Report(p)
		}
	}
	report(backend.Progress{Stage: "starting " + l.Spec.Name})
	c, err := Start(l.Spec)
	if err != nil {
		return nil, nil, err
	}
	slot.Starting(c, l.Attempt)
	fail := func(err error) (*Server, *oaicompat.Client, error) {
		grace := l.Grace
		if ctx.Err() != nil {
			grace = 0 // a loading child keeps nothing a graceful stop would save
		}
		c.Stop(context.Background(), grace)
		slot.Forget(c)
		return nil, nil, err
	}
	wait := l.Wait
	wait.Progress = func(elapsed time.Duration) {
		report(backend.Progress{
			Stage: fmt.Sprintf("%s (%ds)", l.Loading, int(elapsed.Seconds())),
			Done:  int64(elapsed / time.Second), Total: int64(wait.Timeout / time.Second),
		})
	}
	if err := c.WaitReady(ctx, wait, l.Probe(c)); err != nil {
		var pe *ProcessError
		if l.Unknown != nil && errors.As(err, &pe) && LogSays(pe.Log, "model not found") {
			err = l.Unknown(pe)
		}
		return fail(err)
	}
	opts := l.Client
	opts.BaseURL = c.URL("")
	client, err := oaicompat.New(opts)
	if err == nil {
		err = client.Load(ctx, nil)
	}
	if err != nil {
		if ctx.Err() != nil {
			return fail(ctx.Err())
		}
		if l.NotServed != nil {
			err = l.NotServed(err)
		}
		return fail(err)
	}
	c.ReadyAt = time.Now()
	report(backend.Progress{Stage: l.Spec.Name + " ready", Frac: 1})
	return c, client, nil
}
