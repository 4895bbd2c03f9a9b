package mcphost

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/npuchat/npuchat/childproc"
)

// process is a running stdio server: the child, the pipes this side
// holds, and the tail of its standard error.
type process struct {
	// Process is the child, started by childproc.Start so that it dies
	// with NPU Chat (Pdeathsig on Linux, a job object on Windows) and
	// leads its own process group (npx runs node, uvx runs python).
	*childproc.Process
	stdin  *onceCloser // this side of the child's standard input
	stdout *os.File    // this side of the child's standard output
	stderr *tail
}

// spawn starts the server's program with its pipes: the SDK reads and
// writes messages through stdout and stdin, stderr is kept in a tail.
func spawn(s Server, baseEnv []string, waitDelay time.Duration) (*process, error) {
	cmd := exec.Command(s.Command[0], s.Command[1:]...)
	cmd.Dir = s.Dir
	cmd.Env = childEnv(baseEnv, s.Env)
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("make the server's input pipe: %w", err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, fmt.Errorf("make the server's output pipe: %w", err)
	}
	errTail := &tail{max: stderrTailBytes}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errTail
	// Stderr is copied by a goroutine Wait waits for; a grandchild that
	// keeps it open must not hold Wait past the child's exit.
	cmd.WaitDelay = waitDelay
	cp, err := childproc.Start(cmd)
	// The child has its own copies now (or failed to start).
	inR.Close()
	outW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		return nil, err
	}
	return &process{Process: cp, stdin: &onceCloser{c: inW}, stdout: outR, stderr: errTail}, nil
}

// inheritedEnv are the variables of NPU Chat's environment a server
// gets by default: the lists of the official TypeScript and Python SDKs
// (DEFAULT_INHERITED_ENV_VARS), which Claude's desktop app and others
// follow. The rest (NPU Chat's API key, a Hugging Face token, proxies)
// is not a third-party program's business; Server.Env adds what one
// needs.
var inheritedEnv = map[string][]string{
	"windows": {"APPDATA", "HOMEDRIVE", "HOMEPATH", "LOCALAPPDATA", "PATH", "PROCESSOR_ARCHITECTURE",
		"SYSTEMDRIVE", "SYSTEMROOT", "TEMP", "USERNAME", "USERPROFILE"},
	"": {"HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER"},
}

// defaultEnv is the inherited part of this process's environment; values
// that start with "()" (bash's exported functions) are left out, as the
// SDKs do.
func defaultEnv() []string {
	names := inheritedEnv[runtime.GOOS]
	if names == nil {
		names = inheritedEnv[""]
	}
	var env []string
	for _, name := range names {
		if v, ok := os.LookupEnv(name); ok && !strings.HasPrefix(v, "()") {
			env = append(env, name+"="+v)
		}
	}
	return env
}

// childEnv is base (defaultEnv() when nil) with extra set over it.
func childEnv(base []string, extra map[string]string) []string {
	if base == nil {
		base = defaultEnv()
	}
	env := make([]string, 0, len(base)+len(extra))
	for _, kv := range base {
		name, _, _ := strings.Cut(kv, "=")
		if _, over := extra[name]; !over {
			env = append(env, kv)
		}
	}
	for k, v := range extra {
		env = append(env, k+"="+v)
	}
	return env
}

// waitExit waits up to d for the child to exit.
func (p *process) waitExit(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-p.Done():
		return true
	case <-t.C:
		return false
	}
}

// stop ends the child as the MCP specification's stdio shutdown says:
// close its input, wait up to grace, SIGTERM, wait up to grace, SIGKILL
// (on Windows, terminate its job after the first wait). It returns when
// the child has been reaped.
func (p *process) stop(grace time.Duration) {
	p.stdin.Close()
	if !p.waitExit(grace) {
		if err := p.Terminate(); err != nil || !p.waitExit(grace) {
			p.Kill()
			<-p.Done()
		}
	}
	p.stdout.Close()
	p.Release()
}

// exitWords says how the child ended, for an error: "exit status 3",
// "signal: killed", with the last lines of its standard error.
func (p *process) exitWords() string {
	var b strings.Builder
	if p.Exited() {
		b.WriteString("it ended with " + p.ExitStatus())
	} else {
		b.WriteString("it is still running")
	}
	if last := p.stderr.lastLines(); last != "" {
		b.WriteString("; its last words: " + last)
	}
	return b.String()
}

// onceCloser closes its Closer once (the SDK and stop both close stdin).
type onceCloser struct {
	c    io.WriteCloser
	once sync.Once
	err  error
}

func (o *onceCloser) Write(p []byte) (int, error) { return o.c.Write(p) }

func (o *onceCloser) Close() error {
	o.once.Do(func() { o.err = o.c.Close() })
	return o.err
}

// readOnly is the child's stdout as the SDK sees it: closing it does
// nothing, so that the SDK ends a session by closing stdin, and the read
// side stays open until stop has reaped the child (closing a pipe while
// its reader is blocked is a race on some systems).
type readOnly struct{ r io.Reader }

func (r readOnly) Read(p []byte) (int, error) { return r.r.Read(p) }
func (readOnly) Close() error                 { return nil }

// stderrTailBytes is how much of a server's standard error is kept.
const stderrTailBytes = 4096

// tail keeps the last max bytes written to it.
type tail struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

// lastLines is the last few non-empty lines kept, joined with " / ",
// made safe to show (sanitized, at most 500 bytes).
func (t *tail) lastLines() string {
	t.mu.Lock()
	s := string(t.buf)
	t.mu.Unlock()
	var lines []string
	for _, l := range strings.Split(sanitize(s), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	if len(lines) > 3 {
		lines = lines[len(lines)-3:]
	}
	out := strings.Join(lines, " / ")
	if len(out) > 500 {
		out = "…" + out[len(out)-500:]
		out = strings.ToValidUTF8(out, "")
	}
	return out
}
