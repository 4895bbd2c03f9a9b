package gui

import (
	"path/filepath"
	"strings"
)

// StartupError is a start-up error the tray cannot start without (a
// settings file that does not parse, a data folder that cannot be
// written, the single-instance lock), as ShowStartupError shows it: the
// Windows GUI build has no console, so stderr alone says nothing.
type StartupError struct {
	// Err is what went wrong, in words a person can act on.
	Err error
	// LogFile is the log file the error was written to ("" when it
	// could not be); LogErr, when it could not be written, says why.
	LogFile string
	LogErr  error
}

// logDir is the folder "Open logs folder" opens: LogFile's, "" (no
// button, no menu item) when the error is in no log file.
func (e StartupError) logDir() string {
	if e.LogFile == "" {
		return ""
	}
	return filepath.Dir(e.LogFile)
}

// startupTitle heads the window and the notification.
const startupTitle = "NPU Chat could not start"

// startupView is what the tray shows for a start-up error: the error
// icon, the reason as the status line and in the tooltip.
func startupView(e StartupError) View {
	reason := strings.Join(strings.Fields(e.Err.Error()), " ")
	return View{
		Icon:    IconError,
		Status:  cut("Error: "+reason, menuLine),
		Tooltip: startupTitle + ": " + reason,
	}
}

// startupText is the window's text: the reason, where the log is (or
// why it is in no log), and what to do.
func startupText(e StartupError) string {
	text := e.Err.Error()
	switch {
	case e.LogErr != nil && e.LogErr.Error() == e.Err.Error():
		text += "\n\nFor the same reason, it could not be written to the log either."
	case e.LogErr != nil:
		text += "\n\nIt could not be written to the log either: " + e.LogErr.Error()
	case e.LogFile != "":
		text += "\n\nThis is also in the log: " + e.LogFile
	}
	return text + "\n\nFix it, then start NPU Chat again."
}
