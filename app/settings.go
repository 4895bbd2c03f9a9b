package app

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/npuchat/npuchat/config"
	"github.com/npuchat/npuchat/service"
)

// Engine is the engine setting in effect: auto, npu, cpu or remote.
func (a *App) Engine() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.engine
}

// SetEngine changes the engine (the tray's Engine menu, the settings
// window) and saves it. A model that is on or loading is loaded again
// on the new engine.
func (a *App) SetEngine(ctx context.Context, kind string) error {
	if !ValidEngine(kind) {
		return fmt.Errorf("engine %q is not one of auto, npu, cpu, remote", kind)
	}
	if kind == "remote" && a.cfg.RemoteURL == "" {
		return errors.New("the remote engine needs a server's URL: set remote_url in the settings or NPUCHAT_REMOTE_URL")
	}
	if err := a.saveSetting(config.Change{Key: "engine", Value: kind}); err != nil {
		return err
	}
	return a.switchEngine(ctx, kind)
}

// switchEngine puts an engine into effect without saving it (the page's
// settings store has saved it already, with the file's other keys).
func (a *App) switchEngine(ctx context.Context, kind string) error {
	if !ValidEngine(kind) {
		return fmt.Errorf("engine %q is not one of auto, npu, cpu, remote", kind)
	}
	a.mu.Lock()
	changed := a.engine != kind
	a.engine = kind
	a.mu.Unlock()
	a.log.Info("engine changed", "engine", kind)
	if changed && kind == "remote" {
		// What the remote server serves, as at a start on it.
		a.addRemoteModels(ctx)
	}
	st := a.mgr.Status()
	if !changed || !st.Enabled || (st.State != service.StateOn && st.State != service.StateLoading) {
		return nil
	}
	if err := a.mgr.Stop(ctx); err != nil {
		return fmt.Errorf("switch to the %s engine: stop the model: %w", kind, err)
	}
	return a.mgr.Start(st.Model)
}

// ServeAtStart reports the "serve at start" setting: whether the tray
// switches the model on when it starts (off by default).
func (a *App) ServeAtStart() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.cfg.ServeAtStart
}

// SetServeAtStart changes and saves the "serve at start" setting.
func (a *App) SetServeAtStart(on bool) error {
	if err := a.saveSetting(config.Change{Key: "serve_at_start", Value: on}); err != nil {
		return err
	}
	a.mu.Lock()
	a.cfg.ServeAtStart = on
	a.mu.Unlock()
	return nil
}

// LaunchAtLogin reports whether NPU Chat starts when the user logs in,
// read from the real entry (the XDG autostart file, the Run registry
// value), not from a remembered setting.
func (a *App) LaunchAtLogin() (bool, error) { return a.login.Enabled() }

// SetLaunchAtLogin adds or removes the launch-at-login entry; the entry
// starts this executable with --hidden.
func (a *App) SetLaunchAtLogin(on bool) error {
	if !on {
		return a.login.Disable()
	}
	exe := a.opts.Executable
	if exe == "" {
		var err error
		if exe, err = os.Executable(); err != nil {
			return fmt.Errorf("launch at login: find this program: %w", err)
		}
	}
	return a.login.Enable(exe)
}

// saveSetting changes settings in the settings file and nothing else
// (config.UpdateSettings): the file's other keys, known to this version
// or not, keep their values, and this run's flags and environment
// variables are never written into it. It goes through the page's
// settings store, so that the page shows the change and a change made
// on the page at the same moment is not lost.
func (a *App) saveSetting(changes ...config.Change) error {
	return a.settings.Save(changes...)
}
