package gui

import (
	"context"
	"fmt"
	"time"

	"github.com/npuchat/npuchat/npu/check"
	"github.com/npuchat/npuchat/service"
)

// App is what the tray and its windows drive: the assembled application
// (package app), or a fake in tests. Every method may be called from any
// goroutine and must not block for long, except those taking a context.
type App interface {
	// Status is the service's state now.
	Status() service.Status
	// Subscribe returns the service's events, starting with the current
	// status, and a function that ends the subscription. The tray
	// subscribes once; the icon, the menu and the windows all follow
	// that one subscription.
	Subscribe() (<-chan service.Event, func())
	// StartModel switches the model on (loading in the background).
	StartModel() error
	// StopModel switches the model off.
	StopModel(ctx context.Context) error

	// Engine is the engine setting: auto, npu, cpu or remote.
	Engine() string
	// SetEngine changes and saves the engine setting.
	SetEngine(ctx context.Context, kind string) error
	// ServeAtStart is the "serve at start" setting.
	ServeAtStart() bool
	// SetServeAtStart changes and saves it.
	SetServeAtStart(on bool) error
	// LaunchAtLogin reads the real login entry (XDG autostart file,
	// Windows Run key), not a remembered flag.
	LaunchAtLogin() (bool, error)
	// SetLaunchAtLogin writes or removes that entry.
	SetLaunchAtLogin(on bool) error
	// The settings' store, shared with the chat page (SettingsStore).
	SettingsStore

	// CheckNPU runs the NPU check (`npuchat check`).
	CheckNPU(ctx context.Context) (*check.Report, error)
	// InstallModel installs or updates the configured model, reporting
	// progress (from any goroutine) until it returns.
	InstallModel(ctx context.Context, progress func(InstallProgress)) error

	// Server is the web server's state now; WatchServer sends each change.
	Server() ServerStatus
	WatchServer() (<-chan ServerStatus, func())

	// Model is the name of the model served.
	Model() string
	// ChatURL is the chat page's address.
	ChatURL() string
	// OpenChat opens the chat page in the user's browser.
	OpenChat() error
	// LogDir is the folder of the log files.
	LogDir() string
	// Version is NPU Chat's version.
	Version() string
}

// InstallProgress is one report of a model install.
type InstallProgress struct {
	// Model is the model being installed.
	Model string
	// Message is a few words on the current step ("downloading model.q4nx").
	Message string
	// Frac is the fraction done, 0..1, or 0 when unknown.
	Frac float64
	// The whole download, once the installer has said what it fetches
	// (zero before): files done of how many, bytes of all of them so
	// far and in all, and the time left for all of them (0: unknown).
	FilesDone, FilesTotal int
	Bytes, Total          int64
	Left                  time.Duration
}

// ServerStatus is the web server's state: listening, or why not.
type ServerStatus struct {
	Listening bool
	// URL is the chat page's address.
	URL string
	// Err says why the server does not listen (a port taken by another
	// program); nil when it listens or is starting.
	Err error
}

// Notice is a desktop notification.
type Notice struct {
	Title, Body string
}

// noticesFor says which notifications an event calls for, given the
// status before it: the model ready, a fallback from the NPU to the CPU
// (with the reason), a load that failed.
func noticesFor(prev service.Status, ev service.Event) []Notice {
	now := ev.Status
	var out []Notice
	if ev.Type == "fallback" {
		body := ev.Message
		if body == "" {
			body = now.Fallback
		}
		out = append(out, Notice{"NPU Chat switched to the CPU", cut("The NPU failed: "+body, 240)})
	}
	if now.State == service.StateOn && prev.State != service.StateOn {
		out = append(out, Notice{"NPU Chat is ready", fmt.Sprintf("%s is on, on the %s. Click the tray icon to chat.", now.Model, engineName(now.Backend))})
	}
	if now.State == service.StateError && prev.State != service.StateError {
		out = append(out, Notice{"NPU Chat: the model did not load", cut(now.Error, 240)})
	}
	return out
}
