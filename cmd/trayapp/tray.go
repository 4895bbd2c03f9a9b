package main

import (
	"context"
	"fmt"
	"time"

	"github.com/npuchat/npuchat/app"
	"github.com/npuchat/npuchat/gui"
	"github.com/npuchat/npuchat/models/hub"
	"github.com/npuchat/npuchat/service/backend"
	"github.com/npuchat/npuchat/service/install"
)

// trayApp is the app as the tray drives it (gui.App): *app.App's
// methods, its server state in gui's type, and the model install.
type trayApp struct {
	*app.App
}

func (t trayApp) Server() gui.ServerStatus { return guiServer(t.App.Server()) }

// Engine is the engine setting, as the menu's items name it.
func (t trayApp) Engine() string { return string(t.App.Engine()) }

// SetEngine changes the engine setting the menu names.
func (t trayApp) SetEngine(ctx context.Context, kind string) error {
	k, err := backend.ParseEngine(kind)
	if err != nil {
		return err
	}
	return t.App.SetEngine(ctx, k)
}

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

// InstallModel is the app's install (app.App.InstallModel), its
// progress in the tray's words.
func (t trayApp) InstallModel(ctx context.Context, progress func(gui.InstallProgress)) error {
	return t.App.InstallModel(ctx, func(st install.Status) { progress(installProgress(st)) })
}

// installProgress says an install's status in the tray's words.
func installProgress(st install.Status) gui.InstallProgress {
	p := gui.InstallProgress{Model: st.Model, Message: st.Message}
	if st.File != "" && st.State == install.StateRunning && st.Phase == "download" {
		p.Message = "downloading " + st.File
		if st.Total > 0 {
			p.Frac = float64(st.Bytes) / float64(st.Total)
			p.Message += fmt.Sprintf(" (%s of %s)", hub.HumanBytes(st.Bytes), hub.HumanBytes(st.Total))
		}
	}
	if st.State == install.StateRunning && st.OverallTotal > 0 {
		p.Frac = float64(st.OverallBytes) / float64(st.OverallTotal)
		p.FilesDone, p.FilesTotal, p.Bytes, p.Total = st.Files, st.FilesTotal, st.OverallBytes, st.OverallTotal
		p.Left = time.Duration(st.OverallETASeconds * float64(time.Second))
	}
	if st.State == install.StateDone {
		p.Frac = 1
	}
	if p.Message == "" {
		p.Message = st.Phase
	}
	return p
}
