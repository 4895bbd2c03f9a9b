package gui

import (
	"context"
	"fmt"

	"github.com/npuchat/npuchat/app"
	"github.com/npuchat/npuchat/enginekind"
	"github.com/npuchat/npuchat/npu/check"
	"github.com/npuchat/npuchat/service"
)

// App is what the tray and its windows drive: the assembled application
// (*app.App, in the app's own types), or a fake in tests. Every method may be called from any
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

	// Engine is the engine setting: one of enginekind.Engines.
	Engine() enginekind.Kind
	// SetEngine changes and saves the engine setting.
	SetEngine(ctx context.Context, kind enginekind.Kind) error
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
	// StartInstall starts installing or updating the configured model
	// and returns at once; the install's progress and end come as the
	// service's install events (Subscribe), as an install the chat page
	// started does, and the app cancels it when it shuts down.
	StartInstall() error

	// Server is the web server's state now; WatchServer sends each change.
	Server() ServerStatus
	WatchServer() (<-chan ServerStatus, func())

	// Model is the name of the model served.
	Model() string
	// ChatURL is the chat page's address.
	ChatURL() string
	// OpenChat opens the chat page in the user's browser.
	OpenChat() error
	// OpenSettings opens the chat page's Settings view (the MCP servers
	// are edited there) in the user's browser.
	OpenSettings() error
	// LogDir is the folder of the log files.
	LogDir() string
	// Version is NPU Chat's version.
	Version() string
}

// ServerStatus is the web server's state, listening or why not, as the
// app (its one owner) publishes it: the tray shows it as it is, with no
// copy of its own.
type ServerStatus = app.ServerStatus

// Notice is a desktop notification.
type Notice struct {
	Title, Body string
}

// noticesFor says which notifications an event calls for, given the
// status before it: the model ready, a fallback from the NPU to the CPU
// (with the reason), a load that failed; a reason in its sentence
// (errorWords: the whole error is in the log and the windows).
func noticesFor(prev service.Status, ev service.Event) []Notice {
	now := ev.Status
	var out []Notice
	if ev.Type == "fallback" {
		body := ev.Message
		if body == "" {
			body = now.Fallback
		}
		why, _ := errorWords(body)
		out = append(out, Notice{"NPU Chat switched to the CPU", cut("The NPU failed: "+why, 240)})
	}
	if now.State == service.StateOn && prev.State != service.StateOn {
		out = append(out, Notice{"NPU Chat is ready", fmt.Sprintf("%s is on, on the %s. Click the tray icon to chat.", now.Model, engineName(now.Backend))})
	}
	if now.State == service.StateError && prev.State != service.StateError {
		why, _ := errorWords(now.Error)
		out = append(out, Notice{"NPU Chat: the model did not load", cut(why, 240)})
	}
	return out
}
