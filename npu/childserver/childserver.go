// Package childserver runs a local model server (FastFlowLM's `flm serve`,
// OpenFlowLM's `oflm serve`) as a supervised child process on a private
// loopback port: the pieces the two NPU routes (npu/flm, npu/oflm) share,
// written once.
//
//   - Start picks a free loopback port, starts the executable through
//     npu/childproc (it dies with NPU Chat) and notes the command in the
//     log;
//   - Server.WaitReady polls a readiness probe until it says ready, the
//     child exits, the start timeout passes or the context ends;
//   - ProcessError is a failure of the child with its last output; it
//     wraps backend.ErrDeviceFailed, so the service falls back to the CPU;
//   - Server.Stop asks the child to stop and kills it after a grace period
//     (at once with none); Server.Died says whether a request whose
//     connection broke broke with the child;
//   - Lifecycle serialises Load and Unload, and lets Unload cancel a Load
//     in progress rather than wait for it (a load may take minutes);
//   - Slot holds the child, its client and the backend's state; Launch
//     starts a child and waits until it serves.
//
// What each route asks of its server (arguments, readiness, error texts,
// restarts) stays in its own package.
package childserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/npuchat/npuchat/childproc"
	"github.com/npuchat/npuchat/service/backend"
	"github.com/npuchat/npuchat/service/backend/oaicompat"
)

// Spec says how to start a server child.
type Spec struct {
	// Name names the program in messages: "FastFlowLM", "oflm".
	Name string
	// Command names the process in errors: "flm serve minicpm5:2b".
	Command string
	// Executable is the program to run.
	Executable string
	// Args gives its arguments for the port it is to listen on.
	Args func(port int) []string
	// BaseEnv is the child's environment before Env; nil means this
	// process's environment.
	BaseEnv []string
	// Env adds "KEY=value" entries to the child's environment.
	Env []string
	// Log receives the child's output and NPU Chat's notes about it.
	Log *childproc.LogRing
	// Missing is the hint added when Executable is not there: "is
	// FastFlowLM installed?".
	Missing string
	// Alive is a path a live server answers 200 to ("/api/tags"), asked
	// when a request breaks (Server.RequestError).
	Alive string
}

// Server is one running server child. Make one with Start.
type Server struct {
	*childproc.Process
	// Port is the loopback port the child was told to listen on.
	Port int
	// ReadyAt is when Launch found it serving (zero before).
	ReadyAt time.Time
	name    string // Spec.Name
	command string // Spec.Command
	alive   string // Spec.Alive
	log     *childproc.LogRing
	logSeq  uint64 // the log's line count when it started
}

// Start picks a free loopback port and starts spec's executable on it.
// It does not wait for the server to answer: see WaitReady.
func Start(spec Spec) (*Server, error) {
	port, err := FreePort()
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", spec.Name, err)
	}
	args := spec.Args(port)
	cmd := exec.Command(spec.Executable, args...)
	env := spec.BaseEnv
	if env == nil {
		env = os.Environ()
	}
	cmd.Env = append(append([]string(nil), env...), spec.Env...)
	cmd.Stdout, cmd.Stderr = spec.Log, spec.Log
	cmd.WaitDelay = 2 * time.Second // do not wait long for pipes held by grandchildren
	seq := spec.Log.Seq()
	spec.Log.Note(fmt.Sprintf("starting %s %s", spec.Executable, strings.Join(args, " ")))
	p, err := childproc.Start(cmd)
	if err != nil {
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("start %s: %s not found (%s): %w", spec.Name, spec.Executable, spec.Missing, err)
		}
		return nil, fmt.Errorf("start %s %s: %w", spec.Name, spec.Executable, err)
	}
	return &Server{Process: p, Port: port, name: spec.Name, command: spec.Command, alive: spec.Alive, log: spec.Log, logSeq: seq}, nil
}

// URL is the server's address with path: URL("/api/ps") is
// "http://127.0.0.1:port/api/ps".
func (s *Server) URL(path string) string {
	return "http://127.0.0.1:" + strconv.Itoa(s.Port) + path
}

// Probe says whether the server is ready. It returns an error (made with
// Server.Error) when the server answered in a way that means it never
// will be, false while it is not answering yet.
type Probe func(ctx context.Context) (bool, error)

// Wait says how WaitReady waits.
type Wait struct {
	// Timeout bounds the wait; PollInterval is the probe period.
	Timeout, PollInterval time.Duration
	// Progress, if set, hears the time waited after each probe that said
	// not yet.
	Progress func(elapsed time.Duration)
}

// WaitReady runs probe every w.PollInterval until it says ready, fails,
// the child exits, w.Timeout passes or ctx ends (then ctx.Err()).
func (s *Server) WaitReady(ctx context.Context, w Wait, probe Probe) error {
	start := time.Now()
	deadline := time.NewTimer(w.Timeout)
	defer deadline.Stop()
	tick := time.NewTicker(w.PollInterval)
	defer tick.Stop()
	for {
		select {
		case <-s.Done():
			return s.Error("exited while starting", nil)
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline.C:
			return s.Error(fmt.Sprintf("did not answer within %v", w.Timeout), nil)
		case <-tick.C:
		}
		ready, err := probe(ctx)
		if ready || err != nil {
			return err
		}
		if w.Progress != nil {
			w.Progress(time.Since(start))
		}
	}
}

// Get sends GET url, bounded by timeout, and returns the body (at most
// 1 MiB) when the answer is 200 OK; ok is false when the server does not
// answer, or answers otherwise.
func Get(ctx context.Context, client *http.Client, url string, timeout time.Duration) (body []byte, ok bool) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, false
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, false
	}
	defer resp.Body.Close()
	body, err = io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return body, err == nil && resp.StatusCode == http.StatusOK
}

// Error describes a failure of the child (what it did: "exited while
// starting") with its exit status and its output since it started.
func (s *Server) Error(what string, cause error) *ProcessError {
	lines := s.log.Since(s.logSeq, 12)
	var sb strings.Builder
	fmt.Fprintf(&sb, "%s (%s, pid %d) %s", s.name, s.command, s.PID, what)
	if s.Exited() {
		fmt.Fprintf(&sb, " (%s)", s.ExitStatus())
	}
	if cause != nil {
		fmt.Fprintf(&sb, ": %v", cause)
	}
	if len(lines) > 0 {
		sb.WriteString("; its last output:\n\t" + strings.Join(lines, "\n\t"))
	}
	return &ProcessError{Message: sb.String(), Log: lines, Exited: s.Exited(), Cause: cause}
}

// ProcessError is a failure of a server child: it exited, failed to load,
// never answered, or died during a request. It wraps
// backend.ErrDeviceFailed, so the service falls back to the CPU, and its
// message quotes the child's last output.
type ProcessError struct {
	Message string   // the whole message, with the output
	Log     []string // the child's last output lines
	Exited  bool     // the process had exited
	Cause   error    // the request's own error, when a request failed
}

// Error is the failure with the child's last output.
func (e *ProcessError) Error() string { return e.Message }

// Unwrap returns backend.ErrDeviceFailed and the cause.
func (e *ProcessError) Unwrap() []error {
	if e.Cause != nil {
		return []error{backend.ErrDeviceFailed, e.Cause}
	}
	return []error{backend.ErrDeviceFailed}
}

// LogSays says whether one of lines contains what (lower case), ignoring
// case.
func LogSays(lines []string, what string) bool {
	for _, l := range lines {
		if strings.Contains(strings.ToLower(l), what) {
			return true
		}
	}
	return false
}

// PortTaken says whether err is a child that exited because its port was
// taken (another program bound it between FreePort and the child's bind):
// Linux says "Address already in use", Windows "Only one usage of each
// socket address". The caller starts another on a new port.
func PortTaken(err error) bool {
	var pe *ProcessError
	return errors.As(err, &pe) && pe.Exited &&
		(LogSays(pe.Log, "address already in use") || LogSays(pe.Log, "only one usage of each socket address"))
}

// Stop ends the child: when grace > 0, SIGINT (FLM's "Press Ctrl+C to
// stop"), SIGTERM after half of grace and a kill after grace; with no
// grace, or on Windows (where a child without a console cannot be asked),
// a kill at once. It releases what Start held and returns once the
// process is gone. ctx ending cuts the grace short.
func (s *Server) Stop(ctx context.Context, grace time.Duration) error {
	defer s.Release()
	if s.Exited() {
		return nil
	}
	wait := func(d time.Duration) bool {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-s.Done():
			return true
		case <-t.C:
			return false
		case <-ctx.Done():
			return false
		}
	}
	if grace > 0 {
		if err := s.Interrupt(); err != nil {
			s.log.Note(fmt.Sprintf("could not ask %s (pid %d) to stop (%v); killing it", s.name, s.PID, err))
		} else {
			s.log.Note(fmt.Sprintf("asked %s (pid %d) to stop", s.name, s.PID))
			if wait(grace / 2) {
				return nil
			}
			if ctx.Err() == nil && s.Terminate() == nil && wait(grace-grace/2) {
				return nil
			}
			s.log.Note(fmt.Sprintf("%s (pid %d) did not stop; killing it", s.name, s.PID))
		}
	}
	if err := s.Kill(); err != nil && !s.Exited() {
		return fmt.Errorf("kill %s (pid %d): %w", s.name, s.PID, err)
	}
	t := time.NewTimer(10 * time.Second)
	defer t.Stop()
	select {
	case <-s.Done():
		return nil
	case <-t.C:
		return fmt.Errorf("%s (pid %d) is still running after a kill", s.name, s.PID)
	}
}

// Died says whether the child died with a request whose connection broke.
// The broken connection arrives a moment before the exit is seen, so it
// waits for whichever comes first: the exit, or an answer on the child's
// port at alive (a GET; a live server answers it). A port that refuses
// while the process is still there means it is going: Died then waits for
// the exit, at most 10 seconds. It never waits on a clock when the child
// either answers or exits.
func (s *Server) Died(ctx context.Context, client *http.Client, alive string) bool {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	answered := make(chan bool, 1)
	go func() {
		_, ok := Get(ctx, client, s.URL(alive), 10*time.Second)
		answered <- ok
	}()
	select {
	case <-s.Done():
		return true
	case ok := <-answered:
		if ok {
			return s.Exited()
		}
	}
	select {
	case <-s.Done():
		return true
	case <-ctx.Done():
		return s.Exited()
	}
}

// RequestError describes a request to the child that failed on the
// device with err, naming the model as name ("FastFlowLM minicpm5:2b"):
// when the connection broke and the child died with it (Died asks its
// Alive path), a ProcessError with its last output; else err with the
// child's output since the log count seq, taken before the request.
func (s *Server) RequestError(ctx context.Context, client *http.Client, name string, seq uint64, err error) error {
	var oe *oaicompat.Error
	if errors.As(err, &oe) && oe.Cause != nil && s.Died(ctx, client, s.alive) || s.Exited() {
		return s.Error("died during the request", err)
	}
	if lines := s.log.Since(seq, 8); len(lines) > 0 {
		return fmt.Errorf("%s on the NPU: %w; its output during the request:\n\t%s", name, err, strings.Join(lines, "\n\t"))
	}
	return fmt.Errorf("%s on the NPU: %w", name, err)
}

// ErrUnloaded is why a Load ended when Unload cancelled it. It wraps
// context.Canceled.
var ErrUnloaded = fmt.Errorf("unloaded while it was loading: %w", context.Canceled)

// Lifecycle serialises a backend's Load and Unload, and lets Unload
// cancel a Load in progress rather than wait for it: a start can take
// minutes (the weights go to the NPU before the server answers). The
// zero value is ready.
type Lifecycle struct {
	lock   sync.Mutex // held by a Load or an Unload
	mu     sync.Mutex
	cancel context.CancelCauseFunc // the Load in progress, if any
}

// Load waits for the lifecycle and returns the Load's context, which an
// Unload meanwhile cancels with ErrUnloaded; done ends the Load.
func (l *Lifecycle) Load(ctx context.Context) (loadCtx context.Context, done func()) {
	l.lock.Lock()
	ctx, cancel := context.WithCancelCause(ctx)
	l.mu.Lock()
	l.cancel = cancel
	l.mu.Unlock()
	return ctx, func() {
		l.mu.Lock()
		l.cancel = nil
		l.mu.Unlock()
		cancel(nil)
		l.lock.Unlock()
	}
}

// Unload cancels the Load in progress, if any (it stops the child it
// started and returns), then waits for the lifecycle; done ends the
// Unload.
func (l *Lifecycle) Unload() (done func()) {
	l.mu.Lock()
	if l.cancel != nil {
		l.cancel(ErrUnloaded)
	}
	l.mu.Unlock()
	l.lock.Lock()
	return l.lock.Unlock
}

// Why is the error a Load returns that failed with err under loadCtx
// (from Lifecycle.Load): ErrUnloaded when Unload cancelled it, err
// otherwise.
func Why(loadCtx context.Context, err error) error {
	if err != nil && errors.Is(context.Cause(loadCtx), ErrUnloaded) {
		return ErrUnloaded
	}
	return err
}

// FreePort picks a free loopback TCP port. Another program may take it
// before the child binds it: PortTaken then says so.
func FreePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// ServedContext is the context FastFlowLM and oflm (its fork) serve for
// --ctx-len n: at least 512, rounded up to a power of two (FLM's
// docs/cli.md; research/flm.md §4, research/oflm.md §3).
func ServedContext(n int) int {
	c := 512
	for c < n {
		c *= 2
	}
	return c
}
