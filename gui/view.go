package gui

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/npuchat/npuchat/models/hub"
	"github.com/npuchat/npuchat/service"
	"github.com/npuchat/npuchat/service/backend"
)

// Icon names a tray icon (one per state; see tools/icons).
type Icon string

// The tray icons.
const (
	IconOff     Icon = "off"
	IconLoading Icon = "loading"
	IconOn      Icon = "on"
	IconError   Icon = "error"
)

// Snapshot is everything the tray shows, gathered in one value so that
// the icon, the tooltip, the menu and the windows are drawn from the
// same facts.
type Snapshot struct {
	// Service is the service's status, from its latest event.
	Service service.Status
	// Server is the web server's state.
	Server ServerStatus
	// Install is the install running or finished last, if any.
	Install *InstallState
}

// InstallState is the tray's model install.
type InstallState struct {
	// Running is true until the install ends.
	Running bool
	// Progress is the latest report.
	Progress InstallProgress
	// Err is why the install failed, once it ended.
	Err error
}

// View is what the tray shows for a snapshot: computed by [ViewOf],
// without fyne, so that every line is tested.
type View struct {
	Icon Icon
	// Tooltip says the state in words.
	Tooltip string
	// Status is the menu's first line: Off, Loading 42%, On: NPU,
	// On: CPU, Error: reason.
	Status string
	// Detail is a second, disabled line under Status when there is more
	// to say: the fallback reason, the install's progress, a port taken.
	Detail string
	// Serving is true when the model is switched on (loading or on): the
	// menu offers Stop serving, else Start serving.
	Serving bool
	// Ready is true when the model answers (state on).
	Ready bool
	// Installing is true while an install runs (its menu item is off).
	Installing bool
}

// menuLine is the longest menu line, in characters; longer reasons are
// cut with an ellipsis (the whole text is in the tooltip and the logs).
const menuLine = 72

// ViewOf computes what the tray shows.
func ViewOf(s Snapshot) View {
	st := s.Service
	v := View{Serving: st.Enabled && (st.State == service.StateLoading || st.State == service.StateOn)}
	engine := engineName(st.Backend)
	switch st.State {
	case service.StateLoading:
		v.Icon = IconLoading
		v.Status = "Loading"
		if p := st.Progress; p != nil && p.Frac > 0 {
			v.Status = fmt.Sprintf("Loading %d%%", int(p.Frac*100))
		}
		v.Tooltip = "NPU Chat: loading " + st.Model
		if engine != "" {
			v.Tooltip += " on the " + engine
		}
		if p := st.Progress; p != nil && p.Stage != "" {
			v.Detail = p.Stage
			v.Tooltip += " (" + p.Stage + ")"
		}
	case service.StateOn:
		v.Icon, v.Ready = IconOn, true
		v.Status = "On: " + engineLabel(st.Backend)
		v.Tooltip = fmt.Sprintf("NPU Chat: on, %s on the %s. Click to open the chat.", st.Model, engine)
		if st.Fallback != "" {
			v.Detail = "NPU not used: " + st.Fallback
			v.Tooltip += " The NPU is not used: " + st.Fallback
		} else if st.Beside != "" {
			// A second engine answers what the first cannot (tools on
			// FastFlowLM).
			v.Detail = "Also on the " + engineName(st.Beside) + ": " + st.BesideReason
			v.Tooltip += " Also on the " + engineName(st.Beside) + ": " + st.BesideReason + "."
		}
	case service.StateError:
		v.Icon = IconError
		v.Status = "Error: " + st.Error
		v.Tooltip = "NPU Chat: error. " + st.Error + " Click to try again."
	default:
		v.Icon = IconOff
		v.Status = "Off"
		v.Tooltip = "NPU Chat: off. Click to start serving."
		if st.Enabled {
			// Switched on but unloaded (idle, or not loaded yet): the
			// next request loads it.
			v.Status = "Off (loads on the next request)"
			v.Tooltip = "NPU Chat: idle; the model loads on the next request. Click to load it now."
		}
	}
	if s.Server.Err != nil {
		// The API cannot listen: nothing works until that is fixed, so
		// it outranks the model's state.
		v.Icon = IconError
		v.Status = "Error: " + s.Server.Err.Error()
		v.Tooltip = "NPU Chat: the chat page and API are not served. " + s.Server.Err.Error()
	}
	if in := s.Install; in != nil {
		switch {
		case in.Running:
			v.Installing = true
			v.Detail = installLine(in.Progress)
			if v.Icon == IconOff {
				v.Icon = IconLoading
			}
			v.Tooltip += " " + v.Detail + "."
		case in.Err != nil:
			v.Detail = "Install failed: " + in.Err.Error()
		}
	}
	v.Status = cut(v.Status, menuLine)
	v.Detail = cut(v.Detail, menuLine)
	return v
}

// installLine is the install's progress in a few words: for the whole
// download while it runs ("Installing minicpm5:2b 45%: file 3 of 6,
// 1.0 GB of 2.2 GB, 4 min left"), else the installer's step.
func installLine(p InstallProgress) string {
	line := "Installing " + p.Model
	if p.Frac > 0 {
		line = fmt.Sprintf("%s %d%%", line, int(p.Frac*100))
	}
	if p.FilesTotal > 0 && p.Total > 0 && p.Bytes < p.Total {
		line += fmt.Sprintf(": file %d of %d, %s of %s", min(p.FilesDone+1, p.FilesTotal), p.FilesTotal, hub.HumanBytes(p.Bytes), hub.HumanBytes(p.Total))
		if p.Left > 0 {
			line += ", " + timeLeft(p.Left) + " left"
		}
	} else if p.Message != "" {
		line += ": " + p.Message
	}
	return strings.TrimSpace(line)
}

// timeLeft is a duration as people say it: "40 s", "4 min", "1 h 5 min".
func timeLeft(d time.Duration) string {
	s := int(d.Round(time.Second).Seconds())
	switch {
	case s < 60:
		return fmt.Sprintf("%d s", max(s, 1))
	case s < 3600:
		return fmt.Sprintf("%d min", (s+30)/60)
	default:
		return fmt.Sprintf("%d h %d min", s/3600, (s%3600)/60)
	}
}

// engineLabel is a backend kind as the status line writes it.
func engineLabel(kind backend.Kind) string {
	switch kind {
	case backend.NPU, backend.CPU:
		return strings.ToUpper(string(kind))
	case "":
		return "?"
	}
	return string(kind)
}

// engineName is a backend kind in a sentence ("the NPU").
func engineName(kind backend.Kind) string {
	switch kind {
	case backend.NPU, backend.CPU:
		return strings.ToUpper(string(kind))
	case backend.Remote:
		return "remote server"
	}
	return string(kind)
}

// cut shortens s to at most n characters, ending with an ellipsis, and
// keeps it on one line.
func cut(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return strings.TrimSpace(string(r[:n-1])) + "…"
}
