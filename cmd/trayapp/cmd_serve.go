package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/npuchat/npuchat/config"
	"github.com/npuchat/npuchat/history"
	"github.com/npuchat/npuchat/models"
	"github.com/npuchat/npuchat/service/install"
	"github.com/npuchat/npuchat/web"
)

// runServe implements `npuchat serve`: the API and the chat page, with no
// tray.
func runServe(ctx context.Context, env *Env, args []string) int {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(env.Stderr)
	addr := fs.String("addr", "", "address to listen on (default $NPUCHAT_ADDR or 127.0.0.1:8001)")
	model := fs.String("model", "", "model to serve: a catalog name such as minicpm5:2b, or a GGUF file, Hugging Face folder or FastFlowLM model folder")
	name := fs.String("name", "", "name to serve a --model file or folder under (default: its base name)")
	engine := fs.String("engine", "", "engine: auto, npu, cpu or remote (default $NPUCHAT_ENGINE or auto)")
	remoteURL := fs.String("remote-url", "", "base URL of an OpenAI-compatible server, for --engine remote")
	keepAlive := fs.String("keep-alive", "", "how long an idle model stays loaded, e.g. 5m; -1 keeps it loaded")
	lazy := fs.Bool("lazy", false, "load the model on the first request instead of at start")
	flmRoot := fs.String("flm-root", "", "FastFlowLM folder to use instead of looking for it (a portable copy)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(env.Stderr, "npuchat serve: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	cfg, err := config.Load(env.Getenv, runtime.GOOS)
	if err != nil {
		fmt.Fprintln(env.Stderr, "npuchat serve:", err)
		return 2
	}
	set := func(dst *string, v string) {
		if v != "" {
			*dst = v
		}
	}
	set(&cfg.Addr, *addr)
	set(&cfg.Engine, *engine)
	set(&cfg.RemoteURL, *remoteURL)
	set(&cfg.FLMRoot, *flmRoot)
	if *keepAlive != "" {
		if cfg.KeepAliveDur, err = config.ParseKeepAlive(*keepAlive); err != nil {
			fmt.Fprintln(env.Stderr, "npuchat serve: --keep-alive:", err)
			return 2
		}
	}
	switch cfg.Engine {
	case "auto", "npu", "cpu", "remote":
	default:
		fmt.Fprintf(env.Stderr, "npuchat serve: --engine %q is not one of auto, npu, cpu, remote\n", cfg.Engine)
		return 2
	}
	if cfg.Engine == "remote" && cfg.RemoteURL == "" {
		fmt.Fprintln(env.Stderr, "npuchat serve: --engine remote needs --remote-url (or NPUCHAT_REMOTE_URL), e.g. http://bigbox:8000/v1")
		return 2
	}
	log, closeLog, err := newLogger(env.Stderr, cfg.LogDir, cfg.LogLevel)
	if err != nil {
		fmt.Fprintln(env.Stderr, "npuchat serve: log folder:", err)
		return 1
	}
	defer closeLog()

	localModel := ""
	if *model != "" && looksLikePath(*model) {
		localModel = *model
	} else if *model != "" {
		cfg.Model = *model
	}
	a, err := newApp(cfg, log, env.Getenv, localModel, *name)
	if err != nil {
		fmt.Fprintln(env.Stderr, "npuchat serve:", err)
		return 2
	}
	defer a.close()
	if cfg.Engine == "remote" {
		a.addRemoteModels(ctx)
	}
	hist := history.NewHandle(filepath.Join(cfg.DataDir, "history.db"), history.Options{})
	defer hist.Close()
	installs := install.New(install.Options{NewInstaller: func() (*models.Installer, error) {
		return models.NewInstaller(cfg, models.Options{FLMRoot: cfg.FLMRoot, Getenv: env.Getenv})
	}})
	defer installs.Close()
	srv, err := web.NewServer(a.mgr, web.Options{
		Addr: cfg.Addr, APIKey: cfg.APIKey, Origins: cfg.Origins, Version: version, Logger: log,
		History: hist, Installs: installs, Settings: web.NewSettingsStore(cfg),
		LogFile: filepath.Join(cfg.LogDir, "npuchat.log"),
		CheckNPU: func(ctx context.Context) (any, error) {
			m, err := a.cat.Lookup(cfg.Model)
			size := int64(0)
			if err == nil {
				size = flmSize(m)
			}
			return a.checkNPU(ctx, size)
		},
	})
	if err != nil {
		fmt.Fprintln(env.Stderr, "npuchat serve:", err)
		return 2
	}
	if !*lazy {
		if err := a.mgr.Start(cfg.Model); err != nil {
			log.Warn("model not started", "model", cfg.Model, "err", err)
		}
	}
	err = srv.ListenAndServe(ctx, func(bound string) {
		log.Info("serving", "url", "http://"+bound, "model", cfg.Model, "engine", cfg.Engine, "data", cfg.DataDir)
		fmt.Fprintf(env.Stdout, "NPU Chat is serving on http://%s (model %s, engine %s)\n", bound, cfg.Model, cfg.Engine)
	})
	cctx, cancel := context.WithTimeout(context.Background(), 20e9)
	defer cancel()
	a.mgr.Close(cctx)
	if err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintln(env.Stderr, "npuchat serve:", err)
		return 1
	}
	return 0
}

// looksLikePath tells a file or folder from a model name: names have no
// path separator and no file extension of a model file.
func looksLikePath(s string) bool {
	if strings.ContainsAny(s, `/\`) {
		return true
	}
	l := strings.ToLower(s)
	return strings.HasSuffix(l, ".gguf") || strings.HasSuffix(l, ".q4nx") || s == "." || s == ".."
}

// runDefault runs the tray app, or serve when there is no display. The
// tray arrives in a later issue.
func runDefault(ctx context.Context, env *Env) int {
	return runServe(ctx, env, nil)
}
