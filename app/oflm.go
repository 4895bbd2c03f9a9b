package app

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/npuchat/npuchat/config"
	"github.com/npuchat/npuchat/enginekind"
	"github.com/npuchat/npuchat/models/library"
	modeloflm "github.com/npuchat/npuchat/models/oflm"
	"github.com/npuchat/npuchat/npu/check"
	"github.com/npuchat/npuchat/npu/oflm"
	"github.com/npuchat/npuchat/service"
	"github.com/npuchat/npuchat/service/backend"
	"github.com/npuchat/npuchat/service/backend/oaicompat"
	"github.com/npuchat/npuchat/service/cpu"
)

// EventPrepare is the service event of a preparation of the weights for
// oflm (PrepareOFLM started from the page): Message says where it is,
// Progress how far model.q4nx is written.
const EventPrepare service.EventKind = "prepare"

// oflmLocator finds oflm as the rest of the app reads the environment:
// PATH is Options.Getenv's.
func (a *App) oflmLocator() oflm.Locator {
	return oflm.Locator{GOOS: a.opts.GOOS, LookPath: oflm.LookPathIn(a.opts.Getenv("PATH"), a.opts.GOOS)}
}

// findOFLM finds the oflm to run: the configured one (--oflm), else as
// oflm.Locator looks.
func (a *App) findOFLM() (oflm.Found, error) {
	return a.oflmLocator().Find(a.opts.Flags.OFLM)
}

// oflmLayout is oflm's folder for the oflm at exe.
func (a *App) oflmLayout(exe string) (oflm.Layout, error) {
	return oflm.NewLayout(a.opts.GOOS, a.opts.Getenv, a.home(), exe)
}

// oflmRoute is library.Options.OFLM: the oflm route of the model oflm
// serves (oflm.Tag) when oflm is found and its prepared folder passes
// the quick check (models/oflm.Prepared; serving verifies in full).
func (a *App) oflmRoute(name string) *library.OFLMRoute {
	if name != oflm.Tag {
		return nil
	}
	found, err := a.findOFLM()
	if err != nil {
		return nil
	}
	l, err := a.oflmLayout(found.Path)
	if err != nil {
		return nil
	}
	dir := l.ModelDir(oflm.Folder)
	if err := modeloflm.Prepared(dir); err != nil {
		return nil
	}
	return &library.OFLMRoute{Exe: found.Path, Dir: dir}
}

// oflmOffer is where the oflm route of a library entry stands, for the
// Models view: nil for a model oflm does not serve, or whose FastFlowLM
// pack (what is converted) is not what is installed.
func (a *App) oflmOffer(ctx context.Context, e library.Entry) *library.OFLMOffer {
	if e.Name != oflm.Tag || (e.OFLM == nil && e.Format != library.FormatFLM) {
		return nil
	}
	if running, msg, frac, _ := a.prep.get(); running {
		return &library.OFLMOffer{State: library.OFLMPreparing, Note: msg, Frac: frac}
	}
	if e.OFLM != nil {
		return &library.OFLMOffer{State: library.OFLMPrepared}
	}
	_, _, _, failed := a.prep.get()
	found, err := a.findOFLM()
	if err != nil {
		return &library.OFLMOffer{State: library.OFLMMissing, Note: err.Error(), Link: oflm.InstallLink}
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	var size int64
	if e.FLM != nil {
		size = e.FLM.Bytes
	}
	r := oflm.Check(ctx, found.Path, check.Options{Root: a.opts.NPUSysroot, Getenv: a.opts.Getenv, ModelBytes: size, XRT: a.opts.XRT})
	if !r.Ready {
		return &library.OFLMOffer{State: library.OFLMNotReady, Note: r.Summary(), Link: oflm.InstallLink}
	}
	if failed != "" {
		return &library.OFLMOffer{State: library.OFLMReady, Note: "The last preparation " + failed}
	}
	return &library.OFLMOffer{State: library.OFLMReady}
}

// prepStatus is where the page's preparation for oflm stands
// (StartPrepareOFLM), for the Models view. Safe for concurrent use.
type prepStatus struct {
	mu      sync.Mutex
	running bool
	msg     string
	frac    float64
	failed  string // the last run's error, "" after a good one
}

// start marks a run begun; false when one runs already.
func (p *prepStatus) start() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.running {
		return false
	}
	p.running, p.msg, p.frac, p.failed = true, "", 0, ""
	return true
}

func (p *prepStatus) set(msg string, pr *backend.Progress) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.msg = msg
	if pr != nil {
		p.frac = pr.Frac
		if pr.Total > 0 {
			p.msg = fmt.Sprintf("%s: %d%% of model.q4nx written", msg, pr.Done*100/pr.Total)
		}
	}
}

func (p *prepStatus) fail(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.failed = "failed: " + err.Error()
}

func (p *prepStatus) stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.running = false
}

func (p *prepStatus) get() (running bool, msg string, frac float64, failed string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.running, p.msg, p.frac, p.failed
}

// newOFLMBackend makes the oflm backend for a model with an oflm route
// (docs/oflm-route.md): oflm ready (its validate and NPU Chat's checks,
// on the recorded machine when one is given), the open kernel set found
// where oflm looks, the prepared folder registered in oflm's user
// registry (held against the kernel set's manifest and verified), and
// `oflm serve` as a supervised child. Each "no" says what to do; the
// service falls back to the CPU with it.
func (a *App) newOFLMBackend(ctx context.Context, e library.Entry) (backend.Backend, error) {
	if e.OFLM == nil {
		return nil, fmt.Errorf("%s is not prepared for oflm: prepare it for the NPU (oflm) in the Models view, or run npuchat prepare-oflm", e.Name)
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	layout, err := a.oflmLayout(e.OFLM.Exe)
	if err != nil {
		return nil, err
	}
	ready := oflm.Check(ctx, e.OFLM.Exe, check.Options{Root: a.opts.NPUSysroot, Getenv: a.opts.Getenv, ModelBytes: library.Size(e.OFLM.Dir), XRT: a.opts.XRT})
	if !ready.Ready {
		return nil, fmt.Errorf("oflm is not ready (%s); run npuchat check for the fixes", strings.TrimSuffix(ready.Summary(), "."))
	}
	ks, err := layout.FindKernels(a.opts.Getenv, e.OFLM.Dir, oflm.Folder)
	if err != nil {
		return nil, fmt.Errorf("oflm's open kernels for %s: %w", oflm.Folder, err)
	}
	quant := "Q4_1"
	reg, err := layout.Register(oflm.Registration{Kernels: ks, OFLMVersion: ready.Version, ParameterSize: e.ParameterSize, Quantization: quant})
	if err != nil {
		return nil, err
	}
	var count oaicompat.Counter
	if c, err := cpu.PromptCounter(e.OFLM.Dir); err == nil {
		count = c
	} else {
		a.log.Warn("the model's tokenizer: chats are fitted to oflm's context by an estimate", "err", err)
	}
	be, err := oflm.New(oflm.Options{
		Executable: e.OFLM.Exe, Env: layout.ServeEnv(ks), ContextLength: reg.ContextLength,
		Count: count, Log: a.oflmLog,
		Info: backend.ModelInfo{Name: e.Name, Family: "llama", ParameterSize: e.ParameterSize, Quantization: quant,
			Format: "q4nx", Path: e.OFLM.Dir},
		OnState: func(ev oflm.Event) { a.log.Info("oflm", "state", ev.State, "pid", ev.PID, "err", ev.Err) },
	})
	if err != nil {
		return nil, err
	}
	a.lastOFLM.Store(be)
	return be, nil
}

// OFLMPID is the process id of the oflm child serving now or last (0
// when none was started), for tests and the logs.
func (a *App) OFLMPID() int {
	if be := a.lastOFLM.Load(); be != nil {
		return be.PID()
	}
	return 0
}

// PrepareOFLM prepares MiniCPM5-2B for oflm: it converts the installed
// FastFlowLM pack (julianmb/MiniCPM5-2B-NPU2) with models/oflm.Convert,
// shaped by the open kernel set's manifest, into oflm's model folder,
// and rescans the library, which then lists the oflm route. progress
// hears model.q4nx's bytes written. Without oflm the error says what is
// missing and where to get it (NPU Chat never downloads it).
func (a *App) PrepareOFLM(ctx context.Context, progress func(done, total int64)) (modeloflm.Result, string, error) {
	found, err := a.findOFLM()
	if err != nil {
		return modeloflm.Result{}, "", fmt.Errorf("prepare %s for the NPU (oflm): %w", oflm.Tag, err)
	}
	e, ok := a.lib.Lookup(oflm.Tag)
	if !ok || !e.Installed || e.Format != library.FormatFLM {
		return modeloflm.Result{}, "", fmt.Errorf("prepare %s for the NPU (oflm): its FastFlowLM pack (%s) is not installed; install it first (npuchat install %s, or Install in the Models view)", oflm.Tag, oflm.Folder, oflm.Tag)
	}
	layout, err := a.oflmLayout(found.Path)
	if err != nil {
		return modeloflm.Result{}, "", fmt.Errorf("prepare %s for the NPU (oflm): %w", oflm.Tag, err)
	}
	dir := layout.ModelDir(oflm.Folder)
	ks, err := layout.FindKernels(a.opts.Getenv, dir, oflm.Folder)
	if err != nil {
		return modeloflm.Result{}, "", fmt.Errorf("prepare %s for the NPU (oflm): oflm's open kernels for %s: %w", oflm.Tag, oflm.Folder, err)
	}
	res, err := modeloflm.Convert(ctx, e.Path, dir, modeloflm.Options{KernelManifest: filepath.Join(ks.Dir, "manifest.json"), Progress: progress})
	if err != nil {
		return res, dir, fmt.Errorf("prepare %s for the NPU (oflm): %w", oflm.Tag, err)
	}
	a.lib.Rescan(ctx)
	return res, dir, nil
}

// errPreparing is StartPrepareOFLM's while a preparation runs.
var errPreparing = errors.New("the weights are being prepared for oflm already; wait for it to finish")

// StartPrepareOFLM runs PrepareOFLM in the background for the page:
// its progress and its end go out as EventPrepare events, and when it
// succeeds the model is switched to the oflm route (the engine setting
// becomes npu unless it already runs oflm first: auto, npu or oflm) and
// started.
func (a *App) StartPrepareOFLM(name string) error {
	if name != oflm.Tag {
		return fmt.Errorf("only %s can be prepared for oflm", oflm.Tag)
	}
	if _, err := a.findOFLM(); err != nil {
		return fmt.Errorf("prepare %s for the NPU (oflm): %w", name, err)
	}
	if e, ok := a.lib.Lookup(name); !ok || !e.Installed || e.Format != library.FormatFLM {
		return fmt.Errorf("prepare %s for the NPU (oflm): its FastFlowLM pack (%s) is not installed; install it first", name, oflm.Folder)
	}
	if !a.prep.start() {
		return errPreparing
	}
	publish := func(msg string, p *backend.Progress) {
		a.prep.set(msg, p)
		a.mgr.Publish(service.Event{Type: EventPrepare, Message: msg, Progress: p})
	}
	publish("preparing "+name+" for the NPU (oflm)", &backend.Progress{Stage: "converting model.q4nx"})
	go func() {
		defer a.prep.stop()
		var last time.Time
		_, dir, err := a.PrepareOFLM(context.Background(), func(done, total int64) {
			if now := time.Now(); done < total && now.Sub(last) < 100*time.Millisecond {
				return
			}
			last = time.Now()
			frac := 0.0
			if total > 0 {
				frac = float64(done) / float64(total)
			}
			publish("preparing "+name+" for the NPU (oflm)", &backend.Progress{Stage: "converting model.q4nx", Done: done, Total: total, Frac: frac})
		})
		if err != nil {
			a.log.Warn("prepare for oflm", "model", name, "err", err)
			publish("failed: "+err.Error(), nil)
			a.prep.fail(err)
			return
		}
		a.log.Info("prepared for oflm", "model", name, "dir", dir)
		if err := a.switchToOFLM(context.Background(), name); err != nil {
			publish("prepared in "+dir+", but switching to it failed: "+err.Error(), nil)
			return
		}
		publish("prepared in "+dir+"; "+name+" runs on the NPU through oflm", nil)
	}()
	return nil
}

// switchToOFLM makes name the model and its engine oflm: the engine
// setting becomes npu unless it puts oflm first already, and the model
// is started (again).
func (a *App) switchToOFLM(ctx context.Context, name string) error {
	switch a.Engine() {
	case enginekind.Auto, enginekind.NPU, enginekind.OFLM:
	default:
		if _, err := a.UpdateSettings(ctx, func(s *config.Settings) error { s.Engine = string(enginekind.NPU); return nil }); err != nil {
			return err
		}
	}
	if st := a.mgr.Status(); st.Model == name && (st.State == service.StateOn || st.State == service.StateLoading) {
		if err := a.mgr.Stop(ctx); err != nil {
			return err
		}
	}
	return a.UseModel(ctx, name)
}
