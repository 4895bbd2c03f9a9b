package mcphost

import (
	"context"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The test binary is also every MCP server and parent process the tests
// need: with MCPHOST_TEST_ROLE set it plays that role instead of running
// the tests.
const roleEnv = "MCPHOST_TEST_ROLE"

func TestMain(m *testing.M) {
	switch os.Getenv(roleEnv) {
	case "":
		os.Exit(m.Run())
	case "server":
		os.Exit(serveStdio(false))
	case "stubborn":
		os.Exit(serveStdio(true))
	case "garbage":
		// Not MCP at all: a greeting on stdout, then wait for stdin to close.
		fmt.Println("Hello! Type a command:")
		io.Copy(io.Discard, os.Stdin)
		os.Exit(0)
	case "silent":
		// Reads its input and never answers: a handshake that never ends.
		io.Copy(io.Discard, os.Stdin)
		os.Exit(0)
	case "parent":
		os.Exit(orphanParent())
	default:
		fmt.Fprintln(os.Stderr, "unknown role", os.Getenv(roleEnv))
		os.Exit(2)
	}
}

// serveStdio is the stdio test server. On stdin's end it writes the file
// MCPHOST_TEST_MARK (if set) and exits 0, unless stubborn: then it ignores
// SIGTERM and the end of its input, and only SIGKILL ends it.
func serveStdio(stubborn bool) int {
	if stubborn {
		signal.Ignore(syscall.SIGTERM)
	}
	srv := testServer(nil)
	err := srv.Run(context.Background(), &mcp.StdioTransport{})
	if mark := os.Getenv("MCPHOST_TEST_MARK"); mark != "" {
		os.WriteFile(mark, []byte("input closed\n"), 0o600)
	}
	for stubborn {
		time.Sleep(time.Hour)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "serve:", err)
		return 1
	}
	return 0
}

type echoIn struct {
	Text string `json:"text" jsonschema:"the text to say back"`
}

type bigIn struct {
	Bytes int `json:"bytes"`
}

// gate is what the in-process (HTTP) server's "wait" tool reports to the
// test: that a call arrived, and that its context ended.
type gate struct {
	entered   chan struct{}
	cancelled chan struct{}
}

// testServer is the MCP server of every test: echo, big, block, crash,
// garble, image and pid; g (HTTP only) adds wait.
func testServer(g *gate) *mcp.Server {
	srv := mcp.NewServer(&mcp.Implementation{Name: "mcphost-test", Version: "1"}, nil)
	text := func(s string) *mcp.CallToolResult {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "echo", Description: "Says the text back."},
		func(ctx context.Context, req *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, any, error) {
			return text("echo: " + in.Text), nil, nil
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "big", Description: "Returns that many bytes of text."},
		func(ctx context.Context, req *mcp.CallToolRequest, in bigIn) (*mcp.CallToolResult, any, error) {
			// "é" is two bytes: a cut at an odd place lands inside one.
			return text(strings.Repeat("é", in.Bytes/2)), nil, nil
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "block", Description: "Never answers."},
		func(ctx context.Context, req *mcp.CallToolRequest, in struct{}) (*mcp.CallToolResult, any, error) {
			select {}
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "crash", Description: "Exits mid-call."},
		func(ctx context.Context, req *mcp.CallToolRequest, in struct{}) (*mcp.CallToolResult, any, error) {
			fmt.Fprintln(os.Stderr, "boom: the test server crashes on purpose")
			os.Exit(3)
			return nil, nil, nil
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "garble", Description: "Writes something that is not MCP on stdout."},
		func(ctx context.Context, req *mcp.CallToolRequest, in struct{}) (*mcp.CallToolResult, any, error) {
			os.Stdout.WriteString("DEBUG: this line should have gone to stderr\n")
			select {}
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "image", Description: "Returns a picture and a caption."},
		func(ctx context.Context, req *mcp.CallToolRequest, in struct{}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{
				&mcp.ImageContent{MIMEType: "image/png", Data: make([]byte, 3000)},
				&mcp.TextContent{Text: "a caption\x1b[31m in red\x00"},
			}}, nil, nil
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "fail", Description: "Reports a failure of the tool."},
		func(ctx context.Context, req *mcp.CallToolRequest, in struct{}) (*mcp.CallToolResult, any, error) {
			return nil, nil, fmt.Errorf("the disk is full")
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "env", Description: "Says the environment."},
		func(ctx context.Context, req *mcp.CallToolRequest, in struct{}) (*mcp.CallToolResult, any, error) {
			return text(strings.Join(os.Environ(), "\n")), nil, nil
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "pid", Description: "Says the server's process id."},
		func(ctx context.Context, req *mcp.CallToolRequest, in struct{}) (*mcp.CallToolResult, any, error) {
			return text(fmt.Sprint(os.Getpid())), nil, nil
		})
	if g != nil {
		mcp.AddTool(srv, &mcp.Tool{Name: "wait", Description: "Waits until the call is cancelled."},
			func(ctx context.Context, req *mcp.CallToolRequest, in struct{}) (*mcp.CallToolResult, any, error) {
				g.entered <- struct{}{}
				<-ctx.Done()
				g.cancelled <- struct{}{}
				return nil, nil, ctx.Err()
			})
	}
	return srv
}

// stdioServer is a Server that runs this test binary as the stdio test
// server in role (server, stubborn, garbage), with env (name, value
// pairs) added.
func stdioServer(t *testing.T, name, role string, env ...string) Server {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	s := stdioServerFor(exe, name, role)
	for i := 0; i+1 < len(env); i += 2 {
		s.Env[env[i]] = env[i+1]
	}
	return s
}

// stdioServerFor is stdioServer's Server for the test binary exe.
func stdioServerFor(exe, name, role string) Server {
	return Server{Name: name, Command: []string{exe, "-test.run=^$"}, Env: map[string]string{roleEnv: role}, Enabled: true}
}

// httpServer serves the test server over streamable HTTP, answering only
// requests that carry "Authorization: Bearer <token>" when token is set.
// It records every Authorization header it saw.
type httpServer struct {
	*httptest.Server
	gate gate
	mu   sync.Mutex
	auth []string
}

func newHTTPServer(t *testing.T, token string, tls bool) *httpServer {
	t.Helper()
	hs := &httpServer{gate: gate{entered: make(chan struct{}, 1), cancelled: make(chan struct{}, 1)}}
	srv := testServer(&hs.gate)
	mcpHandler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	hs.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got := r.Header.Get("Authorization")
		hs.mu.Lock()
		hs.auth = append(hs.auth, got)
		hs.mu.Unlock()
		if token != "" && got != "Bearer "+token {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		mcpHandler.ServeHTTP(w, r)
	}))
	// The TLS test's refused handshakes are expected: keep them out of
	// the test's output.
	hs.Config.ErrorLog = log.New(io.Discard, "", 0)
	if tls {
		hs.StartTLS()
	} else {
		hs.Start()
	}
	t.Cleanup(hs.Close)
	return hs
}

// authHeaders is every Authorization header the server saw.
func (hs *httpServer) authHeaders() []string {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	return append([]string(nil), hs.auth...)
}

// fakeClock runs the Host's idle timers when the test says.
type fakeClock struct {
	mu     sync.Mutex
	timers []*fakeTimer
	// stops hears every cancellation of a pending timer (a server taken
	// for a call).
	stops chan struct{}
}

func newFakeClock() *fakeClock { return &fakeClock{stops: make(chan struct{}, 100)} }

type fakeTimer struct {
	d       time.Duration
	f       func()
	stopped bool
}

func (c *fakeClock) AfterFunc(d time.Duration, f func()) func() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fakeTimer{d: d, f: f}
	c.timers = append(c.timers, t)
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		was := !t.stopped
		t.stopped = true
		if was {
			c.stops <- struct{}{}
		}
		return was
	}
}

// fire runs every pending timer (as if its time had come) and returns
// how many ran.
func (c *fakeClock) fire() int {
	c.mu.Lock()
	var due []*fakeTimer
	for _, t := range c.timers {
		if !t.stopped {
			t.stopped = true
			due = append(due, t)
		}
	}
	c.mu.Unlock()
	for _, t := range due {
		t.f()
	}
	return len(due)
}

// all is every timer made so far, stopped or not.
func (c *fakeClock) all() []*fakeTimer {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*fakeTimer(nil), c.timers...)
}

// startLog is a slog handler that tells started when the Host logs that a
// server process started.
type startLog struct{ started chan int }

func (l startLog) Enabled(context.Context, slog.Level) bool { return true }
func (l startLog) Handle(_ context.Context, r slog.Record) error {
	if r.Message == "MCP server started" {
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "pid" {
				l.started <- int(a.Value.Int64())
			}
			return true
		})
	}
	return nil
}
func (l startLog) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l startLog) WithGroup(string) slog.Handler      { return l }
