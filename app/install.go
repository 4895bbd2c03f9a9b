package app

import (
	"context"
	"errors"
	"time"

	"github.com/npuchat/npuchat/service/install"
)

// InstallModel installs or updates the app's model through the app's
// install runner, the one the chat page's Install uses: one install at
// a time, each status of it to progress (from the runner's goroutine)
// and, as install events, to the page. An install of the same model
// already running (started from the page) is followed rather than
// refused; ctx ending cancels it (its downloads are kept, so the next
// install resumes) and returns ctx's error.
func (a *App) InstallModel(ctx context.Context, progress func(install.Status)) error {
	runner, model := a.Installs(), a.Model()
	updates, stop := runner.Subscribe()
	defer stop()
	if err := runner.Start(model); err != nil {
		if st := runner.Status(); !errors.Is(err, install.ErrBusy) || st.State != install.StateRunning || st.Model != model {
			return err
		}
	}
	for {
		select {
		case <-ctx.Done():
			cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			runner.Cancel(cctx, model)
			return ctx.Err()
		case st := <-updates:
			if st.Model != model {
				continue
			}
			progress(st)
			switch st.State {
			case install.StateDone:
				return nil
			case install.StateFailed:
				return st.Failure
			case install.StateCancelled:
				return context.Canceled
			}
		}
	}
}
