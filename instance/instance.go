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
// leaves a stale "already running". The channel is an AF_UNIX stream
// socket on both, which Windows has had since Windows 10 1803 and Go's
// net package supports there; the socket's folder is per user (the
// Windows profile's ACL; the runtime folder's 0700 on Linux), so no
// other user can connect. The protocol is one line each way: the
// request ("open") and "ok" or "error: why".
package instance

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
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
	socketName = "instance.sock"
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
}

// Instance is the first instance's hold: the lock and the listening
// socket.
type Instance struct {
	dir    string
	unlock func() error
	ln     net.Listener

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
	sock := filepath.Join(opts.Dir, socketName)
	// We hold the lock, so a socket file left here is from an instance
	// that died.
	if err := os.Remove(sock); err != nil && !errors.Is(err, os.ErrNotExist) {
		unlock()
		return nil, fmt.Errorf("single instance: remove the old socket: %w", err)
	}
	ln, err := net.Listen("unix", sock)
	if err != nil {
		unlock()
		return nil, fmt.Errorf("single instance: listen on %s: %w", sock, err)
	}
	return &Instance{dir: opts.Dir, unlock: unlock, ln: ln}, nil
}

// Serve answers second launches until ctx ends or Close: each request
// is passed to handle, and its error (if any) is sent back.
func (i *Instance) Serve(ctx context.Context, handle func(ctx context.Context, request string) error) error {
	stop := context.AfterFunc(ctx, func() { i.Close() })
	defer stop()
	for {
		c, err := i.ln.Accept()
		if err != nil {
			i.mu.Lock()
			closed := i.closed
			i.mu.Unlock()
			if closed {
				return nil
			}
			return fmt.Errorf("single instance: %w", err)
		}
		go i.answer(ctx, c, handle)
	}
}

func (i *Instance) answer(ctx context.Context, c net.Conn, handle func(context.Context, string) error) {
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return
	}
	reply := "ok\n"
	if err := handle(ctx, strings.TrimSpace(line)); err != nil {
		reply = "error: " + strings.ReplaceAll(err.Error(), "\n", " ") + "\n"
	}
	c.Write([]byte(reply))
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
	os.Remove(filepath.Join(i.dir, socketName))
	return errors.Join(err, i.unlock())
}

// Notify sends request to the running instance and waits for its answer.
// It tries for a few seconds, since the first instance may be starting
// (it holds the lock before it listens).
func Notify(ctx context.Context, dir, request string) error {
	sock := filepath.Join(dir, socketName)
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var d net.Dialer
	for {
		c, err := d.DialContext(ctx, "unix", sock)
		if err == nil {
			defer c.Close()
			if dl, ok := ctx.Deadline(); ok {
				c.SetDeadline(dl)
			}
			if _, err := fmt.Fprintf(c, "%s\n", request); err != nil {
				return fmt.Errorf("tell the running NPU Chat to %s: %w", request, err)
			}
			reply, err := bufio.NewReader(c).ReadString('\n')
			if err != nil {
				return fmt.Errorf("tell the running NPU Chat to %s: no answer: %w", request, err)
			}
			if reply = strings.TrimSpace(reply); reply != "ok" {
				return fmt.Errorf("the running NPU Chat could not %s: %s", request, strings.TrimPrefix(reply, "error: "))
			}
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("tell the running NPU Chat to %s: it does not answer on %s: %w", request, sock, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
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
