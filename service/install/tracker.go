package install

import (
	"context"
	"errors"
	"time"

	"github.com/npuchat/npuchat/models"
	"github.com/npuchat/npuchat/models/hub"
)

// Tracker follows one install from the installer's events to its Status:
// the Runner keeps one per run, and `npuchat install` one for the
// install it runs in the terminal, so both say the same. Not safe for
// concurrent use (the Runner holds its lock around it).
type Tracker struct {
	st Status
	// have is what each file of the install's plan has on disk so far.
	have map[string]int64
}

// NewTracker starts following an install of model, begun at now.
func NewTracker(model string, now time.Time) *Tracker {
	return &Tracker{st: Status{Model: model, State: StateRunning, Phase: "start", Message: "starting", Started: now}}
}

// Status is the install's status now.
func (t *Tracker) Status() Status { return t.st }

// Event takes in one of the installer's events. It reports whether the
// status changed in a way every reader should see (a new phase, a file
// done), as opposed to bytes moving on, which readers may skip.
func (t *Tracker) Event(e models.Event) (important bool) {
	t.st.Phase = e.Phase
	if e.Message != "" {
		t.st.Message = e.Message
	}
	important = e.File == nil
	if e.Kept > 0 {
		t.st.Earlier = e.Kept
	}
	if pl := e.Plan; pl != nil {
		t.have = map[string]int64{}
		for _, f := range pl.Files {
			t.have[f.Path] = f.Have
		}
		t.st.FilesTotal, t.st.Files = len(pl.Files), 0
		t.st.OverallTotal, t.st.OverallBytes = pl.Bytes()
	}
	if p := e.File; p != nil {
		t.st.File, t.st.Bytes, t.st.Total, t.st.Rate, t.st.ETASeconds = p.File, p.Bytes, p.Total, p.Rate, p.ETA.Seconds()
		if p.Done {
			t.st.Files++
			important = true
		}
		t.overall(p)
	}
	return important
}

// overall updates the whole install's bytes and time left after a
// report on one of its files.
func (t *Tracker) overall(p *hub.Progress) {
	if _, ok := t.have[p.File]; !ok || t.st.OverallTotal == 0 {
		return
	}
	t.have[p.File] = p.Bytes
	var all int64
	for _, n := range t.have {
		all += n
	}
	t.st.OverallBytes = min(all, t.st.OverallTotal)
	// At the file's rate (the hub's, over this run's bytes of the file);
	// between files the last estimate stands.
	if left := t.st.OverallTotal - t.st.OverallBytes; left == 0 {
		t.st.OverallETASeconds = 0
	} else if !p.Done && p.Rate > 0 {
		t.st.OverallETASeconds = float64(left) / p.Rate
	}
}

// End records how the install ended (the installer's result and error)
// at now, and returns the final status: done, cancelled (err is the
// context's) or failed, with its Failure in words.
func (t *Tracker) End(res *models.Result, err error, now time.Time) Status {
	t.st.Finished = now
	t.st.Rate, t.st.ETASeconds, t.st.OverallETASeconds = 0, 0, 0
	switch {
	case err == nil:
		t.st.State, t.st.Phase, t.st.Message = StateDone, "done", "installed"
		t.st.OverallBytes = t.st.OverallTotal
		if res != nil {
			t.st.Notes = res.Notes
		}
	case errors.Is(err, context.Canceled):
		t.st.State, t.st.Message = StateCancelled, "cancelled; install again to resume where it stopped"
	default:
		f := Explain(t.st.Model, err)
		t.st.State, t.st.Failure, t.st.Message = StateFailed, &f, f.Sentence
	}
	return t.st
}
