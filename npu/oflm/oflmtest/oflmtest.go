// Package oflmtest builds the fake `oflm` executable (npu/oflm/fakeoflm)
// and runs the control listener it reports to, so that tests of the oflm
// route run on machines without an NPU and never sleep to order events.
// It is a test helper package: only tests import it.
//
// The fake's quirks and failure modes are chosen with FAKEOFLM_MODE (see
// the fake's package doc); pass it, and Control.Env, in the backend's
// Options.Env.
package oflmtest

import (
	"bufio"
	"encoding/json"
	"net"
	"os"
	"sync"
	"testing"

	"github.com/npuchat/npuchat/npu/fakecli"
)

// FakePackage is the import path of the fake oflm's main package.
const FakePackage = "github.com/npuchat/npuchat/npu/oflm/fakeoflm"

// The fake's modes (FAKEOFLM_MODE, comma-separated).
const (
	ModeLoadFail  = "loadfail"  // the port opens with model-faker; completions answer 500 model_load_failed
	ModeRunOn     = "runon"     // <|im_end|> and a next turn streamed until max_tokens
	ModeHold      = "hold"      // the stream stays open after the answer until the client goes
	ModeCrash     = "crash"     // exit 139 after FAKEOFLM_CRASH_AFTER answer chunks (default 2)
	ModeDrop      = "drop"      // the connection dropped after FAKEOFLM_CRASH_AFTER answer chunks; oflm serves on
	ModeBusyPort  = "busyport"  // every serve fails to bind: "Address already in use"
	ModeBusyOnce  = "busyonce"  // the first serve (per FAKEOFLM_STATE folder) fails to bind
	ModeSlowStart = "slowstart" // the load waits at the "load" gate
	ModeNotReady  = "notready"  // validate says not ready
)

// Build compiles the fake oflm into a temporary folder of t and returns
// its path (…/oflm, or oflm.exe on Windows).
func Build(t testing.TB) string {
	t.Helper()
	return fakecli.BuildTemp(t, "oflm", FakePackage)
}

// BuildTo compiles the fake oflm into dir and returns its path. It runs
// `go build`, so it must run inside the npuchat module, as tests do.
func BuildTo(dir string) (string, error) { return fakecli.Build(dir, "oflm", FakePackage) }

// Event is one thing a fake oflm reported.
type Event struct {
	Event  string            `json:"event"`  // serve, request, disconnected, finished, gate
	Gate   string            `json:"gate"`   // a gate's name
	Args   []string          `json:"args"`   // serve: its arguments after "serve"
	Env    map[string]string `json:"env"`    // serve: its OFLM_* and FLM_* variables
	PID    int               `json:"pid"`    // serve: its process id
	Body   map[string]any    `json:"body"`   // request: the JSON body
	Sent   int               `json:"sent"`   // disconnected, finished: chunks streamed
	Finish string            `json:"finish"` // finished: the finish reason
}

// Control is the listener fake oflm processes report their events to,
// and the keeper of their gates.
type Control struct {
	ln net.Listener

	mu       sync.Mutex
	events   []Event
	changed  chan struct{} // closed and replaced when an event arrives
	released map[string]bool
	waiting  map[string][]net.Conn
}

// NewControl starts a control listener that closes with t.
func NewControl(t testing.TB) *Control {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := &Control{ln: ln, changed: make(chan struct{}), released: map[string]bool{}, waiting: map[string][]net.Conn{}}
	go c.accept()
	t.Cleanup(func() {
		ln.Close()
		c.mu.Lock()
		for _, conns := range c.waiting {
			for _, conn := range conns {
				conn.Close()
			}
		}
		c.mu.Unlock()
	})
	return c
}

// Env is the environment entry that points a fake at c.
func (c *Control) Env() string { return "FAKEOFLM_CONTROL=" + c.ln.Addr().String() }

func (c *Control) accept() {
	for {
		conn, err := c.ln.Accept()
		if err != nil {
			return
		}
		go c.handle(conn)
	}
}

func (c *Control) handle(conn net.Conn) {
	line, err := bufio.NewReader(conn).ReadBytes('\n')
	if err != nil {
		conn.Close()
		return
	}
	var ev Event
	if err := json.Unmarshal(line, &ev); err != nil {
		conn.Close()
		return
	}
	c.mu.Lock()
	c.events = append(c.events, ev)
	close(c.changed)
	c.changed = make(chan struct{})
	hold := ev.Event == "gate" && !c.released[ev.Gate]
	if hold {
		c.waiting[ev.Gate] = append(c.waiting[ev.Gate], conn)
	}
	c.mu.Unlock()
	if !hold {
		conn.Write([]byte("ok\n"))
		conn.Close()
	}
}

// Release opens the named gate: fakes waiting at it go on, and later ones
// pass at once.
func (c *Control) Release(gate string) {
	c.mu.Lock()
	c.released[gate] = true
	conns := c.waiting[gate]
	delete(c.waiting, gate)
	c.mu.Unlock()
	for _, conn := range conns {
		conn.Write([]byte("ok\n"))
		conn.Close()
	}
}

// Events returns the events named name so far (all when name is "").
func (c *Control) Events(name string) []Event {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []Event
	for _, ev := range c.events {
		if name == "" || ev.Event == name {
			out = append(out, ev)
		}
	}
	return out
}

// Wait blocks until n events named name have arrived and returns the
// n-th (1-based). A test that waits for an event that never comes is
// ended by go test's -timeout.
func (c *Control) Wait(name string, n int) Event {
	for {
		c.mu.Lock()
		k := 0
		for _, ev := range c.events {
			if ev.Event == name {
				k++
				if k == n {
					c.mu.Unlock()
					return ev
				}
			}
		}
		ch := c.changed
		c.mu.Unlock()
		<-ch
	}
}

// EditJSON rewrites the JSON object in the file at path through edit, for
// tests that spoil one field of a fixture (a kernel manifest, a config).
func EditJSON(t testing.TB, path string, edit func(map[string]any)) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("edit %s: %v", path, err)
	}
	edit(m)
	if b, err = json.Marshal(m); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
