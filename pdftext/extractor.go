package pdftext

import (
	"context"
	"errors"
	"time"
)

// ErrBusy says every extraction slot stayed taken for the whole wait.
var ErrBusy = errors.New("other PDFs are being read right now: try again in a few seconds")

// Extractor runs extractions for a server, at most a fixed number at a
// time: each can hold a core and its caps' worth of memory for up to its
// time limit, so parallel uploads queue instead of adding up.
type Extractor struct {
	lim   Limits
	wait  time.Duration
	slots chan struct{}
	run   func(ctx context.Context, data []byte, lim Limits) (Result, error) // Extract; a gated fake in tests
}

// NewExtractor returns an Extractor that runs at most slots extractions
// at once (at least one) within lim; a call that finds them all taken
// waits up to wait for one, then is ErrBusy.
func NewExtractor(slots int, wait time.Duration, lim Limits) *Extractor {
	return &Extractor{lim: lim, wait: wait, slots: make(chan struct{}, max(slots, 1)), run: Extract}
}

// Extract is Extract within the Extractor's limits, once a slot is free.
func (e *Extractor) Extract(ctx context.Context, data []byte) (Result, error) {
	select {
	case e.slots <- struct{}{}:
	default:
		t := time.NewTimer(e.wait)
		defer t.Stop()
		select {
		case e.slots <- struct{}{}:
		case <-t.C:
			return Result{}, ErrBusy
		case <-ctx.Done():
			return Result{}, ctx.Err()
		}
	}
	defer func() { <-e.slots }()
	return e.run(ctx, data, e.lim)
}
