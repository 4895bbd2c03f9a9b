package oflm

import (
	"context"
	"errors"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/npuchat/npuchat/npu/childserver"
	"github.com/npuchat/npuchat/npu/oflm/oflmtest"
	"github.com/npuchat/npuchat/service/backend"
)

// rig is a Backend running the fake oflm over an installed model.
type rig struct {
	be     *Backend
	ctl    *oflmtest.Control
	inst   installed
	states chan Event
}

func newRig(t *testing.T, mode string, env ...string) *rig {
	t.Helper()
	inst := install(t)
	ctl := oflmtest.NewControl(t)
	r := &rig{ctl: ctl, inst: inst, states: make(chan Event, 64)}
	env = append(append(inst.layout.ServeEnv(inst.kernels), ctl.Env(), "FAKEOFLM_MODE="+mode), env...)
	be, err := New(Options{
		Executable: fakeExe, Env: env, ContextLength: inst.reg.ContextLength,
		PollInterval: 5e6, // 5ms
		OnState:      func(ev Event) { r.states <- ev },
	})
	if err != nil {
		t.Fatal(err)
	}
	r.be = be
	t.Cleanup(func() { be.Unload(context.Background()) })
	return r
}

func (r *rig) load(t *testing.T) {
	t.Helper()
	if err := r.be.Load(context.Background(), nil); err != nil {
		t.Fatalf("Load: %v", err)
	}
}

// generate runs a chat and returns its text and thinking.
func (r *rig) generate(req *backend.Request) (text, thinking string, res backend.Result, err error) {
	var tb, th strings.Builder
	res, err = r.be.Generate(context.Background(), req, func(tok backend.Token) error {
		tb.WriteString(tok.Text)
		th.WriteString(tok.Thinking)
		return nil
	})
	return tb.String(), th.String(), res, err
}

func userSays(text string) *backend.Request {
	return &backend.Request{Messages: []backend.Message{{Role: "user", Content: text}}}
}

// TestServe starts oflm serve as documented, answers a chat with its
// thinking apart, sends a tight max_tokens, and stops the child on Unload.
func TestServe(t *testing.T) {
	r := newRig(t, "")
	r.load(t)
	if r.be.State() != StateReady {
		t.Fatalf("state %s, want ready", r.be.State())
	}
	serve := r.ctl.Wait("serve", 1)
	port := serve.Args[4]
	wantArgs := []string{Tag, "--host", "127.0.0.1", "--port", port, "--ctx-len", "4096", "--cors", "0", "--quiet"}
	if !slices.Equal(serve.Args, wantArgs) {
		t.Errorf("serve args = %q, want %q", serve.Args, wantArgs)
	}
	if _, err := strconv.Atoi(port); err != nil {
		t.Errorf("port %q", port)
	}
	l := r.inst.layout
	for k, want := range map[string]string{
		"OFLM_MODEL_PATH": l.Root, "FLM_MODEL_PATH": l.Root,
		"OFLM_CONFIG_PATH": l.Registry, "FLM_CONFIG_PATH": l.Registry,
		"OFLM_LLAMA_ENGINE": "open", "OFLM_OPEN_KERNELS_DIR": r.inst.kernels.Dir,
		"OFLM_DISABLE_UPDATE_CHECK": "1", "FLM_DISABLE_UPDATE_CHECK": "1",
	} {
		if got := serve.Env[k]; got != want {
			t.Errorf("serve env %s = %q, want %q", k, got, want)
		}
	}

	tests := []struct {
		name       string
		max        int
		wantMax    float64
		wantText   string
		wantFinish string
	}{
		{"no max_tokens: the default cap, not oflm's 4096", 0, DefaultMaxTokens, "Fake oflm heard: hello there", backend.FinishStop},
		{"the request's own", 7, 7, "Fake oflm heard: hello there", backend.FinishStop},
		{"the request's own, reached", 4, 4, "Fake oflm", backend.FinishLength},
		{"never past the served context", 100000, 4096, "Fake oflm heard: hello there", backend.FinishStop},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := userSays("hello there")
			req.MaxTokens = tt.max
			text, thinking, res, err := r.generate(req)
			if err != nil {
				t.Fatalf("Generate: %v", err)
			}
			if text != tt.wantText || thinking != "The user wrote to me. I answer." {
				t.Errorf("text %q, thinking %q", text, thinking)
			}
			if res.FinishReason != tt.wantFinish {
				t.Errorf("finish %q, want %q", res.FinishReason, tt.wantFinish)
			}
			body := r.ctl.Wait("request", i+1).Body
			if body["stream"] != true || body["max_tokens"] != tt.wantMax || body["model"] != Tag {
				t.Errorf("request stream %v max_tokens %v model %v, want true %v %s", body["stream"], body["max_tokens"], body["model"], tt.wantMax, Tag)
			}
		})
	}

	pid := r.be.PID()
	if err := r.be.Unload(context.Background()); err != nil {
		t.Fatalf("Unload: %v", err)
	}
	if r.be.State() != StateStopped || r.be.PID() != 0 {
		t.Errorf("after Unload: state %s pid %d", r.be.State(), r.be.PID())
	}
	if p, err := os.FindProcess(pid); err == nil && p.Signal(nilSignal()) == nil {
		t.Errorf("oflm (pid %d) still runs after Unload", pid)
	}
}

// TestModelFaker: a failed load leaves oflm's port open with
// "model-faker"; Load fails with the child's last output as the reason,
// as a device failure the service falls back on, and stops the child.
func TestModelFaker(t *testing.T) {
	r := newRig(t, oflmtest.ModeLoadFail)
	err := r.be.Load(context.Background(), nil)
	if err == nil {
		t.Fatal("Load succeeded on a failed load")
	}
	if !errors.Is(err, backend.ErrDeviceFailed) {
		t.Errorf("error %v does not wrap ErrDeviceFailed", err)
	}
	for _, want := range []string{"could not load " + Tag, "mmap err=-11"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if r.be.State() != StateStopped || r.be.PID() != 0 {
		t.Errorf("after a failed load: state %s pid %d", r.be.State(), r.be.PID())
	}
	if _, err := r.be.Generate(context.Background(), userSays("hi"), nil); !errors.Is(err, backend.ErrNotLoaded) {
		t.Errorf("Generate after a failed load: %v", err)
	}
}

// TestCutAndClose: oflm ignores stop strings and may stream <|im_end|>
// until max_tokens; the text is cut at the end marker and at a stop
// string split across chunks, and the connection is closed while oflm
// is still streaming (the fake records the disconnect).
func TestCutAndClose(t *testing.T) {
	tests := []struct {
		name     string
		mode     string
		answer   string
		stop     []string
		wantText string
		wantStop string
	}{
		{name: "run-on <|im_end|>", mode: "runon,hold", wantText: "Fake oflm heard: hi"},
		{name: "stop string split across chunks", mode: "hold", answer: `["Hello wor","ld. EN","D more text"]`,
			stop: []string{"END"}, wantText: "Hello world. ", wantStop: "END"},
		{name: "end marker split across chunks", mode: "hold", answer: `["Done.<|im","_end|>","<|im_start|>user"]`,
			wantText: "Done."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var env []string
			if tt.answer != "" {
				env = append(env, "FAKEOFLM_ANSWER="+tt.answer)
			}
			r := newRig(t, tt.mode, env...)
			r.load(t)
			req := userSays("hi")
			req.Stop = tt.stop
			text, _, res, err := r.generate(req)
			if err != nil {
				t.Fatalf("Generate: %v", err)
			}
			if text != tt.wantText {
				t.Errorf("text %q, want %q", text, tt.wantText)
			}
			if res.FinishReason != backend.FinishStop || res.StopSequence != tt.wantStop {
				t.Errorf("finish %q stop %q, want stop %q", res.FinishReason, res.StopSequence, tt.wantStop)
			}
			// The fake holds the stream open until the client goes: this
			// event comes only because NPU Chat closed the connection.
			ev := r.ctl.Wait("disconnected", 1)
			if ev.Sent == 0 {
				t.Errorf("disconnect after %d chunks", ev.Sent)
			}
			if n := len(r.ctl.Events("finished")); n != 0 {
				t.Errorf("oflm finished %d answers; it should have been cut off", n)
			}
		})
	}
}

// TestRawPrompt: a prompt without a chat goes to /v1/completions, cut
// and capped the same way.
func TestRawPrompt(t *testing.T) {
	r := newRig(t, "runon,hold")
	r.load(t)
	text, thinking, res, err := r.generate(&backend.Request{Prompt: "once upon", MaxTokens: 20})
	if err != nil {
		t.Fatalf("Generate: %v", err)
	}
	if text != "Fake oflm heard: once upon" || thinking != "" || res.FinishReason != backend.FinishStop {
		t.Errorf("text %q thinking %q finish %q", text, thinking, res.FinishReason)
	}
	body := r.ctl.Wait("request", 1).Body
	if body["prompt"] != "once upon" || body["stream"] != true || body["max_tokens"] != float64(20) {
		t.Errorf("request %v", body)
	}
	r.ctl.Wait("disconnected", 1)
}

// TestCrashMidAnswer: oflm dying mid-answer is a device failure with its
// last output, the backend goes to failed, and a new Load starts it again.
func TestCrashMidAnswer(t *testing.T) {
	r := newRig(t, oflmtest.ModeCrash)
	r.load(t)
	text, _, _, err := r.generate(userSays("tell me more"))
	if !errors.Is(err, backend.ErrDeviceFailed) {
		t.Fatalf("Generate error %v does not wrap ErrDeviceFailed", err)
	}
	var pe *ProcessError
	if !errors.As(err, &pe) || !pe.Exited {
		t.Fatalf("error %v is not a ProcessError of an exited oflm", err)
	}
	if !strings.Contains(err.Error(), "Segmentation fault") {
		t.Errorf("error %q does not quote oflm's last output", err)
	}
	if text != "Fake oflm" {
		t.Errorf("text before the crash %q", text)
	}
	for ev := range r.states {
		if ev.State == StateFailed {
			break
		}
	}
	if _, err := r.be.Generate(context.Background(), userSays("hi"), nil); !errors.Is(err, backend.ErrDeviceFailed) {
		t.Errorf("Generate on a failed backend: %v", err)
	}
	first := r.ctl.Wait("serve", 1).PID
	r.load(t)
	if second := r.ctl.Wait("serve", 2).PID; second == first || r.be.State() != StateReady {
		t.Errorf("reload: pid %d after %d, state %s", second, first, r.be.State())
	}
}

// TestDroppedConnection: a stream that breaks while oflm lives on is a
// device failure with oflm's output during the request, not a death: the
// backend stays ready on the same process (Died asks the live port rather
// than waiting on a clock).
func TestDroppedConnection(t *testing.T) {
	r := newRig(t, oflmtest.ModeDrop)
	r.load(t)
	pid := r.be.PID()
	text, _, _, err := r.generate(userSays("tell me more"))
	if !errors.Is(err, backend.ErrDeviceFailed) {
		t.Fatalf("Generate error %v does not wrap ErrDeviceFailed", err)
	}
	var pe *ProcessError
	if errors.As(err, &pe) {
		t.Errorf("a live oflm reported as a failed process: %v", err)
	}
	if !strings.Contains(err.Error(), "connection reset by peer") {
		t.Errorf("error %q does not quote oflm's output during the request", err)
	}
	if text != "Fake oflm" {
		t.Errorf("text before the drop %q", text)
	}
	if r.be.State() != StateReady || r.be.PID() != pid {
		t.Errorf("after the drop: state %s pid %d (was %d)", r.be.State(), r.be.PID(), pid)
	}
}

// TestPortTaken: oflm failing to bind its port is started again on
// another; when that fails too, Load says why.
func TestPortTaken(t *testing.T) {
	t.Run("taken once", func(t *testing.T) {
		r := newRig(t, oflmtest.ModeBusyOnce, "FAKEOFLM_STATE="+t.TempDir())
		r.load(t)
		a, b := r.ctl.Wait("serve", 1), r.ctl.Wait("serve", 2)
		if a.Args[4] == b.Args[4] {
			t.Errorf("retried on the same port %s", a.Args[4])
		}
	})
	t.Run("always taken", func(t *testing.T) {
		r := newRig(t, oflmtest.ModeBusyPort)
		err := r.be.Load(context.Background(), nil)
		if err == nil || !strings.Contains(err.Error(), "Address already in use") {
			t.Fatalf("Load: %v", err)
		}
		if n := len(r.ctl.Events("serve")); n != 2 {
			t.Errorf("%d starts, want 2", n)
		}
	})
}

// TestSlowStart: Load waits while oflm loads (it opens its port only
// then), and returns once the load is done.
func TestSlowStart(t *testing.T) {
	r := newRig(t, oflmtest.ModeSlowStart)
	done := make(chan error, 1)
	go func() { done <- r.be.Load(context.Background(), nil) }()
	for ev := range r.states {
		if ev.State == StateStarting {
			break
		}
	}
	r.ctl.Wait("gate", 1) // oflm is loading: its port is not open yet
	select {
	case err := <-done:
		t.Fatalf("Load returned while oflm was loading: %v", err)
	default:
	}
	if r.be.State() != StateStarting {
		t.Errorf("state while loading %s", r.be.State())
	}
	r.ctl.Release("load")
	if err := <-done; err != nil {
		t.Fatalf("Load: %v", err)
	}
	if r.be.State() != StateReady {
		t.Errorf("state %s", r.be.State())
	}
}

// TestSlowStartCancelled: a cancelled Load stops the child it started.
func TestSlowStartCancelled(t *testing.T) {
	r := newRig(t, oflmtest.ModeSlowStart)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.be.Load(ctx, nil) }()
	r.ctl.Wait("gate", 1)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Load: %v", err)
	}
	if r.be.PID() != 0 || r.be.State() != StateStopped {
		t.Errorf("after a cancelled load: state %s pid %d", r.be.State(), r.be.PID())
	}
}

// TestUnloadCancelsALoad: Unload does not wait for a load in progress: it
// kills the starting oflm, which waits at its "load" gate, and returns
// while the gate is still closed; the Load returns ErrUnloaded. (Were
// Unload to wait for the Load, this test would hang: the start timeout is
// an hour.)
func TestUnloadCancelsALoad(t *testing.T) {
	r := newRig(t, oflmtest.ModeSlowStart)
	r.be.opts.StartTimeout = time.Hour
	loaded := make(chan error, 1)
	go func() { loaded <- r.be.Load(context.Background(), nil) }()
	r.ctl.Wait("gate", 1) // oflm is loading: its port is not open yet
	pid := r.be.PID()
	if pid == 0 || r.be.State() != StateStarting {
		t.Fatalf("while loading: pid %d, state %s", pid, r.be.State())
	}
	if err := r.be.Unload(context.Background()); err != nil {
		t.Fatalf("Unload: %v", err)
	}
	if p, err := os.FindProcess(pid); err == nil && p.Signal(nilSignal()) == nil {
		t.Errorf("the loading oflm (pid %d) is alive after Unload", pid)
	}
	if err := <-loaded; !errors.Is(err, childserver.ErrUnloaded) || !errors.Is(err, context.Canceled) {
		t.Errorf("Load: %v, want ErrUnloaded", err)
	}
	if r.be.PID() != 0 || r.be.State() != StateStopped {
		t.Errorf("after Unload: pid %d, state %s", r.be.PID(), r.be.State())
	}
}

// TestUnknownTag: oflm exits at once for a tag its registry lacks.
func TestUnknownTag(t *testing.T) {
	inst := install(t)
	be, err := New(Options{Executable: fakeExe, Tag: "nope:1b", Env: inst.layout.ServeEnv(inst.kernels), PollInterval: 5e6})
	if err != nil {
		t.Fatal(err)
	}
	err = be.Load(context.Background(), nil)
	if err == nil || !strings.Contains(err.Error(), `does not know model "nope:1b"`) {
		t.Fatalf("Load: %v", err)
	}
}
