package gui

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/npuchat/npuchat/enginekind"
	"github.com/npuchat/npuchat/service"
	"github.com/npuchat/npuchat/service/install"
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
	// Install is the install running or finished last, if any, as the
	// service's install events carry it (the install runner's status,
	// the same the page and `npuchat install` show).
	Install *install.Status
}

// View is what the tray shows for a snapshot: computed by [ViewOf],
// without fyne, so that every line is tested. An error is said in its
// sentence (errorWords), never as the whole Go error chain: the windows
// fold that under Details, and the log has it.
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
			why, _ := errorWords(st.Fallback)
			v.Detail = "NPU not used: " + why
			v.Tooltip += " The NPU is not used: " + why
		} else if st.Beside != "" {
			// A second engine answers what the first cannot (tools on
			// FastFlowLM).
			v.Detail = "Also on the " + engineName(st.Beside) + ": " + st.BesideReason
			v.Tooltip += " Also on the " + engineName(st.Beside) + ": " + st.BesideReason + "."
		}
	case service.StateError:
		v.Icon = IconError
		why, _ := errorWords(st.Error)
		v.Status = "Error: " + why
		v.Tooltip = "NPU Chat: error. " + why + " Click to try again."
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
		why, _ := errorWords(s.Server.Err.Error())
		v.Icon = IconError
		v.Status = "Error: " + why
		v.Tooltip = "NPU Chat: the chat page and API are not served. " + why
	}
	if st := s.Install; st != nil {
		switch line := installLine(*st); st.State {
		case install.StateRunning:
			v.Installing = true
			v.Detail = line
			if v.Icon == IconOff {
				v.Icon = IconLoading
			}
			v.Tooltip += " " + st.Words().String() + "."
		case install.StateFailed, install.StateCancelled:
			v.Detail = line
		}
	}
	v.Status = cut(v.Status, menuLine)
	v.Detail = cut(v.Detail, menuLine)
	return v
}

// installLine is an install in the menu's few words, from its Words
// (the one wording of an install): "Installing minicpm5:2b: 45% ·
// 850.0 MB of 1.9 GB · about 1 min 25 s left", "The install of
// minicpm5:2b failed: The disk is full.", "The install of minicpm5:2b
// was cancelled".
func installLine(st install.Status) string {
	w := st.Words()
	title := strings.TrimSuffix(w.Title, "…")
	switch {
	case w.Problem != "":
		return title + ": " + w.Problem
	case st.State == install.StateRunning:
		return title + ": " + w.Line
	}
	return title // done, cancelled (the setup window says what is kept)
}

// installFrac is how far an install has come, 0..1: of the whole
// download once the runner knows it, else of the file, 1 once done.
func installFrac(st install.Status) float64 {
	switch {
	case st.State == install.StateDone:
		return 1
	case st.OverallTotal > 0:
		return float64(st.OverallBytes) / float64(st.OverallTotal)
	case st.Total > 0:
		return float64(st.Bytes) / float64(st.Total)
	}
	return 0
}

// engineLabel is a backend kind as the status line writes it.
func engineLabel(kind enginekind.Kind) string {
	if kind == "" {
		return "?"
	}
	return kind.Short()
}

// engineName is a backend kind in a sentence ("the NPU").
func engineName(kind enginekind.Kind) string { return kind.Name() }

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
