package instance

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// TestMain lets the test binary be the "other instance" of a test: with
// INSTANCE_TEST_HOLD set it takes the instance in that folder (over the
// channel INSTANCE_TEST_CHANNEL names), says "held", and serves until
// its stdin closes.
func TestMain(m *testing.M) {
	if dir := os.Getenv("INSTANCE_TEST_HOLD"); dir != "" {
		ch := channels()[os.Getenv("INSTANCE_TEST_CHANNEL")]
		inst, err := Acquire(Options{Dir: dir, Channel: ch})
		if err != nil {
			os.Stdout.WriteString("error: " + err.Error() + "\n")
			os.Exit(1)
		}
		ctx, cancel := context.WithCancel(context.Background())
		go inst.Serve(ctx, func(ctx context.Context, req string) error {
			if req != OpenChat {
				return errors.New("what is " + req)
			}
			os.Stdout.WriteString("asked " + req + "\n")
			return nil
		})
		os.Stdout.WriteString("held\n")
		bufio.NewReader(os.Stdin).ReadString('\n')
		cancel()
		inst.Close()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// channels are the channels this system can carry (Unix sockets are not
// tried on Windows: Wine has none).
func channels() map[string]Channel {
	chs := map[string]Channel{"loopback": LoopbackChannel{}}
	if runtime.GOOS != "windows" {
		chs["unix"] = UnixChannel{}
	}
	return chs
}

// tempDir is t.TempDir, except that a folder Wine cannot remove is left
// behind rather than failing the test (Go's RemoveAll uses a Windows
// call Wine 8 lacks).
func tempDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "instance-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

func TestSecondAcquireIsRefusedAndNotifies(t *testing.T) {
	for name, ch := range channels() {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(tempDir(t), "run")
			first, err := Acquire(Options{Dir: dir, Channel: ch})
			if err != nil {
				t.Fatal(err)
			}
			asked := make(chan string, 4)
			ctx, cancel := context.WithCancel(context.Background())
			served := make(chan error)
			go func() {
				served <- first.Serve(ctx, func(ctx context.Context, req string) error {
					asked <- req
					if req == "fail" {
						return errors.New("no browser\nhere")
					}
					return nil
				})
			}()
			if _, err := Acquire(Options{Dir: dir, Channel: ch}); !errors.Is(err, ErrRunning) {
				t.Fatalf("second Acquire: %v, want ErrRunning", err)
			}
			if err := Notify(context.Background(), dir, ch, OpenChat); err != nil {
				t.Fatal(err)
			}
			if got := <-asked; got != OpenChat {
				t.Fatalf("first instance was asked %q", got)
			}
			if err := Notify(context.Background(), dir, ch, "fail"); err == nil || !strings.Contains(err.Error(), "no browser here") {
				t.Fatalf("a failed request: %v", err)
			}
			<-asked
			cancel() // ends Serve and releases the instance
			if err := <-served; err != nil {
				t.Fatal(err)
			}
			again, err := Acquire(Options{Dir: dir, Channel: ch})
			if err != nil {
				t.Fatalf("Acquire after the first closed: %v", err)
			}
			again.Close()
			if fi, err := os.Stat(dir); err != nil || (runtime.GOOS != "windows" && fi.Mode().Perm() != 0o700) {
				t.Errorf("instance folder: %v %v; want 0700", fi.Mode(), err)
			}
		})
	}
}

// TestLoopbackNeedsTheSecret: a process that reaches the port but cannot
// read the instance folder gets nothing done.
func TestLoopbackNeedsTheSecret(t *testing.T) {
	dir := tempDir(t)
	inst, err := Acquire(Options{Dir: dir, Channel: LoopbackChannel{}})
	if err != nil {
		t.Fatal(err)
	}
	defer inst.Close()
	asked := make(chan string, 1)
	go inst.Serve(context.Background(), func(ctx context.Context, req string) error { asked <- req; return nil })
	b, err := os.ReadFile(filepath.Join(dir, addrName))
	if err != nil {
		t.Fatal(err)
	}
	if runtime.GOOS != "windows" {
		if fi, _ := os.Stat(filepath.Join(dir, addrName)); fi.Mode().Perm() != 0o600 {
			t.Errorf("%s is %v; want 0600", addrName, fi.Mode())
		}
	}
	addr, _, _ := strings.Cut(string(b), " ")
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "npuchat guessed\n%s\n", OpenChat)
	reply, _ := bufio.NewReader(c).ReadString('\n')
	if !strings.Contains(reply, "wrong secret") {
		t.Fatalf("reply %q", reply)
	}
	// answer writes its reply after handle returns, and handle sends on
	// a buffered channel: a request handled is in asked by now.
	select {
	case req := <-asked:
		t.Fatalf("a request without the secret was handled: %q", req)
	default:
	}
}

// TestLockIsHeldAcrossProcesses: another process holds the instance; this
// one is refused and its request reaches that process. When that process
// ends, the lock is free again (the kernel drops it).
func TestLockIsHeldAcrossProcesses(t *testing.T) {
	for name, ch := range channels() {
		t.Run(name, func(t *testing.T) {
			dir := tempDir(t)
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), "INSTANCE_TEST_HOLD="+dir, "INSTANCE_TEST_CHANNEL="+name)
			stdin, _ := cmd.StdinPipe()
			out, _ := cmd.StdoutPipe()
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			r := bufio.NewReader(out)
			if line, _ := r.ReadString('\n'); line != "held\n" {
				t.Fatalf("child: %q", line)
			}
			if _, err := Acquire(Options{Dir: dir, Channel: ch}); !errors.Is(err, ErrRunning) {
				t.Fatalf("Acquire while another process holds it: %v", err)
			}
			if err := Notify(context.Background(), dir, ch, OpenChat); err != nil {
				t.Fatal(err)
			}
			if line, _ := r.ReadString('\n'); line != "asked open\n" {
				t.Fatalf("child: %q", line)
			}
			cmd.Process.Kill() // dies without Close: its socket or address file stays behind
			cmd.Wait()
			stdin.Close()
			inst, err := Acquire(Options{Dir: dir, Channel: ch})
			if err != nil {
				t.Fatalf("Acquire after the holder died: %v", err)
			}
			defer inst.Close()
			go inst.Serve(context.Background(), func(context.Context, string) error { return nil })
			if err := Notify(context.Background(), dir, ch, OpenChat); err != nil {
				t.Fatalf("Notify the new instance (what the dead one left replaced): %v", err)
			}
		})
	}
}

func TestNotifyWithNoInstanceFails(t *testing.T) {
	for name, ch := range channels() {
		// Nobody listens: Notify returns with its context's deadline (a
		// hang would be caught by go test's own timeout; nothing is timed).
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		err := Notify(ctx, tempDir(t), ch, OpenChat)
		cancel()
		if err == nil || !strings.Contains(err.Error(), "does not answer") {
			t.Fatalf("%s: Notify: %v", name, err)
		}
	}
}

func TestDefaultDir(t *testing.T) {
	cases := []struct {
		goos string
		env  map[string]string
		want string
	}{
		{"windows", map[string]string{"LOCALAPPDATA": `C:\Users\u\AppData\Local`}, `C:\Users\u\AppData\Local\npuchat\run`},
		{"windows", map[string]string{"USERPROFILE": `C:\Users\u`}, `C:\Users\u\AppData\Local\npuchat\run`},
	}
	if runtime.GOOS != "windows" {
		cases = append(cases, struct {
			goos string
			env  map[string]string
			want string
		}{"linux", map[string]string{"XDG_RUNTIME_DIR": "/run/user/1000"}, "/run/user/1000/npuchat"})
	}
	for _, c := range cases {
		got, err := DefaultDir(c.goos, func(k string) string { return c.env[k] })
		if err != nil || got != c.want {
			t.Errorf("%s %v: %q %v, want %q", c.goos, c.env, got, err, c.want)
		}
	}
}

// flakyChannel is a channel whose listener fails its first Accept with
// a passing error (as EMFILE does when the process is out of file
// handles for a moment).
type flakyChannel struct{ Channel }

func (c flakyChannel) Listen(dir string) (net.Listener, string, error) {
	ln, secret, err := c.Channel.Listen(dir)
	if err != nil {
		return nil, "", err
	}
	return &flakyListener{Listener: ln}, secret, nil
}

type flakyListener struct {
	net.Listener
	failed atomic.Bool
}

func (l *flakyListener) Accept() (net.Conn, error) {
	if !l.failed.Swap(true) {
		return nil, &net.OpError{Op: "accept", Net: "unix", Err: syscall.EMFILE}
	}
	return l.Listener.Accept()
}

// TestServeOutlivesAFailedAccept: one failed accept does not end the
// answering of second launches for the rest of the run.
func TestServeOutlivesAFailedAccept(t *testing.T) {
	dir := tempDir(t)
	ch := DefaultChannel(runtime.GOOS)
	inst, err := Acquire(Options{Dir: dir, Channel: flakyChannel{ch}})
	if err != nil {
		t.Fatal(err)
	}
	defer inst.Close()
	served := make(chan error, 1)
	go func() { served <- inst.Serve(context.Background(), func(context.Context, string) error { return nil }) }()
	if err := Notify(context.Background(), dir, ch, OpenChat); err != nil {
		t.Fatalf("notify after a failed accept: %v", err)
	}
	select {
	case err := <-served:
		t.Fatalf("Serve ended: %v", err)
	default:
	}
}

// TestLongFirstLineIsNotRead: a caller that sends a long first line
// without a newline (1 GB took the tray to 2.3 GB) is refused after a
// few hundred bytes, on every channel, and the instance still answers
// the next second launch. Many such callers at once do not block it for
// good either.
func TestLongFirstLineIsNotRead(t *testing.T) {
	for name, ch := range channels() {
		t.Run(name, func(t *testing.T) {
			dir := tempDir(t)
			inst, err := Acquire(Options{Dir: dir, Channel: ch})
			if err != nil {
				t.Fatal(err)
			}
			defer inst.Close()
			asked := make(chan string, 4)
			go inst.Serve(context.Background(), func(ctx context.Context, req string) error { asked <- req; return nil })
			c, _, err := ch.Dial(context.Background(), dir)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(20 * time.Second))
			// 256 MiB with no newline: more than the kernel's socket
			// buffers hold, so the writes can only all succeed if the
			// instance reads them.
			chunk := []byte(strings.Repeat("x", 1<<16))
			written := 0
			for written < 256<<20 {
				n, err := c.Write(chunk)
				written += n
				if err != nil {
					break
				}
			}
			if written >= 256<<20 {
				t.Fatalf("the instance read %d bytes of a first line without a newline", written)
			}
			select {
			case req := <-asked:
				t.Fatalf("a request was handled: %q", req)
			default:
			}
			if err := Notify(context.Background(), dir, ch, OpenChat); err != nil {
				t.Fatalf("notify after a long line: %v", err)
			}
		})
	}
}

// TestLongRequestLineIsRefused: with the right secret, a request line
// longer than a request is refused, not read whole.
func TestLongRequestLineIsRefused(t *testing.T) {
	dir := tempDir(t)
	ch := LoopbackChannel{}
	inst, err := Acquire(Options{Dir: dir, Channel: ch})
	if err != nil {
		t.Fatal(err)
	}
	defer inst.Close()
	go inst.Serve(context.Background(), func(ctx context.Context, req string) error { return nil })
	c, secret, err := ch.Dial(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "npuchat %s\n%s\n", secret, strings.Repeat("open", 100))
	reply, _ := bufio.NewReader(c).ReadString('\n')
	if !strings.Contains(reply, "longer than") {
		t.Fatalf("reply %q", reply)
	}
}
