package app

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/npuchat/npuchat/config"
	"github.com/npuchat/npuchat/engine"
	"github.com/npuchat/npuchat/enginekind"
	"github.com/npuchat/npuchat/models"
	flmfiles "github.com/npuchat/npuchat/models/flm"
	"github.com/npuchat/npuchat/models/library"
	"github.com/npuchat/npuchat/npu/check"
	"github.com/npuchat/npuchat/npu/flm"
	"github.com/npuchat/npuchat/npu/oflm"
	"github.com/npuchat/npuchat/service"
	"github.com/npuchat/npuchat/service/backend"
	"github.com/npuchat/npuchat/service/backend/oaicompat"
	"github.com/npuchat/npuchat/service/cpu"
)

// ValidEngine reports whether kind is an engine setting (one of
// enginekind.Engines).
func ValidEngine(kind string) bool {
	_, err := enginekind.ParseEngine(kind)
	return err == nil && kind != ""
}

// engines lists the backends to try for a model, best first: what can
// run it (its library entry) under the engine setting.
func (a *App) engines(model string) []enginekind.Kind {
	eng := a.Engine()
	if eng == enginekind.Remote {
		return []enginekind.Kind{enginekind.Remote}
	}
	if e, ok := a.lib.Lookup(model); ok {
		return e.EnginesFor(eng)
	}
	if eng == enginekind.Auto {
		return []enginekind.Kind{enginekind.NPU, enginekind.CPU}
	}
	return eng.Routes()
}

// capabilities is service.Options.Capabilities: what model will be able
// to do with the engines of the engine setting, read from its files
// without loading it. The NPU (FastFlowLM) adds plain completion only;
// in auto mode the service sends what it cannot do to the CPU engine.
func (a *App) capabilities(model string) []string {
	e, _ := a.lib.Lookup(model)
	var caps []string
	for _, kind := range a.engines(model) {
		switch kind {
		case enginekind.NPU, enginekind.OFLM:
			caps = append(caps, flm.Capabilities()...)
		case enginekind.Remote:
			caps = append(caps, oaicompat.RemoteCapabilities()...)
		case enginekind.CPU:
			if !e.Installed {
				continue // not installed: unknown until it is
			}
			c, err := cpu.Capabilities(e.Path)
			if err != nil {
				a.log.Debug("capabilities", "model", model, "err", err)
				continue
			}
			caps = append(caps, c...)
		}
	}
	return caps
}

// backendFor is service.Options.NewBackend: the backend of a kind for
// the model's library entry, with the settings in effect now.
func (a *App) backendFor(ctx context.Context, model string, kind enginekind.Kind) (backend.Backend, error) {
	e, err := a.lib.Fresh(ctx, model)
	if err != nil && kind != enginekind.Remote {
		return nil, unknownModel{err}
	}
	if err != nil {
		e = library.Entry{Name: model}
	}
	return a.newBackend(ctx, e, a.settings.Get(), kind)
}

// newBackend makes the backend of a kind for a library entry under the
// settings s. A new kind of engine is one more case here (and its row
// in enginekind).
func (a *App) newBackend(ctx context.Context, e library.Entry, s config.Settings, kind enginekind.Kind) (backend.Backend, error) {
	switch kind {
	case enginekind.CPU:
		if !e.Installed {
			return nil, notInstalled{e.Missing}
		}
		return cpu.New(cpu.Options{Path: e.Path, Name: e.Name, ParameterSize: e.ParameterSize, Quantization: e.Quantization,
			// Compute the original model, not the port's changes.
			SkipQKNorm: e.Port.InjectedQKNorm, RopeLayout: engine.RopeLayout(e.Port.RopeLayout),
			Threads: a.cfg.Threads, CacheDir: a.engineCache(), MemAvailable: a.memAvailable, KVDir: a.kvCache(), Log: a.log,
			MaxContext: s.ContextLength, Parallel: s.Parallel, KVCacheType: s.KVCacheType, Speculative: engine.Speculative(s.Speculative)}), nil
	case enginekind.NPU:
		return a.newNPUBackend(ctx, e)
	case enginekind.OFLM:
		return a.newOFLMBackend(ctx, e)
	case enginekind.Remote:
		return oaicompat.New(oaicompat.Options{BaseURL: s.RemoteURL, APIKey: s.RemoteKey, Model: e.Name, Kind: enginekind.Remote})
	default:
		return nil, fmt.Errorf("%s: no %s engine", e.Name, kind)
	}
}

// newNPUBackend makes the FastFlowLM backend, after checking that the
// NPU is ready and FastFlowLM and the model are installed; each "no"
// says what to do, and the service falls back to the CPU with it.
func (a *App) newNPUBackend(ctx context.Context, e library.Entry) (backend.Backend, error) {
	if e.FLM == nil {
		return nil, fmt.Errorf("%s is a local file: only the cpu engine runs those", e.Name)
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	rep, err := a.checkNPU(ctx, e.FLM.Bytes)
	if err != nil {
		return nil, fmt.Errorf("NPU check: %w", err)
	}
	if !rep.Ready {
		return nil, fmt.Errorf("the NPU is not ready (%s); run npuchat check for the fixes", strings.TrimSuffix(rep.Summary, "."))
	}
	// FastFlowLM's own models are served with its own list; NPU Chat's
	// with the list NPU Chat registers them in (PrepareFLM writes it).
	var layout *flmfiles.Layout
	if e.FLM.OwnList {
		layout = a.flmLayout(ctx)
		if layout == nil || layout.Exe == "" {
			return nil, errors.New("FastFlowLM is not installed")
		}
	} else {
		in, err := models.NewInstaller(a.cfg, models.Options{FLMRoot: a.cfg.FLMRoot, Getenv: a.opts.Getenv, GOOS: a.opts.GOOS})
		if err != nil {
			return nil, err
		}
		if layout, err = in.PrepareFLM(ctx); err != nil {
			return nil, err
		}
	}
	dir := layout.ModelDir(e.FLM.Folder)
	if dir == "" {
		return nil, fmt.Errorf("FastFlowLM's models folder is unknown: %w", layout.ModelsDirErr)
	}
	if _, err := os.Stat(filepath.Join(dir, "model.q4nx")); err != nil {
		return nil, fmt.Errorf("%s is not installed for FastFlowLM; install it from the Models view", e.Name)
	}
	exe := layout.Exe
	if a.opts.FLMExecutable != "" {
		exe = a.opts.FLMExecutable
	}
	var env []string
	if !e.FLM.OwnList {
		env = layout.ServeEnv()
	}
	quant := e.Quantization
	if quant == "" {
		quant = "Q4_1"
	}
	be, err := flm.New(flm.Options{
		Executable: exe,
		Model:      e.FLM.Tag,
		Env:        env,
		Log:        a.flmLog,
		Info: backend.ModelInfo{Name: e.Name, Family: e.Family, ParameterSize: e.ParameterSize, Quantization: quant,
			Format: "q4nx", Path: dir, ContextLength: e.ContextLength},
		Count: a.flmCounter(dir),
		OnState: func(ev flm.Event) {
			a.log.Info("FastFlowLM", "state", ev.State, "pid", ev.PID, "attempt", ev.Attempt, "err", ev.Err)
		},
	})
	if err != nil {
		return nil, err
	}
	a.lastNPU.Store(be)
	return be, nil
}

// flmCounter counts a chat's tokens with the tokenizer and chat template
// in an FLM model's folder, for the NPU backend to fit a long chat into
// FastFlowLM's context; nil (an estimate from the text) when they cannot
// be read.
func (a *App) flmCounter(dir string) oaicompat.Counter {
	count, err := cpu.PromptCounter(dir)
	if err != nil {
		a.log.Warn("the model's tokenizer: chats are fitted to FastFlowLM's context by an estimate", "err", err)
		return nil
	}
	return count
}

// FastFlowLMPID is the process id of the FastFlowLM child serving now or
// last (0 when none was started), for tests and the logs.
func (a *App) FastFlowLMPID() int {
	if be := a.lastNPU.Load(); be != nil {
		return be.PID()
	}
	return 0
}

// checkNPU runs the NPU check as `npuchat check` does, for a model of
// modelBytes (0: FastFlowLM's minimum).
func (a *App) checkNPU(ctx context.Context, modelBytes int64) (*check.Report, error) {
	return check.Run(ctx, check.Options{Root: a.opts.NPUSysroot, Getenv: a.opts.Getenv, ModelBytes: modelBytes, XRT: a.opts.XRT})
}

// CheckNPU runs the NPU check for the configured model (the report of
// `npuchat check`, the tray's "Check NPU…" and GET /api/check).
func (a *App) CheckNPU(ctx context.Context) (*check.Report, error) {
	size := int64(0)
	if e, ok := a.lib.Lookup(a.Model()); ok && e.FLM != nil {
		size = e.FLM.Bytes
	}
	rep, err := a.checkNPU(ctx, size)
	if err != nil {
		return nil, err
	}
	// Which NPU route serves which models: oflm for MiniCPM5-2B (its
	// readiness with the model's size, 2 GB as its registry entry
	// says), FastFlowLM for its own.
	_, _, route := oflm.Probe(ctx, a.oflmLocator(), a.opts.Flags.OFLM,
		check.Options{Root: a.opts.NPUSysroot, Getenv: a.opts.Getenv, ModelBytes: 2e9, XRT: a.opts.XRT})
	exe := ""
	if l := a.flmLayout(ctx); l != nil {
		exe = l.Exe
	}
	rep.Routes = append(rep.Routes, route, check.FLMRoute(exe, rep))
	return rep, nil
}

// LooksLikePath tells a file or folder from a model name: names have no
// path separator and no file extension of a model file.
func LooksLikePath(s string) bool {
	if strings.ContainsAny(s, `/\`) {
		return true
	}
	l := strings.ToLower(s)
	return strings.HasSuffix(l, ".gguf") || strings.HasSuffix(l, ".q4nx") || s == "." || s == ".."
}

// notInstalled marks a models error as the service's ErrNotInstalled,
// keeping its message (which says how to install).
type notInstalled struct{ err error }

func (e notInstalled) Error() string   { return e.err.Error() }
func (e notInstalled) Unwrap() []error { return []error{e.err, service.ErrNotInstalled} }

// addRemoteModels lists what the remote server serves (for the remote
// engine) in the library, so that clients can name those models; the
// configured model is listed even when the server cannot be reached yet.
func (a *App) addRemoteModels(ctx context.Context) {
	s := a.settings.Get()
	names := []string{a.Model()}
	if c, err := oaicompat.New(oaicompat.Options{BaseURL: s.RemoteURL, APIKey: s.RemoteKey, Kind: enginekind.Remote}); err == nil {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		if ids, err := c.Models(ctx); err == nil {
			names = append(names, ids...)
		} else {
			a.log.Warn("remote server's models", "url", s.RemoteURL, "err", err)
		}
	}
	a.lib.SetRemote(ctx, s.RemoteURL, names)
}

// kvCache is the folder of the CPU engine's KV disk cache, beside the
// history: the keys and values of recent prompts, read back when a chat
// is reopened, also after a restart.
func (a *App) kvCache() string { return filepath.Join(a.cfg.DataDir, "kv") }

// engineCache is the folder of NPU Chat's data where the CPU engine
// unpacks a model.q4nx once (never inside FastFlowLM's folders).
func (a *App) engineCache() string { return filepath.Join(a.cfg.DataDir, "cache", "engine") }
