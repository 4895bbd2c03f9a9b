package childserver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/npuchat/npuchat/childproc"
	"github.com/npuchat/npuchat/service/backend"
)

// helperEnv makes the test binary, started as a child, act as a server:
// its value is the mode (see helper).
const helperEnv = "CHILDSERVER_TEST_HELPER"

func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		os.Exit(helper(mode, os.Args[len(os.Args)-1]))
	}
	os.Exit(m.Run())
}

// helper is the child: "serve" answers GET /ready on port, "busy" fails
// to bind as Linux says, "exit" says something and exits 3, "silent"
// never listens.
func helper(mode, port string) int {
	switch mode {
	case "serve":
		ln, err := net.Listen("tcp", "127.0.0.1:"+port)
		if err != nil {
			fmt.Println(err)
			return 1
		}
		fmt.Println("listening")
		http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/ready" {
				http.NotFound(w, r)
			}
		}))
	case "busy":
		fmt.Println("bind: Address already in use")
		return 1
	case "exit":
		fmt.Println("Model not found")
		return 3
	case "silent":
		select {}
	}
	return 2
}

// start starts the test binary as a server child in mode.
func start(t *testing.T, mode string) *Server {
	t.Helper()
	s, err := Start(spec(mode, os.Args[0]))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Stop(context.Background(), 0) })
	return s
}

func spec(mode, exe string) Spec {
	return Spec{
		Name: "helper", Command: "helper " + mode, Executable: exe,
		Args: func(port int) []string { return []string{fmt.Sprint(port)} },
		Env:  append(os.Environ(), helperEnv+"="+mode), Log: childproc.NewLogRing(nil, 20),
		Missing: "is the helper installed?",
	}
}

// ready is the probe of the "serve" helper.
func ready(s *Server) Probe {
	return func(ctx context.Context) (bool, error) {
		_, ok := Get(ctx, http.DefaultClient, s.URL("/ready"), 5*time.Second)
		return ok, nil
	}
}

// TestWaitReady: each way a start ends, and the error it gives.
func TestWaitReady(t *testing.T) {
	poll := Wait{Timeout: time.Hour, PollInterval: time.Millisecond}
	tests := []struct {
		name      string
		mode      string
		wait      Wait
		probe     func(*Server) Probe
		want      string // in the error; "" for none
		portTaken bool
		exited    bool
	}{
		{name: "ready", mode: "serve", wait: poll, probe: ready},
		{name: "port taken", mode: "busy", wait: poll, probe: ready, exited: true, portTaken: true,
			want: "exited while starting (exit status 1); its last output:\n\tnpuchat: starting"},
		{name: "exits", mode: "exit", wait: poll, probe: ready, exited: true, want: "exited while starting (exit status 3)"},
		{name: "never answers", mode: "silent", wait: Wait{Timeout: time.Nanosecond, PollInterval: time.Hour}, probe: ready,
			want: "did not answer within 1ns"},
		{name: "the probe refuses", mode: "serve", wait: poll, probe: func(s *Server) Probe {
			return func(context.Context) (bool, error) { return false, s.Error("could not load it", nil) }
		}, want: "could not load it"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := start(t, tt.mode)
			err := s.WaitReady(context.Background(), tt.wait, tt.probe(s))
			if tt.want == "" {
				if err != nil {
					t.Fatalf("WaitReady: %v", err)
				}
				return
			}
			var pe *ProcessError
			if !errors.As(err, &pe) || !errors.Is(err, backend.ErrDeviceFailed) {
				t.Fatalf("WaitReady: %v, want a ProcessError that wraps ErrDeviceFailed", err)
			}
			prefix := fmt.Sprintf("helper (helper %s, pid %d) ", tt.mode, s.PID)
			if !strings.HasPrefix(err.Error(), prefix) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q, want %q after %q", err, tt.want, prefix)
			}
			if pe.Exited != tt.exited || PortTaken(err) != tt.portTaken {
				t.Errorf("Exited %v, PortTaken %v; want %v, %v", pe.Exited, PortTaken(err), tt.exited, tt.portTaken)
			}
		})
	}
}

// TestWaitReadyCancelled: a cancelled wait returns the context's error
// and leaves the child to the caller.
func TestWaitReadyCancelled(t *testing.T) {
	s := start(t, "silent")
	ctx, cancel := context.WithCancel(context.Background())
	// The first "not yet" cancels.
	err := s.WaitReady(ctx, Wait{Timeout: time.Hour, PollInterval: time.Millisecond, Progress: func(time.Duration) { cancel() }}, ready(s))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("WaitReady: %v", err)
	}
	if s.Exited() {
		t.Error("the child exited")
	}
	if err := s.Stop(context.Background(), 0); err != nil || !s.Exited() {
		t.Errorf("Stop: %v, exited %v", err, s.Exited())
	}
}

// TestStartMissing: an executable that is not there is said so, with the
// hint.
func TestStartMissing(t *testing.T) {
	_, err := Start(spec("serve", filepath.Join(t.TempDir(), "nope")))
	if err == nil || !strings.Contains(err.Error(), "not found (is the helper installed?)") {
		t.Fatalf("Start: %v", err)
	}
}

func TestLogSaysAndPortTaken(t *testing.T) {
	tests := []struct {
		log    []string
		exited bool
		want   bool
	}{
		{[]string{"x", "bind: Address already in use"}, true, true},
		{[]string{"Only one usage of each socket address (protocol/network address/port) is normally permitted."}, true, true},
		{[]string{"bind: Address already in use"}, false, false}, // still running: not its start failing
		{[]string{"Model not found"}, true, false},
	}
	for _, tt := range tests {
		err := fmt.Errorf("load: %w", &ProcessError{Log: tt.log, Exited: tt.exited})
		if got := PortTaken(err); got != tt.want {
			t.Errorf("PortTaken(%q, exited %v) = %v", tt.log, tt.exited, got)
		}
	}
	if PortTaken(errors.New("address already in use")) {
		t.Error("PortTaken of an error that is no ProcessError")
	}
	if !LogSays([]string{"a", "Model NOT found"}, "model not found") || LogSays(nil, "x") {
		t.Error("LogSays")
	}
}

// TestServedContext: FLM and oflm serve --ctx-len raised to 512 and
// rounded up to a power of two.
func TestServedContext(t *testing.T) {
	for n, want := range map[int]int{1: 512, 512: 512, 513: 1024, 4096: 4096, 5000: 8192, 32768: 32768} {
		if got := ServedContext(n); got != want {
			t.Errorf("ServedContext(%d) = %d, want %d", n, got, want)
		}
	}
}

// TestLifecycle: Unload cancels the Load in progress with ErrUnloaded and
// then waits for it to end; a Load's own failure is left as it is.
func TestLifecycle(t *testing.T) {
	var l Lifecycle
	l.Unload()() // no Load: nothing to cancel

	ctx, end := l.Load(context.Background())
	if ctx.Err() != nil {
		t.Fatal("a new load's context is done")
	}
	unloaded := make(chan struct{})
	go func() {
		done := l.Unload()
		close(unloaded)
		done()
	}()
	<-ctx.Done()
	failed := fmt.Errorf("wait: %w", ctx.Err())
	if got := Why(ctx, failed); got != ErrUnloaded || !errors.Is(got, context.Canceled) {
		t.Errorf("Why = %v, want ErrUnloaded", got)
	}
	if Why(ctx, nil) != nil {
		t.Error("Why of no error")
	}
	select {
	case <-unloaded:
		t.Fatal("Unload went on while the Load had not ended")
	default:
	}
	end()
	<-unloaded

	ctx, end = l.Load(context.Background())
	other := errors.New("exited while starting")
	if ctx.Err() != nil || Why(ctx, other) != other {
		t.Errorf("a later load: ctx %v, Why %v", ctx.Err(), Why(ctx, other))
	}
	end()
	parent, cancel := context.WithCancel(context.Background())
	ctx, end = l.Load(parent)
	defer end()
	cancel()
	if got := Why(ctx, context.Canceled); got != context.Canceled {
		t.Errorf("Why of the caller's own cancel = %v", got)
	}
}

// TestDied: Died tells a child that died from one that lives on, waiting
// for an event (the exit, or the port's answer), never a clock.
func TestDied(t *testing.T) {
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name string
		mode string
		ctx  context.Context
		want bool
	}{
		{"alive and answering", "serve", context.Background(), false},
		{"exited", "exit", context.Background(), true},
		{"alive, not answering, the caller gone", "silent", cancelled, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := start(t, tt.mode)
			if tt.mode == "serve" {
				if err := s.WaitReady(context.Background(), Wait{Timeout: time.Hour, PollInterval: time.Millisecond}, ready(s)); err != nil {
					t.Fatal(err)
				}
			}
			if got := s.Died(tt.ctx, http.DefaultClient, "/ready"); got != tt.want {
				t.Errorf("Died = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestSlotServing: why a slot does not serve, in each state, and the
// events it sends.
func TestSlotServing(t *testing.T) {
	crash := errors.New("exited (signal: killed)")
	tests := []struct {
		name  string
		steps []Event
		want  error
		text  string
	}{
		{name: "never loaded", want: backend.ErrNotLoaded, text: "oflm m: model not loaded"},
		{name: "starting", steps: []Event{{State: StateStarting, PID: 7}}, want: backend.ErrDeviceFailed, text: "oflm m is not ready (starting)"},
		{name: "failed", steps: []Event{{State: StateFailed, Err: crash}}, want: crash, text: "oflm m is down: exited (signal: killed)"},
		{name: "failed, no reason", steps: []Event{{State: StateFailed}}, want: backend.ErrDeviceFailed, text: "oflm m is down"},
		{name: "ready without a client", steps: []Event{{State: StateReady}}, want: backend.ErrDeviceFailed, text: "is not ready (ready)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var heard []State
			s := NewSlot(func(ev Event) { heard = append(heard, ev.State) })
			for _, ev := range tt.steps {
				s.Set(ev)
			}
			c, client, err := s.Serving("oflm m")
			if c != nil || client != nil || !errors.Is(err, tt.want) || !strings.Contains(err.Error(), tt.text) {
				t.Errorf("Serving = %v, %v, %v; want %v with %q", c, client, err, tt.want, tt.text)
			}
			if len(heard) != len(tt.steps) {
				t.Errorf("onState heard %v", heard)
			}
			s.Stopped()
			if s.State() != StateStopped || s.LastErr() != nil {
				t.Errorf("after Stopped: %s, %v", s.State(), s.LastErr())
			}
		})
	}
}
