package service

import (
	"errors"
	"fmt"
	"time"

	"github.com/npuchat/npuchat/eventbus"
	"github.com/npuchat/npuchat/service/backend"
	"github.com/npuchat/npuchat/service/installstatus"
)

// EventKind names what an Event reports. The manager publishes the
// status, progress, fallback and error kinds; other service-level
// components publish their own kinds (install) through Publish.
type EventKind string

// The event kinds, as /api/events names them ("event: status").
const (
	// EventStatus: the state, the model or the reason changed.
	EventStatus EventKind = "status"
	// EventProgress: loading moved on (Progress says how far).
	EventProgress EventKind = "progress"
	// EventFallback: a backend failed and the next engine is used
	// (Message says why).
	EventFallback EventKind = "fallback"
	// EventError: loading failed on every engine (Message says why).
	EventError EventKind = "error"
	// EventInstall: a model install moved on, finished or failed
	// (Install is the install runner's status, the same value GET
	// /api/models/{name}/install answers); published for the runner.
	EventInstall EventKind = "install"
)

// managerOwns reports whether the manager alone publishes kind: those
// events describe its state, and another publisher could contradict
// Status.
func managerOwns(kind EventKind) bool {
	switch kind {
	case EventStatus, EventProgress, EventFallback, EventError:
		return true
	}
	return false
}

// Event is something that happened, for the tray and the page. Status is
// the service's status when it was published.
type Event struct {
	Type     EventKind             `json:"type"`
	Message  string                `json:"message,omitempty"`
	Progress *backend.Progress     `json:"progress,omitempty"`
	Install  *installstatus.Status `json:"install,omitempty"`
	Status   Status                `json:"status"`
	Time     time.Time             `json:"time"`
}

// publishLocked sends an event to every subscriber. m.mu must be held.
func (m *Manager) publishLocked(kind EventKind, msg string) {
	ev := Event{Type: kind, Message: msg}
	if kind == EventProgress && m.progress != nil {
		p := *m.progress
		ev.Progress = &p
	}
	m.sendLocked(ev)
}

// Publish sends an event of another service-level component (the
// install runner's EventInstall) to the same subscribers as the
// manager's own, stamped with the current status. The kinds that
// describe the model's state are the manager's alone.
func (m *Manager) Publish(ev Event) error {
	if ev.Type == "" || managerOwns(ev.Type) {
		return fmt.Errorf("publish %q event: only the manager publishes status, progress, fallback and error events", ev.Type)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return errors.New("publish: service closed")
	}
	m.sendLocked(ev)
	return nil
}

// subscriberBuffer is how many events a subscriber's channel holds, and
// how many more may wait for room before the oldest that may go are
// dropped (package eventbus).
const subscriberBuffer = 64

// eventOptions are the rules for a subscriber that does not keep up:
// waiting progress is coalesced (the newest of a stream replaces the
// older), and when too many wait the oldest that may be lost is
// dropped; an outcome (an install's done, failed or cancelled, a
// fallback, a load error) is never dropped. So the service never blocks
// on a subscriber, every subscriber sees every outcome, and the last
// event it receives carries the current status.
func eventOptions() eventbus.Options[Event] {
	return eventbus.Options[Event]{
		Buffer: subscriberBuffer,
		Replace: func(old, next Event) bool {
			a, ok := progressStream(old)
			b, ok2 := progressStream(next)
			return ok && ok2 && a == b
		},
		Keep: isOutcome,
	}
}

// Subscribe returns a channel of events, starting with the current
// status, and a function that ends the subscription (its channel is then
// closed). A subscriber that does not keep up loses progress events (it
// gets the newest) and, when very far behind, old status events; it
// never loses an install's outcome, a fallback or a load error, it never
// blocks the service, and the last event it receives always carries the
// current status. Close ends every subscription.
func (m *Manager) Subscribe() (<-chan Event, func()) {
	m.mu.Lock()
	defer m.mu.Unlock()
	sub := eventbus.Subscribe(m.bus, eventOptions(), Event{Type: EventStatus, Status: m.statusLocked(), Time: m.opts.Now()})
	return sub.Events(), sub.Close
}

// sendLocked stamps ev with the status and the time and publishes it on
// the manager's bus. m.mu must be held, so that events go out in the
// order of the changes they report.
func (m *Manager) sendLocked(ev Event) {
	m.seq++
	ev.Status, ev.Time = m.statusLocked(), m.opts.Now()
	eventbus.Publish(m.bus, ev)
}

// progressStream names the stream a progress event belongs to, whose
// newest event says all that the older ones did; ok is false for other
// events.
func progressStream(ev Event) (key string, ok bool) {
	switch {
	case ev.Type == EventProgress:
		return "load", true
	case ev.Type == EventInstall && ev.Install != nil && !ev.Install.State.Ended():
		return "install " + ev.Install.Model, true
	}
	return "", false
}

// isOutcome reports whether ev says how something ended: an install's
// end, a fallback or a load error. Those are never dropped for another
// event.
func isOutcome(ev Event) bool {
	switch ev.Type {
	case EventFallback, EventError:
		return true
	case EventInstall:
		return ev.Install == nil || ev.Install.State.Ended()
	}
	return false
}
