// Package instance keeps NPU Chat to one instance per user. The first
// instance holds an exclusive lock on a file in a folder only this user
// can reach and listens on a local socket beside it; a second launch
// finds the lock taken, sends its request over the socket (open the
// chat), and exits. Nothing listens on the network.
//
// Where the files live ([DefaultDir]):
//
//	Linux    $XDG_RUNTIME_DIR/npuchat/   (or a 0700 npuchat-UID folder in /tmp)
//	Windows  %LOCALAPPDATA%\npuchat\run\
//
// The lock is flock(2) on Unix and LockFileEx on Windows, behind
// [Locker]: the kernel drops it when the process dies, so a crash never
// leaves a stale "already running". The channel, behind [Channel], is a
// Unix socket in the instance folder on Unix (the folder's 0700 keeps
// other users out), and on Windows a random loopback port whose number
// and a random secret are written to a file in the instance folder,
// which only this user can read (AF_UNIX sockets are missing on older
// Windows 10 builds and under Wine). The protocol is lines: the caller
// sends "npuchat SECRET" and the request ("open"); the instance answers
// "ok" or "error: why". The instance reads at most 128 bytes a line and
// checks the secret before it reads the request, answers a few callers
// at a time, and gives each 5 s to send its lines.
package instance

import (
	"bufio"
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"
)

// Requests a second launch can send.
const (
	// OpenChat asks the running instance to open the chat page.
	OpenChat = "open"
)

// File names in the instance folder.
const (
	lockName   = "instance.lock"
	socketName = "instance.sock" // UnixChannel's socket
	addrName   = "instance.addr" // LoopbackChannel's port and secret
)

// ErrRunning says that another instance holds the lock.
var ErrRunning = errors.New("NPU Chat is already running for this user")

// Locker takes the exclusive per-user lock; the real one is
// [FileLocker], tests may fake it.
type Locker interface {
	// TryLock takes the lock at path without waiting; it returns an
	// error wrapping ErrRunning when another process holds it. The
	// returned function releases it.
	TryLock(path string) (unlock func() error, err error)
}

// Options configure Acquire.
type Options struct {
	// Dir is the instance folder (DefaultDir's).
	Dir string
	// Locker takes the lock (FileLocker when nil).
	Locker Locker
	// Channel carries requests (DefaultChannel(runtime.GOOS) when nil).
	Channel Channel
}

// Instance is the first instance's hold: the lock and the listening
// socket.
type Instance struct {
	dir    string
	unlock func() error
	ch     Channel
	ln     net.Listener
	secret string

	mu     sync.Mutex
	closed bool
}

// Acquire makes this process the user's one instance, or returns an
// error wrapping ErrRunning when another instance runs (then call
// Notify).
func Acquire(opts Options) (*Instance, error) {
	if opts.Locker == nil {
		opts.Locker = FileLocker{}
	}
	if err := os.MkdirAll(opts.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("single instance: %w", err)
	}
	unlock, err := opts.Locker.TryLock(filepath.Join(opts.Dir, lockName))
	if err != nil {
		return nil, err
	}
	if opts.Channel == nil {
		opts.Channel = DefaultChannel(runtime.GOOS)
	}
	ln, secret, err := opts.Channel.Listen(opts.Dir)
	if err != nil {
		unlock()
		return nil, fmt.Errorf("single instance: listen in %s: %w", opts.Dir, err)
	}
	return &Instance{dir: opts.Dir, unlock: unlock, ch: opts.Channel, ln: ln, secret: secret}, nil
}

// Serve answers second launches until ctx ends or Close: each request
// is passed to handle, and its error (if any) is sent back. A failed
// accept is tried again; Serve returns nil.
func (i *Instance) Serve(ctx context.Context, handle func(ctx context.Context, request string) error) error {
	stop := context.AfterFunc(ctx, func() { i.Close() })
	defer stop()
	var wait time.Duration // after failed accepts, as net/http waits
	busy := make(chan struct{}, maxCallers)
	for {
		c, err := i.ln.Accept()
		if err != nil {
			i.mu.Lock()
			closed := i.closed
			i.mu.Unlock()
			if closed {
				return nil
			}
			// A failed accept (out of file handles for a moment, an
			// aborted connection) must not end the answering of second
			// launches for the rest of the run: try again, waiting
			// longer each time, up to a second.
			wait = min(max(2*wait, 5*time.Millisecond), time.Second)
			select {
			case <-time.After(wait):
				continue
			case <-ctx.Done():
				return nil
			}
		}
		wait = 0
		select {
		case busy <- struct{}{}:
			go func() {
				defer func() { <-busy }()
				i.answer(ctx, c, handle)
			}()
		default:
			c.Close() // maxCallers are being answered
		}
	}
}

// maxLine bounds each line a caller sends: "npuchat SECRET" (the secret
// is 32 hex digits) and the request ("open"). Nothing longer is read, so
// a local process that can reach the channel (on Windows, any local
// account can reach the loopback port) cannot make the instance hold
// more than this per connection.
const maxLine = 128

// maxCallers bounds the connections answered at once; more are closed
// at once (a second launch tries again, see Notify).
const maxCallers = 8

// lineTimeout bounds the time a caller has to send its lines.
const lineTimeout = 5 * time.Second

func (i *Instance) answer(ctx context.Context, c net.Conn, handle func(context.Context, string) error) {
	defer c.Close()
	c.SetDeadline(time.Now().Add(lineTimeout))
	// At most two lines are read, each at most maxLine bytes.
	r := bufio.NewReaderSize(&io.LimitedReader{R: c, N: 2 * maxLine}, 2*maxLine)
	hello, err := readLine(r)
	if err != nil {
		c.Write([]byte("error: " + err.Error() + "\n"))
		return
	}
	got, _ := strings.CutPrefix(hello, "npuchat ")
	if subtle.ConstantTimeCompare([]byte(got), []byte(i.secret)) != 1 {
		c.Write([]byte("error: wrong secret\n"))
		return
	}
	line, err := readLine(r)
	if err != nil {
		c.Write([]byte("error: " + err.Error() + "\n"))
		return
	}
	c.SetDeadline(time.Now().Add(10 * time.Second)) // for handle's answer
	reply := "ok\n"
	if err := handle(ctx, line); err != nil {
		reply = "error: " + strings.ReplaceAll(err.Error(), "\n", " ") + "\n"
	}
	c.Write([]byte(reply))
}

// readLine reads one line of at most maxLine bytes, without its end.
func readLine(r *bufio.Reader) (string, error) {
	b, err := r.ReadSlice('\n')
	switch {
	case len(b) > maxLine || errors.Is(err, bufio.ErrBufferFull) || (errors.Is(err, io.EOF) && len(b) > 0):
		return "", fmt.Errorf("a line longer than %d bytes", maxLine)
	case err != nil:
		return "", fmt.Errorf("no line: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}

// Close stops listening and releases the lock.
func (i *Instance) Close() error {
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.closed {
		return nil
	}
	i.closed = true
	err := i.ln.Close()
	i.ch.Remove(i.dir)
	return errors.Join(err, i.unlock())
}

// Notify sends request to the running instance and waits for its answer.
// It tries for a few seconds, since the first instance may be starting
// (it holds the lock before it listens). ch is the channel
// (DefaultChannel(runtime.GOOS) when nil).
func Notify(ctx context.Context, dir string, ch Channel, request string) error {
	if ch == nil {
		ch = DefaultChannel(runtime.GOOS)
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	for {
		again, err := notifyOnce(ctx, dir, ch, request)
		if !again {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("tell the running NPU Chat to %s: it does not answer in %s: %w", request, dir, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// notifyOnce sends request once; again says whether to try again (the
// instance is not listening yet, or it closed the connection unanswered
// because it was answering maxCallers others).
func notifyOnce(ctx context.Context, dir string, ch Channel, request string) (again bool, err error) {
	c, secret, err := ch.Dial(ctx, dir)
	if err != nil {
		return true, err
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		c.SetDeadline(dl)
	}
	if _, err := fmt.Fprintf(c, "npuchat %s\n%s\n", secret, request); err != nil {
		return true, fmt.Errorf("tell the running NPU Chat to %s: %w", request, err)
	}
	reply, err := bufio.NewReaderSize(io.LimitReader(c, 4096), 4096).ReadString('\n')
	if err != nil {
		return ctx.Err() == nil, fmt.Errorf("tell the running NPU Chat to %s: no answer: %w", request, err)
	}
	if reply = strings.TrimSpace(reply); reply != "ok" {
		return false, fmt.Errorf("the running NPU Chat could not %s: %s", request, strings.TrimPrefix(reply, "error: "))
	}
	return false, nil
}

// DefaultDir is the instance folder for this user on goos; getenv reads
// XDG_RUNTIME_DIR and LOCALAPPDATA.
func DefaultDir(goos string, getenv func(string) string) (string, error) {
	switch goos {
	case "windows":
		base := getenv("LOCALAPPDATA")
		if base == "" {
			if p := getenv("USERPROFILE"); p != "" {
				base = p + `\AppData\Local`
			}
		}
		if base == "" {
			return "", errors.New("single instance: LOCALAPPDATA is not set")
		}
		return base + `\npuchat\run`, nil
	default:
		if d := getenv("XDG_RUNTIME_DIR"); d != "" {
			return filepath.Join(d, "npuchat"), nil
		}
		return privateTempDir()
	}
}
