package app

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/npuchat/npuchat/engine"
	"github.com/npuchat/npuchat/models"
	"github.com/npuchat/npuchat/models/catalog"
	"github.com/npuchat/npuchat/npu/check"
	"github.com/npuchat/npuchat/npu/flm"
	"github.com/npuchat/npuchat/service"
	"github.com/npuchat/npuchat/service/backend"
	"github.com/npuchat/npuchat/service/backend/oaicompat"
	"github.com/npuchat/npuchat/service/cpu"
)

// ValidEngine reports whether kind is an engine setting (one of
// backend.Engines).
func ValidEngine(kind string) bool {
	_, err := backend.ParseEngine(kind)
	return err == nil && kind != ""
}

// engines lists the backends to try for a model, best first, from the
// engine setting.
func (a *App) engines(model string) []backend.Kind {
	eng := a.Engine()
	if _, ok := a.local.path(model); ok && eng != backend.Remote {
		return []backend.Kind{backend.CPU} // a file on disk: only the in-process engine reads it
	}
	if m, ok := a.flmModel(model); ok && eng != backend.Remote {
		return flmBackendKinds(m, eng)
	}
	if m, err := a.cat.Lookup(model); err == nil && m.Name == model && m.CPUNote() != "" && eng != backend.Remote {
		return []backend.Kind{backend.NPU} // FastFlowLM's model the CPU engine cannot compute
	}
	switch eng {
	case backend.NPU, backend.CPU, backend.Remote:
		return []backend.Kind{eng}
	default:
		return []backend.Kind{backend.NPU, backend.CPU}
	}
}

// capabilities is service.Options.Capabilities: what model will be able
// to do with the engines of the engine setting, read from its files
// without loading it. The NPU (FastFlowLM) adds plain completion only;
// in auto mode the service sends what it cannot do to the CPU engine.
func (a *App) capabilities(model string) []string {
	var caps []string
	for _, kind := range a.engines(model) {
		switch kind {
		case backend.NPU:
			caps = append(caps, flm.Capabilities()...)
		case backend.Remote:
			caps = append(caps, oaicompat.RemoteCapabilities()...)
		case backend.CPU:
			path, ok := a.local.path(model)
			if m, isFLM := a.flmModel(model); isFLM {
				path, ok = m.Dir, true
			}
			if !ok {
				inst, err := models.Locate(a.cfg, model)
				if err != nil {
					continue // not installed: unknown until it is
				}
				path = inst.Dir
			}
			c, err := cpu.Capabilities(path)
			if err != nil {
				a.log.Debug("capabilities", "model", model, "err", err)
				continue
			}
			caps = append(caps, c...)
		}
	}
	return caps
}

// newBackend makes the backend of a kind for a model.
func (a *App) newBackend(ctx context.Context, model string, kind backend.Kind) (backend.Backend, error) {
	switch kind {
	case backend.CPU:
		if m, ok := a.flmModel(model); ok {
			return cpu.New(cpu.Options{Path: m.Dir, Name: model, Threads: a.cfg.Threads, CacheDir: a.engineCache(), MemAvailable: a.memAvailable,
				KVDir: a.kvCache(), Log: a.log, MaxContext: a.settings.Get().ContextLength, Parallel: a.settings.Get().Parallel, KVCacheType: a.settings.Get().KVCacheType, Speculative: engine.Speculative(a.settings.Get().Speculative), ParameterSize: m.Params, Quantization: m.Quant}), nil
		}
		if path, ok := a.local.path(model); ok {
			return cpu.New(cpu.Options{Path: path, Name: model, Threads: a.cfg.Threads, CacheDir: a.engineCache(), MemAvailable: a.memAvailable,
				KVDir: a.kvCache(), Log: a.log, MaxContext: a.settings.Get().ContextLength, Parallel: a.settings.Get().Parallel, KVCacheType: a.settings.Get().KVCacheType, Speculative: engine.Speculative(a.settings.Get().Speculative)}), nil
		}
		inst, err := models.Locate(a.cfg, model)
		if err != nil {
			return nil, notInstalled{err}
		}
		opts := cpu.Options{Path: inst.Dir, Name: model, Threads: a.cfg.Threads, ParameterSize: strings.ToUpper(inst.Model.Size),
			CacheDir: a.engineCache(), MemAvailable: a.memAvailable, KVDir: a.kvCache(), Log: a.log,
			MaxContext: a.settings.Get().ContextLength, Parallel: a.settings.Get().Parallel, KVCacheType: a.settings.Get().KVCacheType, Speculative: engine.Speculative(a.settings.Get().Speculative)}
		if inst.Format == "flm-q4nx" {
			// Compute the original model, not the port's changes.
			opts.SkipQKNorm = inst.Model.Port.InjectedQKNorm
			opts.RopeLayout = engine.RopeLayout(inst.Model.Port.RopeLayout)
			opts.Quantization = "Q4_1"
		}
		return cpu.New(opts), nil
	case backend.NPU:
		return a.newNPUBackend(ctx, model)
	case backend.Remote:
		return oaicompat.New(oaicompat.Options{BaseURL: a.cfg.RemoteURL, APIKey: a.cfg.RemoteKey, Model: model, Kind: backend.Remote})
	default:
		return nil, fmt.Errorf("%s: no %s engine", model, kind)
	}
}

// newNPUBackend makes the FastFlowLM backend, after checking that the
// NPU is ready and FastFlowLM and the model are installed; each "no"
// says what to do, and the service falls back to the CPU with it.
func (a *App) newNPUBackend(ctx context.Context, model string) (backend.Backend, error) {
	if _, ok := a.local.path(model); ok {
		return nil, fmt.Errorf("%s is a local file: only the cpu engine runs those", model)
	}
	if fm, ok := a.flmModel(model); ok {
		return a.newFLMOwnBackend(ctx, fm)
	}
	m, err := a.cat.Lookup(model)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	rep, err := a.checkNPU(ctx, flmSize(m))
	if err != nil {
		return nil, fmt.Errorf("NPU check: %w", err)
	}
	if !rep.Ready {
		return nil, fmt.Errorf("the NPU is not ready (%s); run npuchat check for the fixes", strings.TrimSuffix(rep.Summary, "."))
	}
	in, err := models.NewInstaller(a.cfg, models.Options{FLMRoot: a.cfg.FLMRoot, Getenv: a.opts.Getenv, GOOS: a.opts.GOOS})
	if err != nil {
		return nil, err
	}
	layout, err := in.PrepareFLM(ctx)
	if err != nil {
		return nil, err
	}
	dir := layout.ModelDir(m.FLMName())
	if dir == "" {
		return nil, fmt.Errorf("FastFlowLM's models folder is unknown: %w", layout.ModelsDirErr)
	}
	if _, err := os.Stat(filepath.Join(dir, "model.q4nx")); err != nil {
		return nil, fmt.Errorf("%s is not installed for FastFlowLM; install it from the Models view", model)
	}
	exe := layout.Exe
	if a.opts.FLMExecutable != "" {
		exe = a.opts.FLMExecutable
	}
	be, err := flm.New(flm.Options{
		Executable: exe,
		Model:      m.FLMTag(),
		Env:        layout.ServeEnv(),
		Log:        a.flmLog,
		Info: backend.ModelInfo{Name: model, Family: m.Family, ParameterSize: strings.ToUpper(m.Size), Quantization: "Q4_1",
			Format: "q4nx", Path: dir, ContextLength: flmContext(m)},
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
	if m, err := a.cat.Lookup(a.Model()); err == nil {
		size = flmSize(m)
	}
	return a.checkNPU(ctx, size)
}

// formatOf names a local model's file format from its path.
func formatOf(path string, fi os.FileInfo) string {
	switch {
	case !fi.IsDir() && strings.EqualFold(filepath.Ext(path), ".gguf"):
		return "gguf"
	case !fi.IsDir() && strings.EqualFold(filepath.Ext(path), ".q4nx"):
		return "q4nx"
	case fi.IsDir():
		if _, err := os.Stat(filepath.Join(path, "model.q4nx")); err == nil {
			return "q4nx"
		}
		return "safetensors"
	}
	return ""
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

// describe reports a catalog model as the API lists it.
func (a *App) describe(m *catalog.Model) service.ModelDesc {
	d := service.ModelDesc{Name: m.Name, Description: m.Description, Family: m.Family, ParameterSize: strings.ToUpper(m.Size),
		ContextLength: flmContext(m)}
	inst, err := models.Locate(a.cfg, m.Name)
	if err != nil {
		return d
	}
	d.Installed, d.Path = true, inst.Dir
	switch inst.Format {
	case "flm-q4nx":
		d.Format, d.Quantization = "q4nx", "Q4_1"
	default:
		d.Format = "safetensors"
	}
	for _, w := range inst.Weights {
		if fi, err := os.Stat(filepath.Join(inst.Dir, w)); err == nil {
			d.Size += fi.Size()
			if fi.ModTime().After(d.ModifiedAt) {
				d.ModifiedAt = fi.ModTime()
			}
		}
	}
	return d
}

// notInstalled marks a models error as the service's ErrNotInstalled,
// keeping its message (which says how to install).
type notInstalled struct{ err error }

func (e notInstalled) Error() string   { return e.err.Error() }
func (e notInstalled) Unwrap() []error { return []error{e.err, service.ErrNotInstalled} }

// flmSize is the model's size in bytes from its FastFlowLM entry (what
// FastFlowLM raises memlock by), or 0 when the entry has none.
func flmSize(m *catalog.Model) int64 {
	var e struct {
		Size int64 `json:"size"`
	}
	json.Unmarshal(m.FLM.Entry, &e)
	return e.Size
}

// flmContext is the model's default context length from its FastFlowLM
// entry (0 when absent).
func flmContext(m *catalog.Model) int {
	var e struct {
		Context int `json:"default_context_length"`
	}
	json.Unmarshal(m.FLM.Entry, &e)
	return e.Context
}

// addRemoteModels registers what the remote server serves (for the
// remote engine), so that clients can name those models; the configured
// model is registered even when the server cannot be reached yet.
func (a *App) addRemoteModels(ctx context.Context) {
	names := []string{a.cfg.Model}
	if c, err := oaicompat.New(oaicompat.Options{BaseURL: a.cfg.RemoteURL, APIKey: a.cfg.RemoteKey, Kind: "remote"}); err == nil {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		if ids, err := c.Models(ctx); err == nil {
			names = append(names, ids...)
		} else {
			a.log.Warn("remote server's models", "url", a.cfg.RemoteURL, "err", err)
		}
	}
	for _, n := range names {
		if _, err := a.reg.Resolve(n); err != nil {
			a.reg.Add(service.Entry{Desc: service.ModelDesc{Name: n, Installed: true, Format: "remote"}})
		}
	}
}

// kvCache is the folder of the CPU engine's KV disk cache, beside the
// history: the keys and values of recent prompts, read back when a chat
// is reopened, also after a restart.
func (a *App) kvCache() string { return filepath.Join(a.cfg.DataDir, "kv") }

// engineCache is the folder of NPU Chat's data where the CPU engine
// unpacks a model.q4nx once (never inside FastFlowLM's folders).
func (a *App) engineCache() string { return filepath.Join(a.cfg.DataDir, "cache", "engine") }
