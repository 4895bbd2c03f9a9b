package main

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/npuchat/npuchat/config"
	"github.com/npuchat/npuchat/models"
	"github.com/npuchat/npuchat/models/catalog"
	"github.com/npuchat/npuchat/service"
	"github.com/npuchat/npuchat/service/backend"
	"github.com/npuchat/npuchat/service/cpu"
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
}

// newApp wires the registry and the manager. localModel, when set, is a
// GGUF file, Hugging Face folder or FLM folder served under localName.
func newApp(cfg *config.Config, log *slog.Logger, localModel, localName string) (*app, error) {
	a := &app{cfg: cfg, log: log, reg: &service.Registry{}, local: map[string]string{}}
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
func (a *app) newBackend(model, kind string) (backend.Backend, error) {
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
			opts.Quantization = "Q4_1"
		}
		return cpu.New(opts), nil
	default:
		return nil, fmt.Errorf("%s: the %s engine is not part of this build yet: %w", model, kind, service.ErrNotInstalled)
	}
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
	d := service.ModelDesc{Name: m.Name, Description: m.Description, Family: m.Family, ParameterSize: strings.ToUpper(m.Size)}
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
