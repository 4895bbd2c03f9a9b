package main

import (
	"context"
	"fmt"
	"time"

	"github.com/npuchat/npuchat/app"
	"github.com/npuchat/npuchat/gui"
	"github.com/npuchat/npuchat/models/hub"
	"github.com/npuchat/npuchat/service/install"
)

// trayApp is the app as the tray drives it (gui.App): *app.App, whose
// types the tray takes as they are, with the model install's progress
// in the tray's words.
type trayApp struct {
	*app.App
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
