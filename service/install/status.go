package install

import (
	"errors"
	"fmt"
	"io/fs"
	"net/http"

	"github.com/npuchat/npuchat/models"
	"github.com/npuchat/npuchat/models/hub"
	"github.com/npuchat/npuchat/service/installstatus"
)

// The status types live in installstatus (a leaf the service's events
// import); these names keep them at hand for the runner's users.
type (
	// State is where an install is (installstatus.State).
	State = installstatus.State
	// Status is one install as everyone sees it (installstatus.Status).
	Status = installstatus.Status
	// Failure is why an install failed (installstatus.Failure).
	Failure = installstatus.Failure
	// Words is a status in words (installstatus.Words).
	Words = installstatus.Words
)

// The install states (installstatus's).
const (
	StateIdle      = installstatus.StateIdle
	StateRunning   = installstatus.StateRunning
	StateDone      = installstatus.StateDone
	StateFailed    = installstatus.StateFailed
	StateCancelled = installstatus.StateCancelled
)

// Explain words an install's error for a person: a sentence that says
// what went wrong and what to do (the fixes a person has in the app, not
// command lines), and the whole error as the detail.
func Explain(model string, err error) Failure {
	f := Failure{Detail: err.Error()}
	var (
		unreachable *hub.UnreachableError
		httpErr     *hub.HTTPError
		space       *hub.SpaceError
		needsFLM    *models.NeedsFLMError
		flmGone     *models.FLMGoneError
	)
	switch {
	case errors.As(err, &needsFLM):
		f.Sentence = fmt.Sprintf("%s runs on the NPU only, and FastFlowLM is not installed on this computer. Install FastFlowLM, then install the model again.", needsFLM.Model)
	case errors.As(err, &flmGone):
		f.Sentence = fmt.Sprintf("%s is installed for FastFlowLM, which is not found now. Put FastFlowLM back, or remove the model in Models and install it again for the CPU.", flmGone.Model)
	case errors.As(err, &unreachable):
		f.Sentence = fmt.Sprintf("NPU Chat cannot reach Hugging Face at %s. Check the network connection, or set a Hugging Face mirror in Settings.", unreachable.Endpoint)
	case errors.As(err, &httpErr):
		switch {
		case httpErr.Status == http.StatusUnauthorized || httpErr.Status == http.StatusForbidden:
			f.Sentence = fmt.Sprintf("Hugging Face refused the download (HTTP %d). The repository may need a token with read access: set one in Settings.", httpErr.Status)
		case httpErr.Status == http.StatusNotFound:
			f.Sentence = "Hugging Face does not have the model's files (HTTP 404). The repository may have moved, or it may need a token."
		case httpErr.Status == http.StatusTooManyRequests:
			f.Sentence = "Hugging Face has had too many downloads from this address for now. Wait a few minutes, then try again."
		case httpErr.Status >= 500:
			f.Sentence = fmt.Sprintf("Hugging Face is failing or busy (HTTP %d). Try again in a few minutes.", httpErr.Status)
		default:
			f.Sentence = fmt.Sprintf("Hugging Face gave an unexpected answer (HTTP %d).", httpErr.Status)
		}
	case errors.As(err, &space):
		f.Sentence = fmt.Sprintf("There is not enough free disk space: the install needs %s in %s, and %s is free. Free some space, then try again.", hub.HumanBytes(space.Need), space.Dir, hub.HumanBytes(space.Have))
	case errors.Is(err, hub.ErrHashMismatch):
		f.Sentence = "A downloaded file did not match what Hugging Face records for it, twice. Try again later; a proxy may be changing the files."
	case models.IsFileInUse(err):
		f.Sentence = "A file of the model could not be replaced because a program has it open. Switch the model off, then try again."
	case errors.Is(err, fs.ErrPermission):
		f.Sentence = "NPU Chat is not allowed to write to the models folder. Choose another models folder in Settings, or fix the folder's permissions."
	default:
		f.Sentence = fmt.Sprintf("The install of %s failed.", model)
	}
	return f
}
