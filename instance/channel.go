package instance

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"

	"github.com/npuchat/npuchat/safefile"
)

// Channel is how a second launch reaches the first: the first listens,
// the second dials. Each side gets a secret that the caller sends first
// on every connection, so that only a process that can read this user's
// instance folder can make a request.
type Channel interface {
	// Listen starts listening in the instance folder dir (the lock is
	// held) and returns the secret callers must send.
	Listen(dir string) (ln net.Listener, secret string, err error)
	// Dial connects to the instance listening in dir.
	Dial(ctx context.Context, dir string) (c net.Conn, secret string, err error)
	// Remove deletes what Listen left in dir.
	Remove(dir string)
}

// DefaultChannel is the channel for goos: a Unix socket on Unix, a
// loopback port with a secret on Windows (AF_UNIX is missing on older
// Windows 10 builds and under Wine, which the tests use).
func DefaultChannel(goos string) Channel {
	if goos == "windows" {
		return LoopbackChannel{}
	}
	return UnixChannel{}
}

// UnixChannel is a Unix domain socket, instance.sock, in the instance
// folder; the folder's permissions are the secret, so it sends "-".
type UnixChannel struct{}

// Listen implements Channel. We hold the lock, so a socket file left
// there is from an instance that died: it is replaced.
func (UnixChannel) Listen(dir string) (net.Listener, string, error) {
	sock := filepath.Join(dir, socketName)
	if err := os.Remove(sock); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, "", fmt.Errorf("remove the old socket: %w", err)
	}
	ln, err := net.Listen("unix", sock)
	if err != nil {
		return nil, "", err
	}
	return ln, "-", nil
}

// Dial implements Channel.
func (UnixChannel) Dial(ctx context.Context, dir string) (net.Conn, string, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", filepath.Join(dir, socketName))
	return c, "-", err
}

// Remove implements Channel.
func (UnixChannel) Remove(dir string) { os.Remove(filepath.Join(dir, socketName)) }

// LoopbackChannel listens on a random 127.0.0.1 port and writes the
// port and a random secret to instance.addr in the instance folder
// (readable by this user only: %LOCALAPPDATA% is the user's), so a
// process of another user cannot make requests even though it can
// reach the port.
type LoopbackChannel struct{}

// Listen implements Channel.
func (LoopbackChannel) Listen(dir string) (net.Listener, string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, "", err
	}
	b := make([]byte, 16)
	rand.Read(b)
	secret := hex.EncodeToString(b)
	path := filepath.Join(dir, addrName)
	tmp := path + ".tmp"
	err = os.WriteFile(tmp, []byte(ln.Addr().String()+" "+secret+"\n"), 0o600)
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		ln.Close()
		os.Remove(tmp)
		return nil, "", fmt.Errorf("write %s: %w", path, err)
	}
	return ln, secret, nil
}

// Dial implements Channel.
func (LoopbackChannel) Dial(ctx context.Context, dir string) (net.Conn, string, error) {
	b, err := safefile.ReadFile(filepath.Join(dir, addrName), maxAddrBytes)
	if err != nil {
		return nil, "", err
	}
	addr, secret, ok := strings.Cut(strings.TrimSpace(string(b)), " ")
	if host, _, err := net.SplitHostPort(addr); !ok || err != nil || host != "127.0.0.1" {
		return nil, "", fmt.Errorf("%s is not an instance address", filepath.Join(dir, addrName))
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	return c, secret, err
}

// Remove implements Channel.
func (LoopbackChannel) Remove(dir string) { os.Remove(filepath.Join(dir, addrName)) }

// maxAddrBytes caps the address file ("127.0.0.1:PORT SECRET").
const maxAddrBytes = 4 << 10
