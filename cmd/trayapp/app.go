package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/npuchat/npuchat/config"
	"github.com/npuchat/npuchat/engine"
	"github.com/npuchat/npuchat/models"
	"github.com/npuchat/npuchat/models/catalog"
	"github.com/npuchat/npuchat/npu/check"
	"github.com/npuchat/npuchat/npu/flm"
	"github.com/npuchat/npuchat/npu/xrt"
	"github.com/npuchat/npuchat/service"
	"github.com/npuchat/npuchat/service/backend"
	"github.com/npuchat/npuchat/service/backend/oaicompat"
	"github.com/npuchat/npuchat/service/cpu"
	"gopkg.in/natefinch/lumberjack.v2"
)

// app is NPU Chat wired together: configuration, the models it can
// serve, and the service that runs them. The serve command and the tray
// both build one.
type app struct {
	cfg *config.Config
	log *slog.Logger
	reg *service.Registry
	mgr *service.Manager
	cat *catalog.Catalog
	// local maps names served from --model paths to those paths.
	local map[string]string
	// getenv reads the environment (for FastFlowLM discovery and XRT).
	getenv func(string) string
	// npuSysroot, when set, is a recorded system tree the NPU check reads
	// instead of this machine (tests; `npuchat check --record` makes one).
	npuSysroot string
	// flmLog receives FastFlowLM's output (logs/flm.log).
	flmLog io.WriteCloser
	// lastNPU is the FastFlowLM backend made last, for its process id.
	lastNPU atomic.Pointer[flm.Backend]
}

// newApp wires the registry and the manager. localModel, when set, is a
// GGUF file, Hugging Face folder or FLM folder served under localName.
func newApp(cfg *config.Config, log *slog.Logger, getenv func(string) string, localModel, localName string) (*app, error) {
	a := &app{cfg: cfg, log: log, reg: &service.Registry{}, local: map[string]string{}, getenv: getenv}
	a.flmLog = &lumberjack.Logger{Filename: filepath.Join(cfg.LogDir, "flm.log"), MaxSize: 10, MaxBackups: 3}
	cat, err := catalog.Load()
	if err != nil {
		return nil, err
	}
	a.cat = cat
	for _, m := range cat.Models {
		a.reg.Add(service.Entry{
			Desc:    service.ModelDesc{Name: m.Name},
			Aliases: []string{m.FLMName()},
			Refresh: func() service.ModelDesc { return a.describe(m) },
		})
	}
	if localModel != "" {
		abs, err := filepath.Abs(localModel)
		if err != nil {
			return nil, err
		}
		fi, err := os.Stat(abs)
		if err != nil {
			return nil, fmt.Errorf("--model %s: %w", localModel, err)
		}
		if localName == "" {
			localName = strings.TrimSuffix(filepath.Base(abs), filepath.Ext(abs))
		}
		a.reg.Add(service.Entry{Desc: service.ModelDesc{
			Name: localName, Installed: true, Path: abs, Size: fi.Size(), ModifiedAt: fi.ModTime(),
			Format: formatOf(abs, fi),
		}})
		cfg.Model = localName
		a.local[localName] = abs
	}
	a.mgr = service.New(service.Options{
		Resolve:    a.reg.Resolve,
		Models:     a.reg.Models,
		Engines:    a.engines,
		NewBackend: a.newBackend,
		QueueSize:  cfg.QueueSize,
		KeepAlive:  cfg.KeepAliveDur,
		Logger:     log,
	})
	return a, nil
}

// engines lists the backends to try for a model, best first, from the
// engine setting.
func (a *app) engines(model string) []string {
	if _, ok := a.local[model]; ok && a.cfg.Engine != "remote" {
		return []string{"cpu"} // a file on disk: only the in-process engine reads it
	}
	switch a.cfg.Engine {
	case "npu":
		return []string{"npu"}
	case "cpu":
		return []string{"cpu"}
	case "remote":
		return []string{"remote"}
	default:
		return []string{"npu", "cpu"}
	}
}

// newBackend makes the backend of a kind for a model.
func (a *app) newBackend(ctx context.Context, model, kind string) (backend.Backend, error) {
	switch kind {
	case "cpu":
		if path, ok := a.local[model]; ok {
			return cpu.New(cpu.Options{Path: path, Name: model, Threads: a.cfg.Threads}), nil
		}
		inst, err := models.Locate(a.cfg, model)
		if err != nil {
			return nil, notInstalled{err}
		}
		opts := cpu.Options{Path: inst.Dir, Name: model, Threads: a.cfg.Threads, ParameterSize: strings.ToUpper(inst.Model.Size)}
		if inst.Format == "flm-q4nx" {
			// Compute the original model, not the port's changes.
			opts.SkipQKNorm = inst.Model.Port.InjectedQKNorm
			opts.RopeLayout = engine.RopeLayout(inst.Model.Port.RopeLayout)
			opts.Quantization = "Q4_1"
		}
		return cpu.New(opts), nil
	case "npu":
		return a.newNPUBackend(ctx, model)
	case "remote":
		return oaicompat.New(oaicompat.Options{BaseURL: a.cfg.RemoteURL, APIKey: a.cfg.RemoteKey, Model: model, Kind: "remote"})
	default:
		return nil, fmt.Errorf("%s: no %s engine", model, kind)
	}
}

// newNPUBackend makes the FastFlowLM backend, after checking that the
// NPU is ready and FastFlowLM and the model are installed; each "no"
// says what to do, and the service falls back to the CPU with it.
func (a *app) newNPUBackend(ctx context.Context, model string) (backend.Backend, error) {
	if _, ok := a.local[model]; ok {
		return nil, fmt.Errorf("%s is a local file: only the cpu engine runs those", model)
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
		return nil, fmt.Errorf("the NPU is not ready (%s); run `npuchat check` for the fixes", strings.TrimSuffix(rep.Summary, "."))
	}
	in, err := models.NewInstaller(a.cfg, models.Options{FLMRoot: a.cfg.FLMRoot, Getenv: a.getenv})
	if err != nil {
		return nil, err
	}
	layout, err := in.PrepareFLM(ctx)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(layout.ModelsDir, m.FLMName(), "model.q4nx")); err != nil {
		return nil, fmt.Errorf("%s is not installed for FastFlowLM; run npuchat install %s", model, model)
	}
	be, err := flm.New(flm.Options{
		Executable: layout.Exe,
		Model:      m.FLMTag(),
		Env:        layout.ServeEnv(),
		Log:        a.flmLog,
		Info: backend.ModelInfo{Name: model, Family: m.Family, ParameterSize: strings.ToUpper(m.Size), Quantization: "Q4_1",
			Format: "q4nx", Path: filepath.Join(layout.ModelsDir, m.FLMName())},
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

// describe reports a catalog model as the API lists it.
func (a *app) describe(m *catalog.Model) service.ModelDesc {
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

// addRemoteModels registers what the remote server serves (for the
// remote engine), so that clients can name those models; the configured
// model is registered even when the server cannot be reached yet.
func (a *app) addRemoteModels(ctx context.Context) {
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

// close releases what the app holds open.
func (a *app) close() { a.flmLog.Close() }

// checkNPU runs the NPU check as `npuchat check` does, for a model of
// modelBytes (0: FastFlowLM's minimum), with XRT probed in a child.
func (a *app) checkNPU(ctx context.Context, modelBytes int64) (*check.Report, error) {
	opts := check.Options{Root: a.npuSysroot, Getenv: a.getenv, ModelBytes: modelBytes}
	// The probe child is this executable; a test binary is not npuchat.
	if exe, err := os.Executable(); err == nil && !testing.Testing() {
		opts.XRT = xrt.ChildProber{Command: []string{exe, "check", "--xrt-probe-child"}}
	}
	return check.Run(ctx, opts)
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
