package app

import (
	"errors"
	"strings"

	"github.com/npuchat/npuchat/service/install"
)

// StartInstall starts installing or updating the app's model on the
// app's install runner, the one the chat page's Install uses (one
// install at a time for both), and returns at once. The install's
// statuses go out as the service's install events, which the tray and
// the page follow; Shutdown cancels it (its downloads are kept, so the
// next install resumes). An install of the same model already running
// (the page's) is left to run: nil, its events are the ones to follow.
func (a *App) StartInstall() error {
	runner, model := a.Installs(), a.Model()
	err := runner.Start(model)
	if errors.Is(err, install.ErrBusy) {
		if st := runner.Status(); st.State == install.StateRunning && strings.EqualFold(st.Model, model) {
			return nil
		}
	}
	return err
}
