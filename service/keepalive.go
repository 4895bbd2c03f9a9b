package service

// The keep-alive: how long an idle model stays loaded. The default is
// one value, Options.KeepAlive at first and SetKeepAlive's after (the
// settings store pushes the page's and the tray's changes in), read by
// Start, by every request that names no keep-alive of its own, and by
// the idle timer; a request's own keep_alive (Ollama's) applies after
// that request only. m.mu guards the timer and the expiry.

import (
	"context"
	"fmt"
	"time"

	"github.com/npuchat/npuchat/service/backend"
)

// rearmIdleLocked puts back the keep-alive timer that Reserve or acquire
// stopped, for a request that never ran (its ticket was released unused,
// or its client left while it waited): with nobody else waiting, the
// model unloads when it would have. A request holding the slot re-arms
// the timer itself when it ends. m.mu is held.
func (m *Manager) rearmIdleLocked() {
	if m.waiting > 0 || m.expires.IsZero() || m.state != StateOn || m.closed {
		return
	}
	if m.idle != nil {
		m.idle.Stop()
	}
	m.idle = time.AfterFunc(m.expires.Sub(m.opts.Now()), m.idleUnload)
}

// armIdle sets the keep-alive timer after a request (or a Start): the
// request's own keep_alive when it gave one, else the default. As in
// Ollama, one request's keep_alive does not change the default.
func (m *Manager) armIdle(keepAlive *time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	d := m.keepAlive
	if keepAlive != nil {
		d = *keepAlive
	}
	m.armIdleLocked(d)
}

// armIdleLocked arms the idle timer for d from now (none when d is
// negative, or the model is not on). m.mu is held.
func (m *Manager) armIdleLocked(d time.Duration) {
	if m.state != StateOn || m.closed {
		d = -1
	}
	m.setIdleLocked(d)
}

// setIdleLocked arms the idle timer for d from now, or none when d is
// negative. m.mu is held.
func (m *Manager) setIdleLocked(d time.Duration) {
	m.lastIdle = d // for the reason text of the unload
	if m.idle != nil {
		m.idle.Stop()
	}
	m.expires = time.Time{}
	if d < 0 {
		return
	}
	m.expires = m.opts.Now().Add(d)
	m.idle = time.AfterFunc(d, m.idleUnload)
}

// idleUnload unloads the model when nothing has used it for keep-alive.
func (m *Manager) idleUnload() {
	select {
	case m.slot <- struct{}{}:
	default:
		return // busy: the request that holds the slot re-arms the timer
	}
	defer m.giveSlot()
	m.mu.Lock()
	if m.waiting > 0 || m.state != StateOn || m.expires.IsZero() || m.opts.Now().Before(m.expires) {
		m.mu.Unlock()
		return
	}
	be := m.detachLocked(fmt.Sprintf("unloaded after %s idle; it loads again on the next request", m.lastIdle))
	side := m.takeSideLocked()
	m.mu.Unlock()
	m.unload(context.Background(), be)
	m.unload(context.Background(), side)
}

// Unload unloads model now, if it is the one loaded, without switching
// it off (Ollama's keep_alive 0 with an empty request); "" unloads
// whatever is loaded.
func (m *Manager) Unload(ctx context.Context, model string) error {
	if model != "" {
		name, err := m.opts.Resolve(model)
		if err != nil {
			return err
		}
		model = name
	}
	if err := m.takeSlot(ctx); err != nil {
		return err
	}
	defer m.giveSlot()
	m.mu.Lock()
	var be, side backend.Backend
	if m.be != nil && (model == "" || model == m.beModel) {
		be = m.detachLocked("unloaded on request; it loads again on the next request")
	}
	if m.side != nil && (model == "" || model == m.sideModel) {
		side = m.takeSideLocked()
	}
	m.mu.Unlock()
	m.unload(ctx, be)
	m.unload(ctx, side)
	return nil
}

// KeepAlive is the default keep-alive now: how long an idle model stays
// loaded after a request that names none (negative: forever).
func (m *Manager) KeepAlive() time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.keepAlive
}

// SetKeepAlive changes the default keep-alive (the settings store calls
// it when the page or the tray changes the setting). It is in effect at
// once: a model that is on and idle gets its unload time from the new
// value, counted from now ("never" clears it); a request that is running
// or waiting arms the timer with it when it ends.
func (m *Manager) SetKeepAlive(d time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if d == m.keepAlive {
		return
	}
	m.keepAlive = d
	if m.state == StateOn && m.running == 0 && m.waiting == 0 && !m.closed {
		m.armIdleLocked(d)
		m.publishLocked(EventStatus, "keep-alive changed")
	}
}
