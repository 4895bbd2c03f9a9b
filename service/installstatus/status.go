// Package installstatus is what everyone sees of a model install: its
// Status (the answer of GET /api/models/{name}/install, the payload of
// the install events, what `npuchat install` prints) and its Words. It
// is a leaf apart from the install runner (service/install) so that the
// service's events carry installs without the service importing the
// installer and its hub, FastFlowLM and JSON editing packages.
package installstatus

import (
	"cmp"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/npuchat/npuchat/bytesize"
)

// State is where an install is.
type State string

// The install states.
const (
	StateIdle      State = "idle"      // no install has run
	StateRunning   State = "running"   // downloading or installing
	StateDone      State = "done"      // finished; the model is installed
	StateFailed    State = "failed"    // stopped with an error (Failure says why)
	StateCancelled State = "cancelled" // cancelled; starting again resumes
)

// Ended reports whether the state is an install's outcome.
func (s State) Ended() bool { return s == StateDone || s == StateFailed || s == StateCancelled }

// Status is one install as everyone sees it: the answer of GET
// /api/models/{name}/install, the payload of the service's install
// events (/api/events, the tray), and what `npuchat install` prints. Its
// JSON carries its Words too, so the page shows the same words as the
// tray and the command line without wording anything itself.
type Status struct {
	Model   string `json:"model,omitempty"`
	State   State  `json:"state"`
	Phase   string `json:"phase,omitempty"`   // the installer's phase: start, list, verify, download, install, register, note
	Message string `json:"message,omitempty"` // the installer's last words for people
	// File is the file downloading now, with its bytes so far and size;
	// Rate is in bytes per second, ETA in seconds, for the file.
	File       string  `json:"file,omitempty"`
	Bytes      int64   `json:"bytes"`
	Total      int64   `json:"total"`
	Rate       float64 `json:"rate"`
	ETASeconds float64 `json:"eta_s"`
	Files      int     `json:"files_done"` // files downloaded and verified
	// The whole install, once the installer has said what it downloads
	// (0 before, and when nothing needs downloading): the number of
	// files, the bytes of all of them so far and in all (a resumed file
	// counts what it had), and the time left for all of them at the
	// current rate.
	FilesTotal        int     `json:"files_total"`
	OverallBytes      int64   `json:"overall_bytes"`
	OverallTotal      int64   `json:"overall_total"`
	OverallETASeconds float64 `json:"overall_eta_s"`
	// Earlier is what earlier, interrupted runs left to resume (bytes),
	// as the install found before the hub answered; once the plan is
	// known, OverallBytes counts it.
	Earlier int64 `json:"earlier_bytes,omitempty"`
	// Failure says why a failed install failed.
	Failure *Failure `json:"failure,omitempty"`
	Notes   []string `json:"notes,omitempty"`
	// Serve says the model is switched on when the install finishes
	// (the page's Install: the server starts it, not the browser).
	Serve    bool      `json:"serve,omitempty"`
	Started  time.Time `json:"started,omitzero"`
	Finished time.Time `json:"finished,omitzero"`
}

// Failure is why an install failed, for a person: a short sentence that
// says what went wrong and what to do, and the whole error behind it
// (never cut; the page folds it, the tray shows it second).
type Failure struct {
	Sentence string `json:"sentence"`
	Detail   string `json:"detail"`
}

// Error is the sentence (a *Failure is the error of a failed install
// for those that want it as one; errors.As gives the Detail).
func (f *Failure) Error() string { return f.Sentence }

// Kept is how many bytes of the install are on disk and kept for the
// next run (downloaded now or by an earlier run), as far as it knows.
func (st Status) Kept() int64 { return max(st.OverallBytes, st.Earlier) }

// MarshalJSON writes the status with its Words ("words": {...}).
func (st Status) MarshalJSON() ([]byte, error) {
	type plain Status // without this method
	return json.Marshal(struct {
		plain
		Words Words `json:"words"`
	}{plain(st), st.Words()})
}

// Words is a status in words, the same wherever it is shown: the
// command line, the tray and the page.
type Words struct {
	// Title heads the install view: "Installing minicpm5:2b…".
	Title string `json:"title"`
	// Line is where it stands: "45% · 850.0 MB of 1.9 GB · about 1 min
	// 25 s left", "Installed.", "Nothing was downloaded."
	Line string `json:"line,omitempty"`
	// File is the file downloading now: "File 2 of 10: model.q4nx
	// (850.0 MB of 1.8 GB) · 12.3 MB/s".
	File string `json:"file,omitempty"`
	// Problem is a failed install's sentence, Detail its whole error.
	Problem string `json:"problem,omitempty"`
	Detail  string `json:"detail,omitempty"`
	// Action is what the install button says now: "Install", "Retry"
	// (nothing was downloaded), "Resume" (something was), or "" while it
	// runs and once it is done.
	Action string `json:"action,omitempty"`
}

// String is the words on one line ("Title. Line"), for logs and
// one-line displays.
func (w Words) String() string {
	parts := []string{strings.TrimSuffix(w.Title, "…")}
	for _, s := range []string{w.Problem, w.Line, w.File} {
		if s != "" {
			parts = append(parts, s)
		}
	}
	return strings.Join(parts, ". ")
}

// Words says the status for a person. It is the one place an install is
// worded: `npuchat install` prints it, the tray shows it, and the page
// shows it from the status's JSON.
func (st Status) Words() Words {
	name := st.Model
	if name == "" {
		name = "the model"
	}
	whole := st.OverallTotal > 0
	var w Words
	switch st.State {
	case StateRunning:
		w.Title = "Installing " + name + "…"
		switch {
		case whole && (st.Phase != "download" || st.OverallBytes >= st.OverallTotal):
			w.Line = fmt.Sprintf("All %d files downloaded (%s). Setting them up…", st.FilesTotal, bytesize.String(st.OverallTotal))
		case whole:
			w.Line = fmt.Sprintf("%d%% · %s of %s", percent(st.OverallBytes, st.OverallTotal), bytesize.String(st.OverallBytes), bytesize.String(st.OverallTotal))
			if st.OverallETASeconds > 0 {
				w.Line += " · about " + duration(st.OverallETASeconds) + " left"
			}
			// The file shown is the next to finish, or (all of it here)
			// the one that just did.
			n := st.Files + 1
			if st.File != "" && st.Total > 0 && st.Bytes >= st.Total {
				n = st.Files
			}
			w.File = fmt.Sprintf("File %d of %d", max(1, min(n, st.FilesTotal)), st.FilesTotal)
			if st.File != "" {
				w.File += fmt.Sprintf(": %s (%s of %s)", st.File, bytesize.String(st.Bytes), bytesize.String(st.Total))
			}
			if st.Rate > 0 {
				w.File += " · " + bytesize.String(int64(st.Rate)) + "/s"
			}
		case st.Total > 0:
			w.Line = fmt.Sprintf("%s: %s of %s", cmp.Or(st.File, "Downloading"), bytesize.String(st.Bytes), bytesize.String(st.Total))
			if st.Rate > 0 {
				w.Line += " · " + bytesize.String(int64(st.Rate)) + "/s"
			}
			if st.ETASeconds > 0 {
				w.Line += " · about " + duration(st.ETASeconds) + " left"
			}
		case st.Message != "" && st.Phase != "start":
			w.Line = capitalize(st.Message)
		default:
			w.Line = "Starting…"
		}
	case StateDone:
		w.Title = name + " is installed"
		w.Line = "Installed."
		if st.Serve {
			w.Line = "Installed. Starting the model…"
		}
	case StateFailed:
		w.Title = "The install of " + name + " failed"
		if f := st.Failure; f != nil {
			w.Problem, w.Detail = f.Sentence, f.Detail
		}
		if w.Problem == "" {
			w.Problem = "The install failed."
		}
		w.Action = "Retry"
		w.Line = "Nothing was downloaded."
		if kept := st.Kept(); kept > 0 {
			w.Action = "Resume"
			w.Line = fmt.Sprintf("The %s downloaded so far are kept: Resume continues from there.", bytesize.String(kept))
		}
	case StateCancelled:
		w.Title = "The install of " + name + " was cancelled"
		w.Action = "Install"
		w.Line = "Cancelled before anything was downloaded."
		if kept := st.Kept(); kept > 0 {
			w.Action = "Resume"
			w.Line = "Cancelled"
			if whole {
				w.Line += fmt.Sprintf(" at %d%%", percent(st.OverallBytes, st.OverallTotal))
			}
			w.Line += ". Resume continues where it stopped."
		}
	default:
		w.Title = name + " is not installed yet"
		w.Action = "Install"
	}
	return w
}

// percent is part of all in whole percent, never 100 before the end.
func percent(part, all int64) int64 {
	if all <= 0 {
		return 0
	}
	return min(100*part/all, 100)
}

// duration says seconds as "12 s", "3 min 5 s" or "1 h 20 min".
func duration(sec float64) string {
	s := int64(sec + 0.5)
	switch {
	case s < 60:
		return fmt.Sprintf("%d s", s)
	case s < 3600:
		return fmt.Sprintf("%d min %d s", s/60, s%60)
	}
	return fmt.Sprintf("%d h %d min", s/3600, s%3600/60)
}

func capitalize(s string) string {
	if s == "" || s[0] < 'a' || s[0] > 'z' {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
