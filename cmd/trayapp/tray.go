package main

import (
	"context"
	"fmt"

	"github.com/npuchat/npuchat/app"
	"github.com/npuchat/npuchat/gui"
	"github.com/npuchat/npuchat/models"
	"github.com/npuchat/npuchat/models/hub"
	"github.com/npuchat/npuchat/service"
)

// trayApp is the app as the tray drives it (gui.App): *app.App's
// methods, its server state in gui's type, and the model install.
type trayApp struct {
	*app.App
	env *Env
}

func (t trayApp) Server() gui.ServerStatus { return guiServer(t.App.Server()) }

// WatchServer passes the app's server states on in gui's type; the
// latest wins when the tray is slow.
func (t trayApp) WatchServer() (<-chan gui.ServerStatus, func()) {
	in, stop := t.App.WatchServer()
	out := make(chan gui.ServerStatus, 1)
	go func() {
		defer close(out)
		for s := range in {
			select {
			case <-out:
			default:
			}
			out <- guiServer(s)
		}
	}()
	return out, stop
}

func guiServer(s app.ServerStatus) gui.ServerStatus {
	return gui.ServerStatus{Listening: s.Listening, URL: s.URL, Err: s.Err}
}

// InstallModel installs or updates the app's model as `npuchat install`
// does, reporting progress to the tray and, as install events, to the
// chat page.
func (t trayApp) InstallModel(ctx context.Context, progress func(gui.InstallProgress)) error {
	cfg := t.Config()
	in, err := models.NewInstaller(cfg, models.Options{FLMRoot: cfg.FLMRoot, Getenv: t.env.Getenv, GOOS: t.env.GOOS})
	if err != nil {
		return err
	}
	model := t.Model()
	publish := func(p service.InstallProgress) {
		p.Model = model
		t.Manager().Publish(service.Event{Type: service.EventInstall, Install: &p})
	}
	in.Progress = func(e models.Event) {
		p := gui.InstallProgress{Model: model, Message: e.Message}
		if f := e.File; f != nil {
			p.Message = "downloading " + f.File
			if f.Total > 0 {
				p.Frac = float64(f.Bytes) / float64(f.Total)
				p.Message += fmt.Sprintf(" (%s of %s)", hub.HumanBytes(f.Bytes), hub.HumanBytes(f.Total))
			}
			publish(service.InstallProgress{Phase: "downloading", Done: f.Bytes, Total: f.Total, BytesPerSecond: f.Rate, ETASeconds: f.ETA.Seconds()})
		}
		if p.Message == "" {
			p.Message = e.Phase
		}
		progress(p)
	}
	_, err = in.Install(ctx, model, models.InstallOptions{})
	switch {
	case ctx.Err() != nil:
		publish(service.InstallProgress{Phase: "cancelled"})
	case err != nil:
		publish(service.InstallProgress{Phase: "failed", Error: err.Error()})
	default:
		publish(service.InstallProgress{Phase: "done"})
	}
	return err
}
