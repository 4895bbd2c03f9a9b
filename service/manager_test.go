package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/npuchat/npuchat/enginekind"
	"github.com/npuchat/npuchat/eventbus/eventbustest"
	"github.com/npuchat/npuchat/service/backend"
	"github.com/npuchat/npuchat/service/backend/fake"
	"github.com/npuchat/npuchat/service/install"
)

// rig is a Manager over fake backends, one per kind.
type rig struct {
	m     *Manager
	mu    sync.Mutex
	fakes map[string][]*fake.Backend // every backend made, by kind
	opts  map[string]fake.Options
	made  map[string]int
}

func newRig(t *testing.T, engines []string, kinds map[string]fake.Options, mo Options) *rig {
	t.Helper()
	r := &rig{fakes: map[string][]*fake.Backend{}, opts: kinds, made: map[string]int{}}
	// Two models, as the model library resolves them: by name, alias
	// or family.
	names := map[string]string{"minicpm5:2b": "minicpm5:2b", "minicpm5-2b-npu2": "minicpm5:2b", "minicpm5": "minicpm5:2b",
		"other:1b": "other:1b", "other": "other:1b"}
	mo.Resolve = func(name string) (string, error) {
		if n, ok := names[strings.ToLower(strings.TrimSpace(name))]; ok {
			return n, nil
		}
		return "", fmt.Errorf("model %q: %w; available: minicpm5:2b, other:1b", name, ErrUnknownModel)
	}
	mo.Models = func() []ModelDesc {
		return []ModelDesc{{Name: "minicpm5:2b", Installed: true}, {Name: "other:1b", Installed: true}}
	}
	mo.Engines = func(string) []enginekind.Kind {
		ks := make([]enginekind.Kind, len(engines))
		for i, e := range engines {
			ks[i] = enginekind.Kind(e)
		}
		return ks
	}
	mo.NewBackend = func(_ context.Context, model string, kind enginekind.Kind) (backend.Backend, error) {
		o, ok := r.opts[string(kind)]
		if !ok {
			return nil, fmt.Errorf("no %s engine: %w", kind, ErrNotInstalled)
		}
		o.Kind = kind
		o.Name = model
		b := fake.New(o)
		r.mu.Lock()
		r.fakes[string(kind)] = append(r.fakes[string(kind)], b)
		r.mu.Unlock()
		return b, nil
	}
	illegal := &illegalTransitions{}
	if mo.Logger == nil {
		mo.Logger = slog.New(illegal)
	}
	r.m = New(mo)
	t.Cleanup(func() {
		r.m.Close(context.Background())
		if msgs := illegal.seen(); len(msgs) > 0 {
			t.Errorf("the state machine took transitions its table does not have: %v", msgs)
		}
	})
	return r
}

// illegalTransitions is a log handler that collects the manager's
// "illegal state transition" errors, so that every test of the manager
// also checks the state machine against its table.
type illegalTransitions struct {
	mu   sync.Mutex
	msgs []string
}

func (h *illegalTransitions) Enabled(context.Context, slog.Level) bool { return true }
func (h *illegalTransitions) Handle(_ context.Context, r slog.Record) error {
	if strings.Contains(r.Message, "illegal state transition") {
		var sb strings.Builder
		r.Attrs(func(a slog.Attr) bool { fmt.Fprintf(&sb, "%s=%v ", a.Key, a.Value); return true })
		h.mu.Lock()
		h.msgs = append(h.msgs, sb.String())
		h.mu.Unlock()
	}
	return nil
}
func (h *illegalTransitions) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *illegalTransitions) WithGroup(string) slog.Handler      { return h }
func (h *illegalTransitions) seen() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.msgs...)
}

func (r *rig) backends(kind string) []*fake.Backend {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*fake.Backend(nil), r.fakes[kind]...)
}

func chat(model, text string) *backend.Request {
	return &backend.Request{Model: model, Messages: []backend.Message{{Role: "user", Content: text}}}
}

func collect(t *testing.T, m *Manager, req *backend.Request) (string, backend.Result, error) {
	t.Helper()
	var sb strings.Builder
	res, err := m.Generate(context.Background(), req, GenerateOptions{}, func(tok backend.Token) error {
		sb.WriteString(tok.Text)
		return nil
	})
	return sb.String(), res, err
}

// waitFor polls cond until it holds; after a minute (a bound on a
// failure, not a measure) it fails saying what was awaited.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(time.Minute)
	for !cond() {
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("waited a minute for %s", what)
		}
	}
}

// returns runs f and fails the test when f has not returned within a
// minute: it waits for something that never comes (the minute bounds a
// failure; nothing is timed). f must not call t.Fatal.
func returns(t *testing.T, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatalf("%s never returned", what)
	}
}

func TestGenerateLoadsOnFirstRequestAndPublishesStates(t *testing.T) {
	r := newRig(t, []string{"cpu"}, map[string]fake.Options{"cpu": {}}, Options{KeepAlive: -1})
	events, cancel := r.m.Subscribe()
	defer cancel()
	text, res, err := collect(t, r.m, chat("MiniCPM5-2B-NPU2", "hello there"))
	if err != nil {
		t.Fatal(err)
	}
	if text != "echo: hello there" || res.Backend != "cpu" || res.FinishReason != backend.FinishStop {
		t.Fatalf("got %q %+v", text, res)
	}
	st := r.m.Status()
	if st.State != StateOn || st.Model != "minicpm5:2b" || st.Backend != "cpu" || st.Stats.Requests != 1 {
		t.Fatalf("status %+v", st)
	}
	var states []State
	for len(states) < 3 {
		select {
		case ev := <-events:
			if ev.Type == "status" && (len(states) == 0 || states[len(states)-1] != ev.Status.State) {
				states = append(states, ev.Status.State)
			}
		case <-time.After(time.Minute):
			t.Fatalf("states so far %v", states)
		}
	}
	if fmt.Sprint(states) != "[off loading on]" {
		t.Fatalf("states %v, want [off loading on]", states)
	}
}

func TestUnknownModel(t *testing.T) {
	r := newRig(t, []string{"cpu"}, map[string]fake.Options{"cpu": {}}, Options{})
	_, _, err := collect(t, r.m, chat("llama9:70b", "hi"))
	if !errors.Is(err, ErrUnknownModel) || !strings.Contains(err.Error(), "minicpm5:2b") {
		t.Fatalf("err = %v; want ErrUnknownModel listing the available models", err)
	}
}

func TestOneGenerationAtATimeAndQueueFull(t *testing.T) {
	// Every answer holds before its tokens until the gate opens, so one
	// runs and two wait for as long as the test looks.
	gate := make(chan struct{})
	hold := func(ctx context.Context) error {
		select {
		case <-gate:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	r := newRig(t, []string{"cpu"}, map[string]fake.Options{"cpu": {BeforeToken: hold}}, Options{QueueSize: 2, KeepAlive: -1})
	if err := r.m.Load(context.Background(), "minicpm5:2b", GenerateOptions{}); err != nil {
		t.Fatal(err)
	}
	const n = 6
	errs := make(chan error, n)
	start := func() {
		go func() {
			_, _, err := collect(t, r.m, chat("minicpm5:2b", "one two three four five"))
			errs <- err
		}()
	}
	start()
	waitFor(t, "the first request to run", func() bool { return r.m.Status().Running == 1 })
	start()
	start()
	waitFor(t, "two requests to wait", func() bool { return r.m.Status().Waiting == 2 })
	// The queue is full: the next three are refused while the others hold.
	for i := range 3 {
		start()
		select {
		case err := <-errs:
			if !errors.Is(err, ErrQueueFull) {
				t.Fatalf("request %d with the queue full: err = %v, want ErrQueueFull", 4+i, err)
			}
		case <-time.After(time.Minute):
			t.Fatalf("request %d was not refused with the queue full", 4+i)
		}
	}
	close(gate)
	for range 3 {
		if err := <-errs; err != nil {
			t.Fatalf("a queued request failed: %v", err)
		}
	}
	if _, _, maxc := r.backends("cpu")[0].Counts(); maxc != 1 {
		t.Fatalf("%d generations ran at once", maxc)
	}
}

func TestCancelWhileQueuedLeavesTheQueue(t *testing.T) {
	r := newRig(t, []string{"cpu"}, map[string]fake.Options{"cpu": {TokenDelay: 30 * time.Millisecond}}, Options{QueueSize: 1, KeepAlive: -1})
	go collect(t, r.m, chat("minicpm5:2b", "a b c d e f g h"))
	waitFor(t, "running", func() bool { return r.m.Status().Running == 1 })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() {
		_, err := r.m.Generate(ctx, chat("minicpm5:2b", "x"), GenerateOptions{}, func(backend.Token) error { return nil })
		done <- err
	}()
	waitFor(t, "queued", func() bool { return r.m.Status().Waiting == 1 })
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v", err)
	}
	if w := r.m.Status().Waiting; w != 0 {
		t.Fatalf("waiting = %d after cancel", w)
	}
}

func TestCancelStopsGenerationWithinOneToken(t *testing.T) {
	r := newRig(t, []string{"cpu"}, map[string]fake.Options{"cpu": {TokenDelay: 10 * time.Millisecond}}, Options{KeepAlive: -1})
	ctx, cancel := context.WithCancel(context.Background())
	tokens := 0
	_, err := r.m.Generate(ctx, chat("minicpm5:2b", strings.Repeat("word ", 500)), GenerateOptions{}, func(backend.Token) error {
		tokens++
		if tokens == 3 {
			cancel()
		}
		return nil
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v", err)
	}
	if tokens != 3 {
		t.Fatalf("%d tokens emitted after cancelling at the 3rd", tokens)
	}
}

// TestKeepAliveUnloadsIdleModelAndReloads runs on synctest's clock: the
// model is still on a moment before its keep-alive ends and off at its
// end, whatever the machine's load.
func TestKeepAliveUnloadsIdleModelAndReloads(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, []string{"cpu"}, map[string]fake.Options{"cpu": {}}, Options{KeepAlive: 50 * time.Millisecond})
		if _, _, err := collect(t, r.m, chat("minicpm5:2b", "hi")); err != nil {
			t.Fatal(err)
		}
		if st := r.m.Status(); st.ExpiresAt == nil || !st.ExpiresAt.Equal(time.Now().Add(50*time.Millisecond)) {
			t.Fatalf("expiry %v, want 50ms from the end of the request (%v)", st.ExpiresAt, time.Now())
		}
		time.Sleep(50*time.Millisecond - time.Nanosecond)
		synctest.Wait()
		if st := r.m.Status(); st.State != StateOn {
			t.Fatalf("unloaded before the keep-alive ended: %+v", st)
		}
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		if st := r.m.Status(); st.State != StateOff || !strings.Contains(st.Reason, "idle") || !st.Enabled {
			t.Fatalf("status once the keep-alive ended: %+v", st)
		}
		if _, _, err := collect(t, r.m, chat("minicpm5:2b", "again")); err != nil {
			t.Fatal(err)
		}
		if n := len(r.backends("cpu")); n != 2 {
			t.Fatalf("%d backends made, want a reload (2)", n)
		}
	})
}

func TestPerRequestKeepAlive(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, []string{"cpu"}, map[string]fake.Options{"cpu": {}}, Options{KeepAlive: time.Hour})
		zero := time.Duration(0)
		_, err := r.m.Generate(context.Background(), chat("minicpm5:2b", "hi"), GenerateOptions{KeepAlive: &zero}, func(backend.Token) error { return nil })
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait() // the idle timer of keep_alive 0 has fired
		if st := r.m.Status(); st.State != StateOff {
			t.Fatalf("keep_alive 0 left the model %s", st.State)
		}
		never := time.Duration(-1)
		if err := r.m.Load(context.Background(), "minicpm5:2b", GenerateOptions{KeepAlive: &never}); err != nil {
			t.Fatal(err)
		}
		if st := r.m.Status(); st.State != StateOn || st.ExpiresAt != nil {
			t.Fatalf("keep_alive -1 should keep it loaded with no expiry: %+v", st)
		}
	})
}

func TestStopCancelsAndRefusesUntilStart(t *testing.T) {
	r := newRig(t, []string{"cpu"}, map[string]fake.Options{"cpu": {TokenDelay: 10 * time.Millisecond}}, Options{KeepAlive: -1})
	done := make(chan error)
	go func() {
		_, _, err := collect(t, r.m, chat("minicpm5:2b", strings.Repeat("w ", 1000)))
		done <- err
	}()
	waitFor(t, "running", func() bool { return r.m.Status().Running == 1 })
	if err := r.m.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, ErrModelOff) {
		t.Fatalf("running request got %v, want ErrModelOff", err)
	}
	st := r.m.Status()
	if st.State != StateOff || st.Enabled || r.backends("cpu")[0].Loaded() {
		t.Fatalf("after stop: %+v", st)
	}
	if _, _, err := collect(t, r.m, chat("minicpm5:2b", "hi")); !errors.Is(err, ErrModelOff) {
		t.Fatalf("request while off: %v", err)
	}
	if err := r.m.Start(""); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "on after start", func() bool { return r.m.Status().State == StateOn })
	if text, _, err := collect(t, r.m, chat("minicpm5:2b", "back")); err != nil || text != "echo: back" {
		t.Fatalf("%q %v", text, err)
	}
}

func TestStopDuringLoadAbandonsIt(t *testing.T) {
	// A load that ends only when its context does: Stop returns only if
	// it abandons the load.
	r := newRig(t, []string{"cpu"}, map[string]fake.Options{"cpu": {LoadDelay: 24 * time.Hour}}, Options{KeepAlive: -1})
	if err := r.m.Start("minicpm5:2b"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "loading", func() bool { return r.m.Status().State == StateLoading })
	var err error
	returns(t, "Stop during a load", func() { err = r.m.Stop(context.Background()) })
	if err != nil {
		t.Fatal(err)
	}
	if st := r.m.Status(); st.State != StateOff || r.backends("cpu")[0].Loaded() {
		t.Fatalf("after stop during load: %+v", st)
	}
}

func TestFallbackWhenDeviceFailsBeforeFirstToken(t *testing.T) {
	ert := fmt.Errorf("flm: runlist failed execution (ERT_CMD_STATE_TIMEOUT): %w", backend.ErrDeviceFailed)
	r := newRig(t, []string{"npu", "cpu"}, map[string]fake.Options{
		"npu": {FailErr: ert, FailAfter: 0},
		"cpu": {},
	}, Options{KeepAlive: -1})
	events, cancel := r.m.Subscribe()
	defer cancel()
	text, res, err := collect(t, r.m, chat("minicpm5:2b", "hello"))
	if err != nil {
		t.Fatal(err)
	}
	if text != "echo: hello" || res.Backend != "cpu" {
		t.Fatalf("got %q from %q; want the CPU to answer", text, res.Backend)
	}
	st := r.m.Status()
	if st.Backend != "cpu" || !strings.Contains(st.Fallback, "ERT_CMD_STATE_TIMEOUT") {
		t.Fatalf("status %+v", st)
	}
	if r.backends("npu")[0].Loaded() {
		t.Fatal("the failed NPU backend is still loaded")
	}
	eventbustest.Expect(t, events, eventbustest.Is("a fallback event naming ERT_CMD_STATE_TIMEOUT", func(ev Event) bool {
		return ev.Type == EventFallback && strings.Contains(ev.Message, "ERT_CMD_STATE_TIMEOUT")
	}))
	// The next request stays on the CPU and does not retry the NPU.
	if _, res, err := collect(t, r.m, chat("minicpm5:2b", "again")); err != nil || res.Backend != "cpu" {
		t.Fatalf("%+v %v", res, err)
	}
	if n := len(r.backends("npu")); n != 1 {
		t.Fatalf("NPU backend made %d times", n)
	}
}

func TestFallbackMidAnswerReportsAndSwitches(t *testing.T) {
	crash := fmt.Errorf("flm exited: %w", backend.ErrDeviceFailed)
	r := newRig(t, []string{"npu", "cpu"}, map[string]fake.Options{
		"npu": {FailErr: crash, FailAfter: 2},
		"cpu": {},
	}, Options{KeepAlive: -1})
	text, _, err := collect(t, r.m, chat("minicpm5:2b", "one two three four"))
	if !errors.Is(err, backend.ErrDeviceFailed) || !strings.Contains(err.Error(), "after 2 tokens") {
		t.Fatalf("err = %v", err)
	}
	if text != "echo: one " {
		t.Fatalf("emitted %q before the failure", text)
	}
	if _, res, err := collect(t, r.m, chat("minicpm5:2b", "again")); err != nil || res.Backend != "cpu" {
		t.Fatalf("next request: %+v %v", res, err)
	}
}

func TestFallbackWhenLoadFails(t *testing.T) {
	r := newRig(t, []string{"npu", "cpu"}, map[string]fake.Options{
		"npu": {LoadErr: errors.New("flm serve exited: No such device with index '0'")},
		"cpu": {},
	}, Options{KeepAlive: -1})
	_, res, err := collect(t, r.m, chat("minicpm5:2b", "hi"))
	if err != nil || res.Backend != "cpu" {
		t.Fatalf("%+v %v", res, err)
	}
	if st := r.m.Status(); !strings.Contains(st.Fallback, "No such device") {
		t.Fatalf("fallback reason missing: %+v", st)
	}
}

func TestNotInstalledLeavesModelOffWithReason(t *testing.T) {
	r := newRig(t, []string{"npu", "cpu"}, map[string]fake.Options{}, Options{})
	_, _, err := collect(t, r.m, chat("minicpm5:2b", "hi"))
	if !errors.Is(err, ErrNotInstalled) {
		t.Fatalf("err = %v", err)
	}
	st := r.m.Status()
	if st.State != StateOff || !strings.Contains(st.Reason, "no cpu engine") || st.Fallback != "" {
		t.Fatalf("status %+v", st)
	}
	// Asking again gives the same answer (not a stale "failed" one), and
	// once installed the model loads.
	if _, _, err := collect(t, r.m, chat("minicpm5:2b", "hi")); !errors.Is(err, ErrNotInstalled) {
		t.Fatalf("second request: %v", err)
	}
	r.mu.Lock()
	r.opts["cpu"] = fake.Options{}
	r.mu.Unlock()
	if _, res, err := collect(t, r.m, chat("minicpm5:2b", "hi")); err != nil || res.Backend != "cpu" {
		t.Fatalf("after install: %+v %v", res, err)
	}
}

func TestLoadErrorIsErrorState(t *testing.T) {
	r := newRig(t, []string{"cpu"}, map[string]fake.Options{"cpu": {LoadErr: errors.New("model.q4nx: truncated")}}, Options{})
	if err := r.m.Start("minicpm5:2b"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "error state", func() bool { return r.m.Status().State == StateError })
	if st := r.m.Status(); !strings.Contains(st.Error, "truncated") {
		t.Fatalf("status %+v", st)
	}
}

func TestSwitchingModelsUnloadsThePrevious(t *testing.T) {
	r := newRig(t, []string{"cpu"}, map[string]fake.Options{"cpu": {}}, Options{KeepAlive: -1})
	if _, _, err := collect(t, r.m, chat("minicpm5:2b", "a")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := collect(t, r.m, chat("other", "b")); err != nil {
		t.Fatal(err)
	}
	b := r.backends("cpu")
	if len(b) != 2 || b[0].Loaded() || !b[1].Loaded() || r.m.Status().Model != "other:1b" {
		t.Fatalf("after switching: %d backends, first loaded %v, status %+v", len(b), b[0].Loaded(), r.m.Status())
	}
}

func TestSubscribersDoNotBlockTheService(t *testing.T) {
	r := newRig(t, []string{"cpu"}, map[string]fake.Options{"cpu": {}}, Options{KeepAlive: -1})
	_, cancel := r.m.Subscribe() // never read
	defer cancel()
	for i := 0; i < 200; i++ {
		if _, _, err := collect(t, r.m, chat("minicpm5:2b", "hi")); err != nil {
			t.Fatal(err)
		}
	}
}

// slowUnload calls entered when its Unload begins, then holds it until
// release is closed.
type slowUnload struct {
	*fake.Backend
	entered func()
	release chan struct{}
}

func (s slowUnload) Unload(ctx context.Context) error {
	s.entered()
	<-s.release
	return s.Backend.Unload(ctx)
}

// TestStatusDoesNotWaitForASlowUnload: stopping FastFlowLM can take
// seconds; the tray and the page must still get the status meanwhile.
func TestStatusDoesNotWaitForASlowUnload(t *testing.T) {
	r := newRig(t, []string{"cpu"}, map[string]fake.Options{"cpu": {}}, Options{KeepAlive: -1})
	inUnload, release := make(chan struct{}), make(chan struct{})
	r.m.opts.NewBackend = func(_ context.Context, model string, kind enginekind.Kind) (backend.Backend, error) {
		return slowUnload{fake.New(fake.Options{Name: model}), sync.OnceFunc(func() { close(inUnload) }), release}, nil
	}
	if _, _, err := collect(t, r.m, chat("minicpm5:2b", "hi")); err != nil {
		t.Fatal(err)
	}
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		r.m.Stop(context.Background())
	}()
	defer func() { close(release); <-stopped }()
	select {
	case <-inUnload: // Stop is now inside the backend's Unload, held there
	case <-time.After(time.Minute):
		t.Fatal("Stop never unloaded the backend")
	}
	var st Status
	returns(t, "Status while the backend unloads", func() { st = r.m.Status() })
	if st.State != StateOff {
		t.Fatalf("state %s while unloading", st.State)
	}
}

// Review findings, kept as tests.

func TestStartAnotherModelWhileOnLoadsIt(t *testing.T) {
	r := newRig(t, []string{"cpu"}, map[string]fake.Options{"cpu": {}}, Options{KeepAlive: -1})
	if _, _, err := collect(t, r.m, chat("minicpm5:2b", "a")); err != nil {
		t.Fatal(err)
	}
	if err := r.m.Start("other:1b"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "other on", func() bool {
		st := r.m.Status()
		return st.State == StateOn && st.Info != nil && st.Info.Name == "other:1b"
	})
	if _, _, err := collect(t, r.m, chat("other:1b", "b")); err != nil {
		t.Fatal(err)
	}
	b := r.backends("cpu")
	if len(b) != 2 || b[0].Loaded() || len(b[1].Requests()) != 1 || b[1].Requests()[0].Model != "other:1b" {
		t.Fatalf("%d backends; the first still loaded: %v", len(b), len(b) > 0 && b[0].Loaded())
	}
}

func TestStartWithATypoChangesNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, []string{"cpu"}, map[string]fake.Options{"cpu": {}}, Options{KeepAlive: 100 * time.Millisecond})
		if _, _, err := collect(t, r.m, chat("minicpm5:2b", "a")); err != nil {
			t.Fatal(err)
		}
		if err := r.m.Start("nosuch"); !errors.Is(err, ErrUnknownModel) {
			t.Fatalf("err = %v", err)
		}
		if st := r.m.Status(); st.State != StateOn || st.Model != "minicpm5:2b" {
			t.Fatalf("status after a typo: %+v", st)
		}
		time.Sleep(100 * time.Millisecond) // synctest's clock: the keep-alive ends
		synctest.Wait()
		if r.backends("cpu")[0].Loaded() {
			t.Fatal("the idle unload did not happen after the typo")
		}
	})
}

func TestClientLeavingDuringLoadIsNotAnError(t *testing.T) {
	r := newRig(t, []string{"cpu"}, map[string]fake.Options{"cpu": {LoadDelay: 300 * time.Millisecond}}, Options{KeepAlive: -1})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() {
		_, err := r.m.Generate(ctx, chat("minicpm5:2b", "hi"), GenerateOptions{}, func(backend.Token) error { return nil })
		done <- err
	}()
	waitFor(t, "loading", func() bool { return r.m.Status().State == StateLoading })
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v", err)
	}
	// The load finished for the next request.
	if st := r.m.Status(); st.State != StateOn {
		t.Fatalf("state %s (%s) after the client left during the load", st.State, st.Error)
	}
}

// slowLoad ignores its context while loading, as a load that cannot be
// interrupted: it waits until release is closed; done (when not nil) is
// closed once Load has returned.
type slowLoad struct {
	*fake.Backend
	release, done chan struct{}
}

func (s slowLoad) Load(ctx context.Context, p func(backend.Progress)) error {
	if s.done != nil {
		defer close(s.done)
	}
	<-s.release
	return s.Backend.Load(context.Background(), p)
}

func TestStopThatTimesOutStillEndsOff(t *testing.T) {
	r := newRig(t, []string{"cpu"}, map[string]fake.Options{"cpu": {}}, Options{KeepAlive: -1})
	var made []*fake.Backend
	var mu sync.Mutex
	loadEnded, releaseLoad := make(chan struct{}), make(chan struct{})
	r.m.opts.NewBackend = func(_ context.Context, model string, kind enginekind.Kind) (backend.Backend, error) {
		b := fake.New(fake.Options{Name: model})
		mu.Lock()
		defer mu.Unlock()
		made = append(made, b)
		if len(made) > 1 {
			return b, nil // a second load is a failure, reported below
		}
		return slowLoad{b, releaseLoad, loadEnded}, nil
	}
	r.m.Start("minicpm5:2b")
	waitFor(t, "loading", func() bool { return r.m.Status().State == StateLoading })
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := r.m.Stop(ctx); err != nil {
		t.Fatalf("stop: %v", err)
	}
	if st := r.m.Status(); st.State != StateOff || st.Enabled {
		t.Fatalf("right after a stop that could not wait: %+v", st)
	}
	close(releaseLoad) // the load that could not be interrupted ends now
	select {
	case <-loadEnded:
	case <-time.After(time.Minute):
		t.Fatal("the abandoned load never ended")
	}
	// the load completed after the stop: the manager unloads what it loaded
	mu.Lock()
	b := made[0]
	mu.Unlock()
	waitFor(t, "the abandoned backend to be unloaded", func() bool { l, u, _ := b.Counts(); return l == 1 && u == 1 })
	mu.Lock()
	defer mu.Unlock()
	if st := r.m.Status(); st.State != StateOff || len(made) != 1 || made[0].Loaded() {
		t.Fatalf("after the abandoned load ended: %+v, %d backends made, loaded %v", st, len(made), made[0].Loaded())
	}
}

// TestStopWhileAnAnswerIsStuckIsConsistent (issue 13, item 6): a stop
// that cannot wait for a stuck answer (a client that stopped reading)
// leaves no contradiction: at once the status says off and disabled,
// and the backend is unloaded as soon as the answer ends; Start then
// works.
func TestStopWhileAnAnswerIsStuckIsConsistent(t *testing.T) {
	r := newRig(t, []string{"cpu"}, map[string]fake.Options{"cpu": {}}, Options{KeepAlive: -1})
	unblock := make(chan struct{})
	done := make(chan error)
	go func() {
		_, err := r.m.Generate(context.Background(), chat("minicpm5:2b", "a b c"), GenerateOptions{}, func(backend.Token) error {
			<-unblock // a write to a client that does not read
			return nil
		})
		done <- err
	}()
	waitFor(t, "running", func() bool { return r.m.Status().Running == 1 })
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := r.m.Stop(ctx); err != nil {
		t.Fatalf("stop: %v", err)
	}
	if st := r.m.Status(); st.State != StateOff || st.Enabled {
		t.Fatalf("status contradicts the stop: state %s enabled %v", st.State, st.Enabled)
	}
	if !r.backends("cpu")[0].Loaded() {
		t.Fatal("unloaded while its Generate was still running")
	}
	close(unblock)
	if err := <-done; !errors.Is(err, ErrModelOff) {
		t.Fatalf("the stuck answer ended with %v, want ErrModelOff", err)
	}
	waitFor(t, "unloaded when the answer ended", func() bool { return !r.backends("cpu")[0].Loaded() })
	if err := r.m.Start(""); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "on again", func() bool { return r.m.Status().State == StateOn })
	if text, _, err := collect(t, r.m, chat("minicpm5:2b", "back")); err != nil || text != "echo: back" {
		t.Fatalf("%q %v", text, err)
	}
}

// TestPublishSharesTheBusButNotTheStateKinds: the install runner's
// events reach the same subscribers, stamped with the status; the kinds
// that describe the model's state are the manager's alone.
func TestPublishSharesTheBusButNotTheStateKinds(t *testing.T) {
	r := newRig(t, []string{"cpu"}, map[string]fake.Options{"cpu": {}}, Options{KeepAlive: -1})
	events, cancel := r.m.Subscribe()
	defer cancel()
	<-events // the current status
	p := install.Status{Model: "minicpm5:2b", State: install.StateRunning, Phase: "download", OverallBytes: 10, OverallTotal: 100}
	if err := r.m.Publish(Event{Type: EventInstall, Message: "downloading", Install: &p}); err != nil {
		t.Fatal(err)
	}
	ev := <-events
	if ev.Type != EventInstall || ev.Install == nil || ev.Install.OverallBytes != 10 || ev.Status.State != StateOff || ev.Time.IsZero() {
		t.Fatalf("event %+v", ev)
	}
	for _, k := range []EventKind{EventStatus, EventProgress, EventFallback, EventError, ""} {
		if err := r.m.Publish(Event{Type: k}); err == nil {
			t.Errorf("publishing a %q event from outside was allowed", k)
		}
	}
}

// TestStateTable: the transitions allowed are exactly the rows of the
// table in Manager's doc comment, which is read from manager.go, so the
// two cannot drift apart.
func TestStateTable(t *testing.T) {
	src, err := os.ReadFile("manager.go")
	if err != nil {
		t.Fatal(err)
	}
	doc := map[[2]State]bool{}
	in := false
	for _, line := range strings.Split(string(src), "\n") {
		f := strings.Fields(strings.TrimPrefix(line, "//"))
		if len(f) >= 3 && f[0] == "from" && f[1] == "to" && f[2] == "when" {
			in = true
			continue
		}
		if !in {
			continue
		}
		if !strings.HasPrefix(line, "//\t") || len(f) == 0 {
			break // the table's end
		}
		if len(f) < 3 || !strings.HasPrefix(line, "//\t"+f[0]) {
			continue // a "when" column continued on the next line
		}
		doc[[2]State{State(f[0]), State(f[1])}] = true
	}
	if len(doc) < 5 {
		t.Fatalf("read %d rows of the table from manager.go: %v", len(doc), doc)
	}
	all := []State{StateOff, StateLoading, StateOn, StateError}
	for _, from := range all {
		for _, to := range all {
			if want := doc[[2]State{from, to}]; allowed(from, to) != want {
				t.Errorf("allowed(%s, %s) = %v, the table in the doc comment says %v", from, to, !want, want)
			}
		}
	}
}

func TestOneRequestsKeepAliveIsNotTheDefault(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, []string{"cpu"}, map[string]fake.Options{"cpu": {}}, Options{KeepAlive: time.Hour})
		zero := time.Duration(0)
		if _, err := r.m.Generate(context.Background(), chat("minicpm5:2b", "hi"), GenerateOptions{KeepAlive: &zero}, func(backend.Token) error { return nil }); err != nil {
			t.Fatal(err)
		}
		synctest.Wait() // the idle timer of keep_alive 0 has fired
		if st := r.m.Status(); st.State != StateOff {
			t.Fatalf("keep_alive 0 left the model %s", st.State)
		}
		if _, _, err := collect(t, r.m, chat("minicpm5:2b", "no keep_alive")); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if st := r.m.Status(); st.State != StateOn || st.ExpiresAt == nil || !st.ExpiresAt.Equal(time.Now().Add(time.Hour)) {
			t.Fatalf("the default keep-alive (1h) was not used: %+v", st)
		}
	})
}

func TestLoadFailureOfTheOnlyEngineIsRetriedAndNotAFallback(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, []string{"cpu"}, map[string]fake.Options{"cpu": {}}, Options{KeepAlive: -1})
		n := 0
		r.m.opts.NewBackend = func(_ context.Context, model string, kind enginekind.Kind) (backend.Backend, error) {
			if n++; n == 1 {
				return fake.New(fake.Options{Name: model, LoadErr: errors.New("file busy")}), nil
			}
			return fake.New(fake.Options{Name: model}), nil
		}
		events, cancel := r.m.Subscribe()
		defer cancel()
		if _, _, err := collect(t, r.m, chat("minicpm5:2b", "a")); err == nil || !strings.Contains(err.Error(), "file busy") {
			t.Fatalf("first: %v", err)
		}
		if _, _, err := collect(t, r.m, chat("minicpm5:2b", "b")); err != nil {
			t.Fatalf("the second request did not retry the load: %v", err)
		}
		if st := r.m.Status(); st.Fallback != "" {
			t.Fatalf("fallback %q with one engine", st.Fallback)
		}
		for _, ev := range drain(events) {
			if ev.Type == "fallback" {
				t.Fatalf("fallback event with one engine: %s", ev.Message)
			}
		}
	})
}

func TestUnloadNamesTheModel(t *testing.T) {
	r := newRig(t, []string{"cpu"}, map[string]fake.Options{"cpu": {}}, Options{KeepAlive: -1})
	if _, _, err := collect(t, r.m, chat("minicpm5:2b", "a")); err != nil {
		t.Fatal(err)
	}
	if err := r.m.Unload(context.Background(), "other:1b"); err != nil {
		t.Fatal(err)
	}
	if r.m.Status().State != StateOn {
		t.Fatal("unloading another model unloaded the loaded one")
	}
	if err := r.m.Unload(context.Background(), "MiniCPM5-2B-NPU2"); err != nil || r.m.Status().State != StateOff {
		t.Fatalf("unload by alias: %v %s", err, r.m.Status().State)
	}
}

// panicking is a backend whose Generate panics (the web layer recovers).
type panicking struct{ *fake.Backend }

func (p panicking) Generate(context.Context, *backend.Request, func(backend.Token) error) (backend.Result, error) {
	panic("backend bug")
}

func TestPanickingBackendLeavesNothingRunning(t *testing.T) {
	r := newRig(t, []string{"cpu"}, map[string]fake.Options{"cpu": {}}, Options{KeepAlive: -1})
	r.m.opts.NewBackend = func(_ context.Context, model string, kind enginekind.Kind) (backend.Backend, error) {
		return panicking{fake.New(fake.Options{Name: model})}, nil
	}
	func() {
		defer func() { recover() }()
		collect(t, r.m, chat("minicpm5:2b", "a"))
	}()
	if st := r.m.Status(); st.Running != 0 || st.Waiting != 0 {
		t.Fatalf("after a panic: running %d waiting %d", st.Running, st.Waiting)
	}
	// The slot was released too (the minute bounds a failure).
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := r.m.Unload(ctx, ""); err != nil {
		t.Fatalf("slot still held: %v", err)
	}
}

func TestNPUCheckPhaseShowsLoadingAndStopEndsIt(t *testing.T) {
	r := newRig(t, []string{"npu", "cpu"}, map[string]fake.Options{"cpu": {}}, Options{KeepAlive: -1})
	r.m.opts.NewBackend = func(ctx context.Context, model string, kind enginekind.Kind) (backend.Backend, error) {
		if kind == "npu" {
			<-ctx.Done() // a slow NPU check that honours its context
			return nil, ctx.Err()
		}
		return fake.New(fake.Options{Name: model}), nil
	}
	r.m.Start("minicpm5:2b")
	waitFor(t, "loading while the NPU is checked", func() bool { return r.m.Status().State == StateLoading })
	// The check ends only when its context does: Stop returns only if it
	// cancels the check.
	var err error
	returns(t, "Stop during the NPU check", func() { err = r.m.Stop(context.Background()) })
	if err != nil {
		t.Fatal(err)
	}
	if st := r.m.Status().State; st != StateOff {
		t.Fatalf("state %s after the stop", st)
	}
}

// TestReserveHoldsAPlaceBeforeTheBody (issue 13, item 4): the web layer
// reserves a place before it reads a body; a full queue refuses at once,
// a released ticket gives its place back, and a used one is counted once.
func TestReserveHoldsAPlaceBeforeTheBody(t *testing.T) {
	r := newRig(t, []string{"cpu"}, map[string]fake.Options{"cpu": {}}, Options{KeepAlive: -1, QueueSize: 2})
	a, err := r.m.Reserve()
	if err != nil {
		t.Fatal(err)
	}
	b, err := r.m.Reserve()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.m.Reserve(); !errors.Is(err, ErrQueueFull) {
		t.Fatalf("third reserve: %v", err)
	}
	if st := r.m.Status(); st.Waiting != 2 {
		t.Fatalf("waiting %d", st.Waiting)
	}
	a.Release()
	a.Release() // twice is once
	if _, err := r.m.Generate(context.Background(), chat("minicpm5:2b", "x"), GenerateOptions{Ticket: b}, func(backend.Token) error { return nil }); err != nil {
		t.Fatal(err)
	}
	b.Release() // after use: a no-op
	if st := r.m.Status(); st.Waiting != 0 || st.Running != 0 {
		t.Fatalf("after: waiting %d running %d", st.Waiting, st.Running)
	}
	if _, err := r.m.Generate(context.Background(), chat("minicpm5:2b", "x"), GenerateOptions{Ticket: b}, func(backend.Token) error { return nil }); err == nil {
		t.Fatal("a ticket was used twice")
	}
}

// TestRefusedRequestKeepsTheKeepAlive: a request that reserved a place
// and never ran (its model is unknown, its body bad) gives the idle
// timer back, so the model still unloads after keep-alive.
func TestRefusedRequestKeepsTheKeepAlive(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, []string{"cpu"}, map[string]fake.Options{"cpu": {}}, Options{KeepAlive: 200 * time.Millisecond})
		if _, _, err := collect(t, r.m, chat("minicpm5:2b", "hi")); err != nil {
			t.Fatal(err)
		}
		ticket, err := r.m.Reserve()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.m.Generate(context.Background(), chat("no-such-model", "x"), GenerateOptions{Ticket: ticket}, func(backend.Token) error { return nil }); !errors.Is(err, ErrUnknownModel) {
			t.Fatalf("unknown model: %v", err)
		}
		ticket.Release()
		// synctest's clock: on until the first request's keep-alive ends,
		// off then.
		time.Sleep(200*time.Millisecond - time.Nanosecond)
		synctest.Wait()
		if st := r.m.Status(); st.State != StateOn {
			t.Fatalf("unloaded before the keep-alive ended: %s", st.State)
		}
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		if st := r.m.Status(); st.State != StateOff {
			t.Fatalf("no idle unload after a refused request: %s", st.State)
		}
	})
}

// TestStartWithNoNameStartsTheDefaultModel: the tray's and the page's
// switch send no name; before any request the default model is the one
// started, and it is named in the status while off.
func TestStartWithNoNameStartsTheDefaultModel(t *testing.T) {
	m := New(Options{DefaultModel: "m", KeepAlive: -1, NewBackend: func(ctx context.Context, model string, kind enginekind.Kind) (backend.Backend, error) {
		return fake.New(fake.Options{Name: model}), nil
	}})
	defer m.Close(context.Background())
	if err := m.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if st := m.Status(); st.Model != "m" || st.Enabled {
		t.Fatalf("off at start: %+v", st)
	}
	if err := m.Start(""); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the default model on", func() bool { return m.Status().State == StateOn })
	if st := m.Status(); st.Model != "m" {
		t.Fatalf("on: %+v", st)
	}
	none := New(Options{})
	defer none.Close(context.Background())
	none.Stop(context.Background())
	if err := none.Start(""); !errors.Is(err, ErrUnknownModel) {
		t.Fatalf("Start(\"\") with no model: %v", err)
	}
	if st := none.Status(); st.Enabled {
		t.Fatalf("a failed Start switched the model on: %+v", st)
	}
}

// TestCloseUnloadsWhatAStuckAnswerHolds: at exit, a backend that Stop
// set aside for a stuck answer is unloaded anyway, within Close's ctx.
func TestCloseUnloadsWhatAStuckAnswerHolds(t *testing.T) {
	r := newRig(t, []string{"cpu"}, map[string]fake.Options{"cpu": {}}, Options{KeepAlive: -1})
	unblock := make(chan struct{})
	defer close(unblock)
	go r.m.Generate(context.Background(), chat("minicpm5:2b", "a b"), GenerateOptions{}, func(backend.Token) error {
		<-unblock
		return nil
	})
	waitFor(t, "running", func() bool { return r.m.Status().Running == 1 })
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	r.m.Close(ctx)
	if r.backends("cpu")[0].Loaded() {
		t.Fatal("the backend is still loaded after Close")
	}
}

// chattyLoad reports progress a thousand times, as an engine reporting
// every tensor does.
type chattyLoad struct{ *fake.Backend }

func (c chattyLoad) Load(ctx context.Context, p func(backend.Progress)) error {
	for i := 0; i < 1000; i++ {
		p(backend.Progress{Stage: "unpacking", Frac: float64(i) / 1000})
	}
	return c.Backend.Load(ctx, p)
}

// TestSlowSubscriberAlwaysSeesTheLastState: a subscriber that reads
// nothing while a load floods progress still finds the state change to
// "on" as its last event (the page and the tray follow events).
func TestSlowSubscriberAlwaysSeesTheLastState(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, []string{"cpu"}, map[string]fake.Options{"cpu": {}}, Options{KeepAlive: -1})
		r.m.opts.NewBackend = func(_ context.Context, model string, kind enginekind.Kind) (backend.Backend, error) {
			return chattyLoad{fake.New(fake.Options{Name: model})}, nil
		}
		events, cancel := r.m.Subscribe()
		defer cancel()
		if err := r.m.Start("minicpm5:2b"); err != nil {
			t.Fatal(err)
		}
		got := drain(events)
		if st := r.m.Status().State; st != StateOn {
			t.Fatalf("state %s once the start has settled, want on", st)
		}
		n := len(got)
		last := got[n-1]
		if last.Type != EventStatus || last.Status.State != StateOn {
			t.Fatalf("the last of %d buffered events is %s with state %s, want the status 'on'", n, last.Type, last.Status.State)
		}
	})
}

// TestRequestTheNPUCannotDoGoesToTheCPU: in auto mode on a working NPU,
// a request with tools, a JSON format or logprobs (which FastFlowLM
// cannot do) is answered by the CPU engine loaded beside it, says why,
// and the NPU keeps serving the rest.
func TestRequestTheNPUCannotDoGoesToTheCPU(t *testing.T) {
	all := []string{backend.CapCompletion, backend.CapTools, backend.CapJSON, backend.CapLogprobs}
	for _, tc := range []struct {
		name string
		req  func(*backend.Request)
		want string // in the reason
	}{
		{"tools", func(r *backend.Request) { r.Tools = []backend.Tool{{Name: "get_weather"}} }, "tool calling"},
		{"format", func(r *backend.Request) { r.Format = &backend.Format{Type: backend.FormatJSON} }, "structured output"},
		{"logprobs", func(r *backend.Request) { r.Logprobs = true }, "log-probabilities"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, []string{"npu", "cpu"}, map[string]fake.Options{
				"npu": {}, "cpu": {Capabilities: all},
			}, Options{KeepAlive: -1})
			if _, res, err := collect(t, r.m, chat("minicpm5:2b", "plain")); err != nil || res.Backend != "npu" {
				t.Fatalf("plain request: %+v %v; want the NPU", res, err)
			}
			req := chat("minicpm5:2b", "special")
			tc.req(req)
			var ranOn, ranWhy string
			res, err := r.m.Generate(context.Background(), req, GenerateOptions{OnRun: func(kind enginekind.Kind, why string) { ranOn, ranWhy = string(kind), why }},
				func(backend.Token) error { return nil })
			if err != nil {
				t.Fatalf("request with %s: %v; want the CPU to answer it", tc.name, err)
			}
			if res.Backend != "cpu" || ranOn != "cpu" {
				t.Fatalf("answered by %q (OnRun %q); want cpu", res.Backend, ranOn)
			}
			for _, why := range []string{res.Fallback, ranWhy} {
				if !strings.Contains(why, tc.want) || !strings.Contains(why, "npu") {
					t.Fatalf("reason %q does not say the NPU cannot do %s", why, tc.want)
				}
			}
			st := r.m.Status()
			if st.State != StateOn || st.Backend != "npu" || st.Fallback != "" || st.Beside != "cpu" || !strings.Contains(st.BesideReason, tc.want) {
				t.Fatalf("status %+v; want the NPU serving, the CPU beside it and why", st)
			}
			if !r.backends("npu")[0].Loaded() {
				t.Fatal("the NPU backend was unloaded for the CPU's request")
			}
			// The next plain request is the NPU's again, and the CPU stays
			// loaded for the next special one (made once).
			if _, res, err := collect(t, r.m, chat("minicpm5:2b", "plain again")); err != nil || res.Backend != "npu" || res.Fallback != "" {
				t.Fatalf("plain request after: %+v %v; want the NPU", res, err)
			}
			if _, res, err := collect(t, r.m, req); err != nil || res.Backend != "cpu" {
				t.Fatalf("second special request: %+v %v", res, err)
			}
			if n := len(r.backends("cpu")); n != 1 {
				t.Fatalf("CPU backend made %d times; want once", n)
			}
			// Switching off unloads both.
			if err := r.m.Stop(context.Background()); err != nil {
				t.Fatal(err)
			}
			waitFor(t, "both unloaded", func() bool { return !r.backends("npu")[0].Loaded() && !r.backends("cpu")[0].Loaded() })
			if st := r.m.Status(); st.Beside != "" {
				t.Fatalf("status after Stop still has a backend beside: %+v", st)
			}
		})
	}
}

// TestRequestTheNPUCannotDoWhenTheCPUCannotLoadBeside: when the CPU
// engine may not be loaded beside the NPU (not enough memory), the
// request gets a clear error naming the feature and the reason, and the
// NPU keeps serving.
func TestRequestTheNPUCannotDoWhenTheCPUCannotLoadBeside(t *testing.T) {
	r := newRig(t, []string{"npu", "cpu"}, map[string]fake.Options{
		"npu": {}, "cpu": {Capabilities: []string{backend.CapCompletion, backend.CapTools}},
	}, Options{KeepAlive: -1, Beside: func(model string, kind enginekind.Kind) error {
		return errors.New("it needs about 2.1 GB of memory and 0.8 GB is free")
	}})
	req := chat("minicpm5:2b", "call")
	req.Tools = []backend.Tool{{Name: "get_weather"}}
	_, _, err := collect(t, r.m, req)
	var ue *backend.UnsupportedError
	if !errors.As(err, &ue) || ue.Param != "tools" {
		t.Fatalf("error %v; want an unsupported \"tools\" error", err)
	}
	for _, want := range []string{"tool calling", "0.8 GB is free", "cpu"} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("error %q does not say %q", err, want)
		}
	}
	if n := len(r.backends("cpu")); n != 0 {
		t.Fatalf("the CPU backend was made %d times; want none", n)
	}
	if st := r.m.Status(); st.State != StateOn || st.Backend != "npu" {
		t.Fatalf("status %+v; want the NPU still on", st)
	}
}

// TestRequestTheOnlyEngineCannotDoIsRefused: with the NPU engine chosen
// (no CPU to go to), FastFlowLM's refusal stands.
func TestRequestTheOnlyEngineCannotDoIsRefused(t *testing.T) {
	r := newRig(t, []string{"npu"}, map[string]fake.Options{"npu": {}}, Options{KeepAlive: -1})
	req := chat("minicpm5:2b", "call")
	req.Logprobs = true
	_, res, err := collect(t, r.m, req)
	if !errors.Is(err, backend.ErrBadRequest) || res.Backend == "cpu" {
		t.Fatalf("%+v %v; want the NPU's 400", res, err)
	}
}

// drain reads every event sent to events so far, including those still
// waiting for room in its channel. It runs in a synctest bubble: once
// every goroutine in it is blocked (synctest.Wait), no event is on its
// way any more.
func drain(events <-chan Event) []Event {
	var out []Event
	for {
		synctest.Wait()
		select {
		case ev, ok := <-events:
			if !ok {
				return out
			}
			out = append(out, ev)
		default:
			return out
		}
	}
}

// TestSlowSubscriberGetsEveryInstallOutcome: a subscriber that reads
// nothing while an install floods progress (and the model changes
// state) still gets the install's end, after its progress, for every
// install; progress may be coalesced.
func TestSlowSubscriberGetsEveryInstallOutcome(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, []string{"cpu"}, map[string]fake.Options{"cpu": {}}, Options{KeepAlive: -1})
		events, cancel := r.m.Subscribe()
		defer cancel()
		other, cancelOther := r.m.Subscribe() // reads as it goes
		defer cancelOther()
		var seenOther []Event
		readOther := func() { seenOther = append(seenOther, drain(other)...) }
		for i, outcome := range []install.State{install.StateFailed, install.StateCancelled, install.StateDone} {
			model := fmt.Sprintf("model%d", i)
			for n := 0; n < 300; n++ {
				p := install.Status{Model: model, State: install.StateRunning, Phase: "download", OverallBytes: int64(n), OverallTotal: 300}
				if err := r.m.Publish(Event{Type: EventInstall, Install: &p}); err != nil {
					t.Fatal(err)
				}
				if n%100 == 0 {
					if _, _, err := collect(t, r.m, chat("minicpm5:2b", "hi")); err != nil { // state changes meanwhile
						t.Fatal(err)
					}
					r.m.Unload(context.Background(), "")
				}
			}
			p := install.Status{Model: model, State: outcome}
			if err := r.m.Publish(Event{Type: EventInstall, Install: &p}); err != nil {
				t.Fatal(err)
			}
			readOther()
		}
		for name, got := range map[string][]Event{"slow": drain(events), "reading": seenOther} {
			ends := map[string]install.State{}
			for _, ev := range got {
				if ev.Type != EventInstall {
					continue
				}
				if end, ok := ends[ev.Install.Model]; ok {
					t.Fatalf("%s subscriber: %s event for %s after its %s", name, ev.Install.State, ev.Install.Model, end)
				}
				if ev.Install.State.Ended() {
					ends[ev.Install.Model] = ev.Install.State
				}
			}
			want := map[string]install.State{"model0": install.StateFailed, "model1": install.StateCancelled, "model2": install.StateDone}
			if fmt.Sprint(ends) != fmt.Sprint(want) {
				t.Fatalf("%s subscriber got install outcomes %v, want %v (of %d events)", name, ends, want, len(got))
			}
			if last := got[len(got)-1]; last.Status.State != r.m.Status().State {
				t.Fatalf("%s subscriber: last event's state %s, want %s", name, last.Status.State, r.m.Status().State)
			}
		}
	})
}

// TestCapabilitiesAreTheSameBeforeAndAfterLoading: /api/show's list
// comes from the model's files before it loads and stays the same once
// it is served, on the NPU (the CPU engine beside it does the rest) or
// on the CPU.
func TestCapabilitiesAreTheSameBeforeAndAfterLoading(t *testing.T) {
	all := []string{backend.CapCompletion, backend.CapTools, backend.CapJSON, backend.CapLogprobs}
	predicted := func(string) []string {
		return []string{backend.CapLogprobs, backend.CapCompletion, backend.CapJSON, backend.CapTools}
	}
	for _, tc := range []struct {
		name    string
		engines []string
		opts    Options
		before  []string
	}{
		{"predicted, npu then cpu", []string{"npu", "cpu"}, Options{Capabilities: predicted}, all},
		{"nothing known before", []string{"npu", "cpu"}, Options{}, []string{backend.CapCompletion}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.opts.KeepAlive = -1
			r := newRig(t, tc.engines, map[string]fake.Options{"npu": {}, "cpu": {Capabilities: all}}, tc.opts)
			if got := r.m.Capabilities("minicpm5:2b"); !slices.Equal(got, tc.before) {
				t.Fatalf("before loading: %v, want %v", got, tc.before)
			}
			if _, res, err := collect(t, r.m, chat("minicpm5:2b", "hi")); err != nil || res.Backend != "npu" {
				t.Fatalf("%+v %v", res, err)
			}
			if got := r.m.Capabilities("minicpm5:2b"); !slices.Equal(got, tc.before) {
				t.Fatalf("on the NPU: %v, want %v", got, tc.before)
			}
			req := chat("minicpm5:2b", "call")
			req.Tools = []backend.Tool{{Name: "f"}}
			if _, res, err := collect(t, r.m, req); err != nil || res.Backend != "cpu" {
				t.Fatalf("%+v %v", res, err)
			}
			if got := r.m.Capabilities("minicpm5:2b"); !slices.Equal(got, all) {
				t.Fatalf("with the CPU beside: %v, want %v", got, all)
			}
			if got := r.m.Capabilities("other:1b"); !slices.Equal(got, tc.before) {
				t.Fatalf("another model: %v, want %v", got, tc.before)
			}
		})
	}
}

// TestSetKeepAliveIsTheOneDefault: the keep-alive pushed in with
// SetKeepAlive is the one Start, a request naming none and the idle
// timer read: "never" set before a Start leaves the model with no
// unload time, set while it is on and idle clears the one armed, and a
// short one set while it is on unloads it.
func TestSetKeepAliveIsTheOneDefault(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, []string{"cpu"}, map[string]fake.Options{"cpu": {}}, Options{KeepAlive: 5 * time.Minute})
		r.m.SetKeepAlive(-1)
		if got := r.m.KeepAlive(); got != -1 {
			t.Fatalf("KeepAlive() = %v after SetKeepAlive(-1)", got)
		}
		if err := r.m.Start("minicpm5:2b"); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "on", func() bool { return r.m.Status().State == StateOn })
		if st := r.m.Status(); st.ExpiresAt != nil {
			t.Fatalf("keep-alive never, Start armed an unload at %v", st.ExpiresAt)
		}
		r.m.SetKeepAlive(time.Hour)
		if _, _, err := collect(t, r.m, chat("minicpm5:2b", "hi")); err != nil {
			t.Fatal(err)
		}
		st := r.m.Status()
		if st.ExpiresAt == nil || !st.ExpiresAt.Equal(time.Now().Add(time.Hour)) {
			t.Fatalf("after a request with keep-alive 1h: expires %v", st.ExpiresAt)
		}
		r.m.SetKeepAlive(-1)
		if st := r.m.Status(); st.ExpiresAt != nil {
			t.Fatalf("keep-alive set to never while on: still unloads at %v", st.ExpiresAt)
		}
		r.m.SetKeepAlive(30 * time.Millisecond)
		time.Sleep(30 * time.Millisecond) // synctest's clock
		synctest.Wait()
		if st := r.m.Status(); !strings.Contains(st.Reason, "30ms idle") {
			t.Fatalf("reason %q, want the new keep-alive named", st.Reason)
		}
	})
}

// TestWarmCacheWhileLoading: a chat opened while the model loads (the
// app just started) is warmed once the backend is loaded; one deleted
// meanwhile is not; one opened when it is loaded is warmed at once.
func TestWarmCacheWhileLoading(t *testing.T) {
	r := newRig(t, []string{"cpu"}, map[string]fake.Options{"cpu": {LoadDelay: 200 * time.Millisecond}}, Options{KeepAlive: -1})
	if err := r.m.Start("minicpm5:2b"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "loading", func() bool { return r.m.Status().State == StateLoading })
	r.m.WarmCache("chat-1")
	r.m.WarmCache("chat-2") // the one open now
	waitFor(t, "loaded", func() bool { return r.m.Status().State == StateOn })
	be := r.backends("cpu")[0]
	if got := fmt.Sprint(be.Warmed()); got != "[chat-2]" {
		t.Errorf("warmed after loading: %s, want [chat-2]", got)
	}
	r.m.WarmCache("chat-3")
	if got := fmt.Sprint(be.Warmed()); got != "[chat-2 chat-3]" {
		t.Errorf("warmed when loaded: %s, want [chat-2 chat-3]", got)
	}

	// deleted while a reload runs: not warmed
	if err := r.m.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := r.m.Start("minicpm5:2b"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "loading again", func() bool { return r.m.Status().State == StateLoading })
	r.m.ForgetCache("chat-3")
	waitFor(t, "loaded again", func() bool { return r.m.Status().State == StateOn })
	if bs := r.backends("cpu"); len(bs) != 2 || len(bs[1].Warmed()) != 0 {
		t.Errorf("a chat deleted while loading was warmed: %v", bs[len(bs)-1].Warmed())
	}
}
