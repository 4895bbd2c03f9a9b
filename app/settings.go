package app

import (
	"context"
	"fmt"
	"os"
	"reflect"

	"github.com/npuchat/npuchat/config"
	"github.com/npuchat/npuchat/engine"
	"github.com/npuchat/npuchat/enginekind"
	"github.com/npuchat/npuchat/models/library"
	"github.com/npuchat/npuchat/service"
	"github.com/npuchat/npuchat/service/cpu"
	"github.com/npuchat/npuchat/web"
)

// Settings are the settings now: the app's store (config.Store) holds
// them, the settings file with this run's environment and flags over it.
func (a *App) Settings() config.Settings { return a.settings.Get() }

// SubscribeSettings returns the settings after each change, from the
// page or the tray alike, starting with the settings now, and a function
// that ends the subscription.
func (a *App) SubscribeSettings() (<-chan config.Settings, func()) { return a.settings.Subscribe() }

// UpdateSettings changes settings, for the page and the tray alike:
// change edits a copy, the store checks and saves it (a bad value is a
// *config.FieldError naming its field, and nothing changes), and the
// live values go into effect before it returns: the keep-alive into the
// service (for Start, the idle timer and every request that names
// none), the engine by loading the model again on it when it is on or
// loading.
func (a *App) UpdateSettings(ctx context.Context, change func(*config.Settings) error) (config.Settings, error) {
	a.applyMu.Lock() // one change goes into effect at a time, in order
	defer a.applyMu.Unlock()
	before := a.settings.Get()
	after, err := a.settings.Update(ctx, change)
	if err != nil {
		return after, err
	}
	if a.cfg.ModelsDirFor(before) != a.cfg.ModelsDirFor(after) {
		a.lib.Rescan(ctx) // NPU Chat's models are looked for in the new folder
	}
	if !reflect.DeepEqual(before.MCPServers, after.MCPServers) {
		if err := a.mcp.Update(after.MCPServers); err != nil {
			return after, fmt.Errorf("settings saved, but the MCP servers did not change: %w", err)
		}
	}
	if before.KeepAliveDuration() != after.KeepAliveDuration() {
		a.mgr.SetKeepAlive(after.KeepAliveDuration())
	}
	if engineOf(before) != engineOf(after) {
		if err := a.switchEngine(ctx, engineOf(after)); err != nil {
			return after, fmt.Errorf("settings saved, but the engine did not switch: %w", err)
		}
	}
	return after, nil
}

// engineOf is the engine a settings value names (auto when none; the
// store refuses a name that is not one).
func engineOf(s config.Settings) enginekind.Kind {
	k, err := enginekind.ParseEngine(s.Engine)
	if err != nil {
		return enginekind.Auto
	}
	return k
}

// Engine is the engine setting in effect: one of enginekind.Engines.
func (a *App) Engine() enginekind.Kind { return engineOf(a.settings.Get()) }

// SetEngine changes the engine (the tray's Engine menu, the settings
// window) and saves it. A model that is on or loading is loaded again
// on the new engine.
func (a *App) SetEngine(ctx context.Context, kind enginekind.Kind) error {
	_, err := a.UpdateSettings(ctx, func(s *config.Settings) error { s.Engine = string(kind); return nil })
	return err
}

// switchEngine puts a new engine into effect (UpdateSettings saved it).
func (a *App) switchEngine(ctx context.Context, kind enginekind.Kind) error {
	a.log.Info("engine changed", "engine", kind)
	if kind == enginekind.Remote {
		// What the remote server serves, as at a start on it.
		a.addRemoteModels(ctx)
	}
	st := a.mgr.Status()
	if !st.Enabled || (st.State != service.StateOn && st.State != service.StateLoading) {
		return nil
	}
	if err := a.mgr.Stop(ctx); err != nil {
		return fmt.Errorf("switch to the %s engine: stop the model: %w", kind, err)
	}
	return a.mgr.Start(st.Model)
}

// ServeAtStart reports the "serve at start" setting: whether the tray
// switches the model on when it starts (off by default).
func (a *App) ServeAtStart() bool { return a.settings.Get().ServeAtStart }

// SetServeAtStart changes and saves the "serve at start" setting.
func (a *App) SetServeAtStart(on bool) error {
	_, err := a.UpdateSettings(context.Background(), func(s *config.Settings) error { s.ServeAtStart = on; return nil })
	return err
}

// pageSettings is the app's settings as the web server's settings view
// uses them (web.Settings): every change goes through UpdateSettings.
type pageSettings struct{ a *App }

func (p pageSettings) Get() config.Settings { return p.a.Settings() }

func (p pageSettings) Update(ctx context.Context, change func(*config.Settings) error) (config.Settings, error) {
	return p.a.UpdateSettings(ctx, change)
}

// LaunchAtLogin reports whether NPU Chat starts when the user logs in,
// read from the real entry (the XDG autostart file, the Run registry
// value), not from a remembered setting.
func (a *App) LaunchAtLogin() (bool, error) { return a.login.Enabled() }

// SetLaunchAtLogin adds or removes the launch-at-login entry; the entry
// starts this executable with --hidden.
func (a *App) SetLaunchAtLogin(on bool) error {
	if !on {
		return a.login.Disable()
	}
	exe := a.opts.Executable
	if exe == "" {
		var err error
		if exe, err = os.Executable(); err != nil {
			return fmt.Errorf("launch at login: find this program: %w", err)
		}
	}
	return a.login.Enable(exe)
}

// SettingsDetails is what the page's settings view shows beside the
// settings (web.SettingsDetails): where the hub's endpoint and token
// come from when Settings sets none, the default models folder, the
// address listened on now, and what the KV cache of a context costs.
func (p pageSettings) SettingsDetails(ctx context.Context) web.Details {
	a := p.a
	d := web.Details{Hub: a.cfg.HubFor(config.Settings{}), ModelsDirDefault: a.cfg.DefaultModelsDir, KV: a.kvInfo()}
	if s := a.Server(); s.Listening {
		d.Listening = s.Addr
	}
	return d
}

// Hub is the hub downloads use now: the endpoint and token set in
// Settings, else the environment's (config.Config.HubFor).
func (a *App) Hub() config.Hub { return a.cfg.HubFor(a.settings.Get()) }

// installConfig is the configuration one install runs with: this run's,
// with the hub (endpoint and token) and the models folder of the
// settings now, so that a change in Settings applies to the next
// install without a restart. It is a copy: a.cfg is never written.
func (a *App) installConfig() *config.Config {
	s := a.settings.Get()
	c := *a.cfg
	hub := a.cfg.HubFor(s)
	c.HFEndpoint, c.HFToken = hub.Endpoint, hub.Token.Reveal()
	c.ModelsDir = a.cfg.ModelsDirFor(s)
	c.Settings = s
	return &c
}

// kvInfo is what a context costs in KV memory with the model loaded now
// (exact, from the engine) or else the default model, read from its
// files; nil when neither is known (a model not installed, the NPU's).
func (a *App) kvInfo() *web.KVInfo {
	st := a.mgr.Status()
	model := a.Model()
	if st.Model != "" && st.State == service.StateOn {
		model = st.Model
	}
	typ := a.settings.Get().KVCacheType
	info := &web.KVInfo{Model: model, Block: cpu.KVBlock}
	var size int64
	e, _ := a.lib.Lookup(model)
	path, port := e.Path, e.Port
	if !e.Installed || e.Source == library.SourceRemote {
		path = ""
	}
	shape, err := cpu.ReadKVShape(path)
	if path != "" && err == nil {
		if port.KVReplication > 1 && shape.KVHeads == port.KVHeadsReplicated {
			shape.KVHeads = port.KVHeadsOriginal // the engine folds the port's copies back
		}
		info.Layers, info.KVHeads, info.HeadDim, info.ModelMax = shape.Layers, shape.KVHeads, shape.HeadDim, shape.ContextMax
		info.BytesPerToken, info.KVType = shape.BytesPerToken(typ), shape.KVType(typ)
		info.ByType = map[string]int64{}
		for _, t := range config.KVCacheTypes {
			info.ByType[t] = shape.BytesPerToken(t)
			if k := shape.KVType(t); k != t {
				if info.KeptAs == nil {
					info.KeptAs = map[string]string{}
				}
				info.KeptAs[t] = k
			}
		}
		size = dirSize(path)
	} else if path != "" {
		a.log.Debug("KV shape", "model", model, "err", err)
	}
	loaded := st.State == service.StateOn && st.Model == model && st.Cache != nil && st.Cache.BytesPerToken > 0
	if loaded {
		info.BytesPerToken, info.Loaded, size = st.Cache.BytesPerToken, true, 0
		if st.Cache.KVType != "" {
			info.KVType = st.Cache.KVType
		}
		if st.Info != nil {
			info.Context, info.Parallel = st.Info.ContextLength, st.Info.Parallel
		}
	}
	if info.BytesPerToken <= 0 {
		return nil
	}
	if info.KVType != "" {
		info.ElementBytes = float64(engine.KVTypeBytes32(info.KVType)) / 32
	}
	if free, err := a.memAvailable(); err == nil && free-size > 0 {
		per := info.BytesPerToken
		budget := cpu.DefaultKVBudget(func() (int64, error) { return free - size, nil })
		kvBytes := func(n int) int64 { return int64((n+cpu.KVBlock-1)/cpu.KVBlock*cpu.KVBlock) * per }
		info.Automatic = cpu.DefaultContext(info.ModelMax, kvBytes, budget)
		ctx := a.settings.Get().ContextLength // the context a request is counted at
		if ctx <= 0 {
			ctx = info.Automatic
		}
		if info.ModelMax > 0 {
			ctx = min(ctx, info.ModelMax)
		}
		info.AutoParallel = cpu.AutoParallel(budget, kvBytes, ctx)
	}
	return info
}

// dirSize is the size of a model file, or of the files in a folder
// (what loading it takes from free memory, about).
func dirSize(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	if !fi.IsDir() {
		return fi.Size()
	}
	var n int64
	entries, _ := os.ReadDir(path)
	for _, e := range entries {
		if i, err := e.Info(); err == nil && i.Mode().IsRegular() {
			n += i.Size()
		}
	}
	return n
}
