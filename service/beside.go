package service

import (
	"context"
	"errors"
	"fmt"

	"github.com/npuchat/npuchat/enginekind"
	"github.com/npuchat/npuchat/service/backend"
)

// route picks the backend beside be for r when be cannot do what r asks
// for (see "A second backend beside the first" at Manager): it returns
// that backend, loaded, and why r goes there; nil when be is the one to
// run r (it can, or no other engine can be tried, and be refuses r
// itself). The caller holds the slot.
func (m *Manager) route(ctx context.Context, model string, be backend.Backend, r *backend.Request) (backend.Backend, string, error) {
	var ue *backend.UnsupportedError
	if err := backend.CheckSupported(r, be.Info().Capabilities, "the "+string(be.Kind())+" backend"); !errors.As(err, &ue) {
		return nil, "", nil
	}
	m.mu.Lock()
	serving := m.kind
	kind := m.nextEngineLocked(model, serving)
	if kind == "" {
		m.mu.Unlock()
		return nil, "", nil
	}
	why := fmt.Sprintf("%s backend cannot do %s (%q); the %s engine answers such requests", serving, ue.What, ue.Param, kind)
	if m.side != nil && m.sideModel == model && m.sideKind == kind {
		side := m.side
		m.sideWhy = why
		m.mu.Unlock()
		return side, why, nil
	}
	old := m.takeSideLocked()
	m.mu.Unlock()
	m.unload(ctx, old)

	if m.opts.Beside != nil {
		if err := m.opts.Beside(model, kind); err != nil {
			return nil, "", &backend.UnsupportedError{Param: ue.Param, What: ue.What, Backend: ue.Backend,
				Reason: fmt.Sprintf("the %s engine, which could answer it, cannot be loaded beside it: %v; switch the engine to %s (the tray's Engine menu, the page's settings or --engine %s)", kind, err, kind, kind)}
		}
	}
	m.log.Info("loading a backend beside the serving one", "model", model, "serving", serving, "beside", kind, "why", why)
	side, err := m.loadBeside(ctx, model, kind, why)
	if err != nil {
		if errors.Is(err, ErrModelOff) {
			return nil, "", err
		}
		return nil, "", fmt.Errorf("this request asks for %s (%q), which the %s backend cannot do, and the %s engine, which could, did not load: %w", ue.What, ue.Param, serving, kind, err)
	}
	return side, why, nil
}

// loadBeside makes and loads a backend of kind for model beside the
// serving one; the state stays on. Stop abandons it as it does a load
// (beginLoadLocked). The caller holds the slot.
func (m *Manager) loadBeside(ctx context.Context, model string, kind enginekind.Kind, why string) (backend.Backend, error) {
	m.mu.Lock()
	if m.be == nil { // switched off while the old one unloaded
		m.mu.Unlock()
		return nil, errSwitchedOff
	}
	lctx, done, err := m.beginLoadLocked(ctx)
	if err != nil {
		m.mu.Unlock()
		return nil, err
	}
	defer done()
	m.publishLocked(EventStatus, fmt.Sprintf("loading the %s engine beside the %s backend: %s", kind, m.kind, why))
	m.mu.Unlock()
	be, err := m.opts.NewBackend(lctx, model, kind)
	if err != nil {
		return nil, fmt.Errorf("load %s on %s: %w", model, kind, err)
	}
	if err := be.Load(lctx, nil); err != nil {
		return nil, fmt.Errorf("load %s on %s: %w", model, kind, err)
	}
	caps := be.Info().Capabilities
	m.mu.Lock()
	defer m.mu.Unlock()
	if lctx.Err() != nil || m.be == nil { // switched off meanwhile
		m.orphans = append(m.orphans, be)
		return nil, errSwitchedOff
	}
	m.side, m.sideKind, m.sideModel, m.sideWhy, m.sideCaps = be, kind, model, why, caps
	m.publishLocked(EventStatus, fmt.Sprintf("the %s engine is loaded beside the %s backend: %s", kind, m.kind, why))
	return be, nil
}

// runBeside runs r on the backend beside the serving one. A device
// failure there unloads it and marks its engine failed for the model
// (the serving backend is not affected).
func (m *Manager) runBeside(ctx context.Context, side backend.Backend, why string, r *backend.Request, onRun func(kind enginekind.Kind, fallback string), emit func(backend.Token) error) (backend.Result, error) {
	kind, _, res, err := m.run(ctx, side, r, why, onRun, emit)
	if res.Backend == "" {
		res.Backend = kind
	}
	if err == nil {
		m.record(res)
		return res, nil
	}
	if errors.Is(err, backend.ErrDeviceFailed) && ctx.Err() == nil {
		m.mu.Lock()
		var failed backend.Backend
		if m.side == side {
			m.failed[kind] = fmt.Sprintf("%s backend failed: %v", kind, err)
			failed = m.takeSideLocked()
			m.publishLocked(EventStatus, fmt.Sprintf("the %s engine beside the %s backend failed: %v", kind, m.kind, err))
		}
		m.mu.Unlock()
		m.unload(context.Background(), failed)
	}
	return res, err
}

// takeSideLocked takes the backend beside the serving one out of service
// and returns it (nil when there is none) for the caller to unload
// outside m.mu, or to hand to giveSlot (m.orphans). m.mu is held.
func (m *Manager) takeSideLocked() backend.Backend {
	side := m.side
	m.side, m.sideKind, m.sideModel, m.sideWhy, m.sideCaps = nil, "", "", "", nil
	return side
}

// nextEngineLocked is the first engine after kind for model that has not
// failed ("" when none). m.mu is held.
func (m *Manager) nextEngineLocked(model string, kind enginekind.Kind) enginekind.Kind {
	kinds := m.opts.Engines(model)
	for i, k := range kinds {
		if k != kind {
			continue
		}
		for _, later := range kinds[i+1:] {
			if _, bad := m.failed[later]; !bad {
				return later
			}
		}
	}
	return ""
}
