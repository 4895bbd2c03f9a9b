//go:build linux

package flm

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/npuchat/npuchat/npu/childserver"
	"github.com/npuchat/npuchat/npu/flm/flmtest"
	"github.com/npuchat/npuchat/service/backend"
	"github.com/npuchat/npuchat/service/backend/oaicompat"
)

// fakeFLM is the fake flm built once for this test binary.
var fakeFLM string

func TestMain(m *testing.M) {
	if os.Getenv("FLMTEST_ORPHAN_PARENT") == "1" {
		os.Exit(orphanParent())
	}
	dir, err := os.MkdirTemp("", "fakeflm")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fakeFLM, err = flmtest.BuildTo(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// syncBuffer is a log writer tests can read while the child writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// events records state changes.
type events struct {
	mu  sync.Mutex
	evs []Event
	ch  chan Event
}

func newEvents() *events { return &events{ch: make(chan Event, 100)} }

func (e *events) on(ev Event) {
	e.mu.Lock()
	e.evs = append(e.evs, ev)
	e.mu.Unlock()
	select {
	case e.ch <- ev:
	default: // a test that stopped reading
	}
}

func (e *events) states() []State {
	e.mu.Lock()
	defer e.mu.Unlock()
	var s []State
	for _, ev := range e.evs {
		s = append(s, ev.State)
	}
	return s
}

// waitFor waits for an event in state st.
func (e *events) waitFor(t *testing.T, st State, within time.Duration) Event {
	t.Helper()
	deadline := time.After(within)
	for {
		select {
		case ev := <-e.ch:
			if ev.State == st {
				return ev
			}
		case <-deadline:
			t.Fatalf("no %s event within %v; saw %v", st, within, e.states())
		}
	}
}

// setup is a test's fake FLM: a mode file and the backend options.
type setup struct {
	modes  *flmtest.Modes
	log    *syncBuffer
	events *events
	opts   Options
}

func newSetup(t *testing.T, mode string, env ...string) *setup {
	t.Helper()
	s := &setup{modes: flmtest.NewModes(t, mode), log: &syncBuffer{}, events: newEvents()}
	list, err := filepath.Abs("testdata/model_list.json")
	if err != nil {
		t.Fatal(err)
	}
	s.opts = Options{
		Executable:   fakeFLM,
		Model:        "minicpm5:2b",
		Env:          append([]string{"FLM_CONFIG_PATH=" + list, s.modes.Env()}, env...),
		Log:          s.log,
		StartTimeout: 20 * time.Second,
		PollInterval: 50 * time.Millisecond,
		StopGrace:    2 * time.Second,
		Restart:      RestartPolicy{MaxAttempts: 2, Backoff: 100 * time.Millisecond},
		OnState:      s.events.on,
	}
	return s
}

func (s *setup) setMode(t *testing.T, mode string) { s.modes.Set(t, mode) }

// start makes and loads the backend; it is unloaded at the end of the test.
func (s *setup) start(t *testing.T) *Backend {
	t.Helper()
	b, err := New(s.opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Unload(context.Background()) })
	if err := b.Load(context.Background(), nil); err != nil {
		t.Fatalf("Load: %v\nlog:\n%s", err, s.log)
	}
	return b
}

func chat(text string) *backend.Request {
	return &backend.Request{Messages: []backend.Message{{Role: "user", Content: text}}}
}

func generate(b *Backend, req *backend.Request) (string, backend.Result, error) {
	var sb strings.Builder
	res, err := b.Generate(context.Background(), req, func(tok backend.Token) error {
		sb.WriteString(tok.Text)
		return nil
	})
	return sb.String(), res, err
}

// alive says whether pid is a live process (a zombie counts as dead).
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// pid (comm) S ...: the state follows the last ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

// waitGone waits until pid has ended; after a minute (a bound on a
// failure, not a measure) it fails.
func waitGone(t *testing.T, pid int) {
	t.Helper()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(time.Minute)
	for alive(pid) {
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("process %d still alive after a minute", pid)
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

// TestServe: the backend starts flm serve with the right arguments,
// streams an answer, and stops it gracefully.
func TestServe(t *testing.T) {
	s := newSetup(t, flmtest.ModeNormal)
	s.opts.ContextLength = 512
	var stages []string
	b, err := New(s.opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Load(context.Background(), func(p backend.Progress) { stages = append(stages, p.Stage) }); err != nil {
		t.Fatalf("Load: %v\n%s", err, s.log)
	}
	if len(stages) < 2 || stages[0] != "starting FastFlowLM" || stages[len(stages)-1] != "FastFlowLM ready" {
		t.Errorf("progress stages %q", stages)
	}
	pid := b.PID()
	if pid == 0 || !alive(pid) || b.State() != StateReady {
		t.Fatalf("pid %d state %s", pid, b.State())
	}
	if b.Kind() != "npu" || b.Info().Name != "minicpm5:2b" || b.Info().ContextLength != 512 {
		t.Errorf("kind %q info %+v", b.Kind(), b.Info())
	}

	text, res, err := generate(b, chat("hello there"))
	if err != nil {
		t.Fatalf("Generate: %v", err)
	}
	if text != "Fake FLM heard: hello there" || res.FinishReason != backend.FinishStop || res.CompletionTokens != 5 || res.PromptTokens != 6 {
		t.Errorf("got %q %+v", text, res)
	}
	if res.PrefillDuration != 10*time.Millisecond || res.DecodeDuration <= 0 {
		t.Errorf("durations %v %v (FLM's usage extras not read)", res.PrefillDuration, res.DecodeDuration)
	}

	// A raw prompt goes to /v1/completions; max tokens and stop strings
	// hold (FLM ignores "stop"; the client enforces it).
	text, res, err = generate(b, &backend.Request{Prompt: "one two three four", MaxTokens: 5})
	if err != nil || text != "Fake FLM heard: one two" || res.FinishReason != backend.FinishLength {
		t.Errorf("completion: %q %+v %v", text, res, err)
	}
	req := chat("alpha beta gamma")
	req.Stop = []string{" gam"}
	if text, res, err = generate(b, req); err != nil || text != "Fake FLM heard: alpha beta" || res.FinishReason != backend.FinishStop {
		t.Errorf("stop: %q %+v %v", text, res, err)
	}

	// --ctx-len reached flm: a prompt past 512 tokens is refused.
	_, _, err = generate(b, chat(strings.Repeat("word ", 600)))
	if !errors.Is(err, backend.ErrPromptTooLong) {
		t.Errorf("long prompt: %v, want ErrPromptTooLong", err)
	}

	if err := b.Unload(context.Background()); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(s.log.String(), "killing it") {
		t.Errorf("flm did not stop on the interrupt, it was killed:\n%s", s.log)
	}
	waitGone(t, pid)
	log := s.log.String()
	for _, want := range []string{"serve minicpm5:2b --host 127.0.0.1 --port", "--cors 0 --quiet --ctx-len 512", "Press Ctrl+C to stop", "[FLM]  Shutting down (interrupt)", "asked FastFlowLM (pid"} {
		if !strings.Contains(log, want) {
			t.Errorf("log lacks %q:\n%s", want, log)
		}
	}
	if strings.Contains(log, "Checking for a newer") {
		t.Error("flm was not started with FLM_DISABLE_UPDATE_CHECK=1")
	}
	if got := s.events.states(); fmt.Sprint(got) != "[starting ready stopped]" {
		t.Errorf("states %v", got)
	}
	if _, _, err := generate(b, chat("hi")); !errors.Is(err, backend.ErrNotLoaded) {
		t.Errorf("after Unload: %v", err)
	}
	if err := b.Unload(context.Background()); err != nil {
		t.Errorf("second Unload: %v", err)
	}
}

// TestERT: FLM's decode failure on MiniCPM5-2B is a device failure, in
// one request, with nothing emitted.
func TestERT(t *testing.T) {
	s := newSetup(t, flmtest.ModeNormal)
	// No idle timeout to fall back on: the failure is read from flm's
	// output, or the request never ends.
	s.opts.IdleTimeout = 24 * time.Hour
	b := s.start(t)
	s.setMode(t, flmtest.ModeERT)
	var text string
	var err error
	returns(t, "a request failing with ERT", func() { text, _, err = generate(b, chat("hi")) })
	if !errors.Is(err, backend.ErrDeviceFailed) || !strings.Contains(err.Error(), "ERT_CMD_STATE_TIMEOUT") {
		t.Fatalf("err = %v", err)
	}
	var counted interface{ EmittedTokens() int }
	if text != "" || !errors.As(err, &counted) || counted.EmittedTokens() != 0 {
		t.Errorf("emitted %q", text)
	}
	if !alive(b.PID()) || b.State() != StateReady {
		t.Error("FLM reports ERT from a live process; it should still run")
	}
}

// TestERTMidstream: the same failure after some tokens: the connection
// drops; the error says two pieces were emitted.
func TestERTMidstream(t *testing.T) {
	s := newSetup(t, flmtest.ModeERTMidstream, "FAKEFLM_CRASH_AFTER=2")
	b := s.start(t)
	text, _, err := generate(b, chat("a b c"))
	var oe *oaicompat.Error
	if !errors.Is(err, backend.ErrDeviceFailed) || !errors.As(err, &oe) {
		t.Fatalf("err = %v", err)
	}
	if oe.Emitted != 2 || text != "Fake FLM" || oe.EmittedText != text {
		t.Errorf("emitted %d %q, caller saw %q", oe.Emitted, oe.EmittedText, text)
	}
	if !strings.Contains(err.Error(), "its output during the request:") || !strings.Contains(err.Error(), "[Error]  runlist failed") {
		t.Errorf("error does not quote FLM's output: %v", err)
	}
}

// TestStall: an NPU that hangs mid-answer is a device failure after
// IdleTimeout.
func TestStall(t *testing.T) {
	s := newSetup(t, flmtest.ModeStall)
	s.opts.IdleTimeout = 300 * time.Millisecond
	b := s.start(t)
	var text string
	var err error
	returns(t, "a request to a stalled NPU", func() { text, _, err = generate(b, chat("a b c")) })
	if !errors.Is(err, backend.ErrDeviceFailed) || text != "Fake" || !strings.Contains(err.Error(), "sent nothing for 300ms") {
		t.Fatalf("%q %v", text, err)
	}
}

// TestCrashRestart: the child dies mid-answer; the request fails with a
// device failure that quotes its last output; the backend restarts it
// with backoff and serves again.
func TestCrashRestart(t *testing.T) {
	s := newSetup(t, flmtest.ModeNormal)
	s.opts.Restart.Backoff = 500 * time.Millisecond // room for the request right after the crash
	b := s.start(t)
	pid := b.PID()
	s.setMode(t, flmtest.ModeCrash)
	_, _, err := generate(b, chat("a b c"))
	var pe *ProcessError
	if !errors.Is(err, backend.ErrDeviceFailed) || !errors.As(err, &pe) || !pe.Exited {
		t.Fatalf("err = %v", err)
	}
	if !strings.Contains(err.Error(), "Segmentation fault") || !strings.Contains(err.Error(), "exit status 139") {
		t.Errorf("error lacks the crash output: %v", err)
	}
	var counted interface{ EmittedTokens() int }
	if !errors.As(err, &counted) || counted.EmittedTokens() != 2 {
		t.Errorf("emitted count not reachable: %v", err)
	}
	if _, _, err := generate(b, chat("now")); !errors.Is(err, backend.ErrDeviceFailed) {
		t.Errorf("Generate right after the crash: %v, want ErrDeviceFailed", err)
	}
	s.setMode(t, flmtest.ModeNormal)
	ev := s.events.waitFor(t, StateRestarting, time.Minute)
	if ev.Attempt != 1 || ev.Err == nil {
		t.Errorf("restarting event %+v", ev)
	}
	ev = s.events.waitFor(t, StateReady, time.Minute)
	if ev.PID == pid || ev.PID != b.PID() {
		t.Errorf("ready event %+v, pid now %d, before %d", ev, b.PID(), pid)
	}
	if text, _, err := generate(b, chat("again")); err != nil || text != "Fake FLM heard: again" {
		t.Errorf("after restart: %q %v", text, err)
	}
}

// TestRestartGivesUp: a child that keeps failing to start is given up
// after the policy's attempts; requests fail fast as device failures.
func TestRestartGivesUp(t *testing.T) {
	s := newSetup(t, flmtest.ModeNormal)
	b := s.start(t)
	s.setMode(t, flmtest.ModeNoDevice)
	syscall.Kill(b.PID(), syscall.SIGKILL)
	ev := s.events.waitFor(t, StateFailed, time.Minute)
	if ev.Err == nil || !strings.Contains(ev.Err.Error(), "No such device") {
		t.Errorf("failed event %+v", ev)
	}
	restarts := 0
	for _, st := range s.events.states() {
		if st == StateRestarting {
			restarts++
		}
	}
	if restarts != 2 {
		t.Errorf("%d restarts, want 2: %v", restarts, s.events.states())
	}
	if _, _, err := generate(b, chat("hi")); !errors.Is(err, backend.ErrDeviceFailed) {
		t.Errorf("Generate when failed: %v", err)
	}
	if err := b.Load(context.Background(), nil); err == nil {
		t.Error("Load when failed did not say so")
	}
	if err := b.Unload(context.Background()); err != nil || b.State() != StateStopped {
		t.Errorf("Unload: %v, state %s", err, b.State())
	}
	s.setMode(t, flmtest.ModeNormal)
	if err := b.Load(context.Background(), nil); err != nil {
		t.Errorf("Load after reset: %v", err)
	}
}

// TestStartFailures: a missing device, a server that never answers, a
// missing executable and an unknown model each give a clear Load error.
func TestStartFailures(t *testing.T) {
	t.Run("no device", func(t *testing.T) {
		s := newSetup(t, flmtest.ModeNoDevice)
		b, _ := New(s.opts)
		err := b.Load(context.Background(), nil)
		if !errors.Is(err, backend.ErrDeviceFailed) || !strings.Contains(err.Error(), "No such device with index '0'") ||
			!strings.Contains(err.Error(), "exited while starting (exit status 1)") {
			t.Errorf("err = %v", err)
		}
		if b.State() != StateStopped || b.PID() != 0 {
			t.Errorf("state %s pid %d", b.State(), b.PID())
		}
	})
	t.Run("hang", func(t *testing.T) {
		s := newSetup(t, flmtest.ModeHang)
		s.opts.StartTimeout = 1500 * time.Millisecond
		s.opts.StopGrace = 300 * time.Millisecond
		b, _ := New(s.opts)
		var err error
		returns(t, "loading a hung flm", func() { err = b.Load(context.Background(), nil) })
		if !errors.Is(err, backend.ErrDeviceFailed) || !strings.Contains(err.Error(), "did not answer within 1.5s") ||
			!strings.Contains(err.Error(), "Waiting for the NPU") {
			t.Errorf("err = %v", err)
		}
		if !strings.Contains(s.log.String(), "did not stop; killing it") {
			t.Errorf("no kill after grace in log:\n%s", s.log)
		}
		ev := s.events.waitFor(t, StateStarting, time.Minute)
		if ev.PID == 0 {
			t.Fatal("no pid in the starting event")
		}
		waitGone(t, ev.PID)
	})
	t.Run("port taken", func(t *testing.T) {
		s := newSetup(t, flmtest.ModeBusyPort)
		b, _ := New(s.opts)
		err := b.Load(context.Background(), nil)
		if err == nil || !strings.Contains(err.Error(), "address already in use") {
			t.Errorf("err = %v", err)
		}
		if n := strings.Count(s.log.String(), "npuchat: starting"); n != 2 {
			t.Errorf("%d starts, want 2 (one retry on another port):\n%s", n, s.log)
		}
	})
	t.Run("missing executable", func(t *testing.T) {
		s := newSetup(t, flmtest.ModeNormal)
		s.opts.Executable = filepath.Join(t.TempDir(), "no-flm")
		b, _ := New(s.opts)
		err := b.Load(context.Background(), nil)
		if err == nil || !strings.Contains(err.Error(), "is FastFlowLM installed?") {
			t.Errorf("err = %v", err)
		}
	})
	t.Run("unknown model", func(t *testing.T) {
		s := newSetup(t, flmtest.ModeNormal)
		s.opts.Model = "minicpm5:9b"
		b, _ := New(s.opts)
		err := b.Load(context.Background(), nil)
		if err == nil || !strings.Contains(err.Error(), "model_list.json") || !strings.Contains(err.Error(), "Model not found: minicpm5:9b") {
			t.Errorf("err = %v", err)
		}
		if errors.Is(err, backend.ErrDeviceFailed) {
			t.Errorf("an unknown model is not a device failure: %v", err)
		}
		if b.PID() != 0 {
			t.Error("child left running")
		}
	})
	t.Run("bad options", func(t *testing.T) {
		if _, err := New(Options{Model: "m"}); err == nil {
			t.Error("no executable accepted")
		}
		if _, err := New(Options{Executable: "flm"}); err == nil {
			t.Error("no model accepted")
		}
	})
}

// TestSlowStartAndCancel: a slow start (the fake held at its start gate)
// reports progress while it loads and succeeds when the gate opens; a
// cancelled Load stops the child.
func TestSlowStartAndCancel(t *testing.T) {
	gate := newStartGate(t)
	s := newSetup(t, flmtest.ModeNormal, gate.env())
	b, _ := New(s.opts)
	t.Cleanup(func() { b.Unload(context.Background()) })
	loading := make(chan struct{}, 100)
	loaded := make(chan error, 1)
	go func() {
		loaded <- b.Load(context.Background(), func(p backend.Progress) {
			if strings.HasPrefix(p.Stage, "loading minicpm5:2b on the NPU") && p.Total == 20 {
				select {
				case loading <- struct{}{}:
				default:
				}
			}
		})
	}()
	<-gate.reached
	for range 3 { // it says it is loading while it waits
		<-loading
	}
	gate.open()
	if err := <-loaded; err != nil {
		t.Fatal(err)
	}
	b.Unload(context.Background())

	closed := newStartGate(t) // a gate that stays closed
	b, _ = New(newSetup(t, flmtest.ModeNormal, closed.env()).opts)
	ctx, cancel := context.WithCancel(context.Background())
	loaded = make(chan error, 1)
	go func() { loaded <- b.Load(ctx, nil) }()
	<-closed.reached
	cancel()
	if err := <-loaded; !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v", err)
	}
	if b.PID() != 0 || b.State() != StateStopped {
		t.Errorf("pid %d state %s", b.PID(), b.State())
	}
}

// TestKillAfterGrace: a child that ignores SIGTERM is killed after the
// grace period.
func TestKillAfterGrace(t *testing.T) {
	s := newSetup(t, flmtest.ModeNormal, "FAKEFLM_IGNORE_TERM=1")
	s.opts.StopGrace = 400 * time.Millisecond
	b := s.start(t)
	pid := b.PID()
	start := time.Now()
	if err := b.Unload(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Only a lower bound: the grace was given (a busy machine makes it
	// longer, never shorter); that the kill came is in the log.
	if d := time.Since(start); d < s.opts.StopGrace {
		t.Errorf("killed after %v, before the grace of %v", d, s.opts.StopGrace)
	}
	waitGone(t, pid)
	if log := s.log.String(); !strings.Contains(log, "did not stop; killing it") || strings.Contains(log, "Shutting down") {
		t.Errorf("log:\n%s", log)
	}
}

// TestUnloadAndCancelDuringGenerate: Unload and a cancelled context both
// end a running request promptly.
func TestUnloadAndCancelDuringGenerate(t *testing.T) {
	s := newSetup(t, flmtest.ModeNormal, "FAKEFLM_TOKEN_DELAY=100ms")
	b := s.start(t)

	ctx, cancel := context.WithCancel(context.Background())
	_, err := b.Generate(ctx, chat("w w w w w w w w w w w w w w w w w w w w"), func(backend.Token) error {
		cancel()
		return nil
	})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("cancel: %v", err)
	}

	done := make(chan error, 1)
	started := make(chan struct{})
	var once sync.Once
	go func() {
		_, err := b.Generate(context.Background(), chat("w w w w w w w w w w w w w w w w w w w w"), func(backend.Token) error {
			once.Do(func() { close(started) })
			return nil
		})
		done <- err
	}()
	<-started
	if err := b.Unload(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, backend.ErrNotLoaded) { // the answer is 20 tokens of 100 ms
		t.Errorf("Generate during Unload: %v", err)
	}
	if !strings.Contains(s.log.String(), "Client disconnected") {
		t.Errorf("flm did not see the cancelled request go:\n%s", s.log)
	}
}

// TestNoOrphanWhenParentKilled: a parent process that loaded FLM is
// killed with SIGKILL; its flm child must go too.
func TestNoOrphanWhenParentKilled(t *testing.T) {
	s := newSetup(t, flmtest.ModeNormal, "FAKEFLM_IGNORE_TERM=1")
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "FLMTEST_ORPHAN_PARENT=1", "FLMTEST_FAKE="+fakeFLM,
		"FLMTEST_ENV="+strings.Join(s.opts.Env, "\x1f"))
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr syncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	r := bufio.NewReader(out)
	line, err := r.ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "PID ") {
		t.Fatalf("helper parent said %q, %v; stderr:\n%s", line, err, stderr.String())
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, "PID ")))
	if !alive(pid) {
		t.Fatalf("flm pid %d not running", pid)
	}
	// The parent's runtime has moved goroutines between threads (it says
	// so after rounds of churn): the child must survive that (it would
	// not if the forking thread ended).
	if line, err := r.ReadString('\n'); err != nil || line != "churned\n" {
		t.Fatalf("helper parent said %q, %v; stderr:\n%s", line, err, stderr.String())
	}
	if !alive(pid) {
		t.Fatalf("flm pid %d died while its parent lives", pid)
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	waitGone(t, pid)
}

// orphanParent is the helper parent of TestNoOrphanWhenParentKilled: it
// loads the fake flm, prints its pid, and waits to be killed while its
// goroutines churn across OS threads, saying "churned" after 300 rounds.
func orphanParent() int {
	b, err := New(Options{
		Executable: os.Getenv("FLMTEST_FAKE"), Model: "minicpm5:2b",
		Env: strings.Split(os.Getenv("FLMTEST_ENV"), "\x1f"), PollInterval: 50 * time.Millisecond,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := b.Load(context.Background(), nil); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Printf("PID %d\n", b.PID())
	for round := 1; ; round++ {
		if round == 300 {
			fmt.Println("churned")
		}
		var wg sync.WaitGroup
		for i := 0; i < 8; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				time.Sleep(time.Millisecond)
			}()
		}
		wg.Wait()
	}
}

// startGate holds fake flm processes at their start gate
// (FAKEFLM_START_GATE): reached says one is there; open lets those there,
// and those to come, go on.
type startGate struct {
	ln      net.Listener
	reached chan struct{}

	mu     sync.Mutex
	conns  []net.Conn // held
	opened bool
}

func newStartGate(t *testing.T) *startGate {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := &startGate{ln: ln, reached: make(chan struct{}, 8)}
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			g.mu.Lock()
			if g.opened {
				conn.Write([]byte("go\n"))
			}
			g.conns = append(g.conns, conn)
			g.mu.Unlock()
			g.reached <- struct{}{}
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		g.mu.Lock()
		for _, c := range g.conns {
			c.Close()
		}
		g.mu.Unlock()
	})
	return g
}

func (g *startGate) open() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.opened = true
	for _, c := range g.conns {
		c.Write([]byte("go\n"))
	}
}

func (g *startGate) env() string { return "FAKEFLM_START_GATE=" + g.ln.Addr().String() }

// TestUnloadCancelsALoad: Unload does not wait for a load in progress: it
// kills the starting child, which is held at its start gate, and returns
// while the gate is still closed; the Load returns ErrUnloaded. (Were
// Unload to wait for the Load, or to ask the loading child to stop and
// wait a grace period, this test would hang: the start timeout and the
// grace are an hour.)
func TestUnloadCancelsALoad(t *testing.T) {
	gate := newStartGate(t)
	s := newSetup(t, flmtest.ModeNormal, gate.env())
	s.opts.StartTimeout, s.opts.StopGrace = time.Hour, time.Hour
	b, err := New(s.opts)
	if err != nil {
		t.Fatal(err)
	}
	loaded := make(chan error, 1)
	go func() { loaded <- b.Load(context.Background(), nil) }()
	<-gate.reached
	pid := b.PID()
	if pid == 0 || b.State() != StateStarting {
		t.Fatalf("while loading: pid %d, state %s", pid, b.State())
	}
	if err := b.Unload(context.Background()); err != nil {
		t.Fatalf("Unload: %v", err)
	}
	if alive(pid) {
		t.Errorf("the loading child (pid %d) is alive after Unload", pid)
	}
	if err := <-loaded; !errors.Is(err, childserver.ErrUnloaded) || !errors.Is(err, context.Canceled) {
		t.Errorf("Load: %v, want ErrUnloaded", err)
	}
	if b.PID() != 0 || b.State() != StateStopped {
		t.Errorf("after Unload: pid %d, state %s", b.PID(), b.State())
	}
}
