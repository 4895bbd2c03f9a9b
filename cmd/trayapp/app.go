package main

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/npuchat/npuchat/config"
	"github.com/npuchat/npuchat/service"
	"github.com/npuchat/npuchat/service/backend"
)

// app is NPU Chat wired together: configuration, the models it can
// serve, and the service that runs them. The serve command and the tray
// both build one.
type app struct {
	cfg *config.Config
	log *slog.Logger
	reg *service.Registry
	mgr *service.Manager
}

// newApp wires the registry and the manager. localModel, when set, is a
// GGUF file, Hugging Face folder or FLM folder served under localName.
func newApp(cfg *config.Config, log *slog.Logger, localModel, localName string) (*app, error) {
	a := &app{cfg: cfg, log: log, reg: &service.Registry{}}
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
