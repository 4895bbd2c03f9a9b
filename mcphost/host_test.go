package mcphost

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// newHost makes a Host for servers, closed when the test ends.
func newHost(t *testing.T, servers []Server, opts Options) *Host {
	t.Helper()
	if opts.StopGrace == 0 {
		opts.StopGrace = 200 * time.Millisecond
	}
	h, err := New(servers, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

// status is the Host's Status of one server.
func status(t *testing.T, h *Host, name string) Status {
	t.Helper()
	for _, st := range h.Status() {
		if st.Name == name {
			return st
		}
	}
	t.Fatalf("no status for %q", name)
	return Status{}
}

func call(t *testing.T, h *Host, server, tool, args string) Result {
	t.Helper()
	res, err := h.CallTool(context.Background(), server, tool, json.RawMessage(args))
	if err != nil {
		t.Fatalf("call %s/%s: %v", server, tool, err)
	}
	return res
}

// TestStdioListAndCall: a stdio server starts on first use, lists its
// tools with their descriptions and schemas, answers calls, and shows as
// running with its pid.
func TestStdioListAndCall(t *testing.T) {
	h := newHost(t, []Server{stdioServer(t, "files", "server")}, Options{})
	if st := status(t, h, "files"); st.Running || st.PID != 0 {
		t.Fatalf("running before first use: %+v", st)
	}
	tools, err := h.ListTools(context.Background(), "files")
	if err != nil {
		t.Fatal(err)
	}
	var echo *Tool
	for i := range tools {
		if tools[i].Name == "echo" {
			echo = &tools[i]
		}
	}
	if echo == nil || echo.Description != "Says the text back." {
		t.Fatalf("tools %+v: no echo with its description", tools)
	}
	var schema struct {
		Type       string                     `json:"type"`
		Properties map[string]json.RawMessage `json:"properties"`
	}
	if err := json.Unmarshal(echo.InputSchema, &schema); err != nil || schema.Type != "object" || schema.Properties["text"] == nil {
		t.Errorf("echo's schema %s (%v): want an object with a text property", echo.InputSchema, err)
	}
	res := call(t, h, "files", "echo", `{"text":"hello"}`)
	if res.Text() != "echo: hello" || res.IsError || res.Cut != 0 {
		t.Errorf("echo gave %+v", res)
	}
	st := status(t, h, "files")
	pid := call(t, h, "files", "pid", "")
	if !st.Running || strconv.Itoa(st.PID) != pid.Text() || len(st.Tools) != len(tools) || st.LastError != "" {
		t.Errorf("status %+v, server says pid %s", st, pid.Text())
	}
	if res := call(t, h, "files", "fail", "{}"); !res.IsError || !strings.Contains(res.Text(), "the disk is full") {
		t.Errorf("a tool's own failure: %+v, want IsError with its words", res)
	}
	if _, err := h.CallTool(context.Background(), "files", "no-such-tool", nil); err == nil || errors.Is(err, ErrServerFailed) {
		t.Errorf("unknown tool: %v, want the server's refusal (not a failed server)", err)
	}
	if st2 := status(t, h, "files"); st2.PID != st.PID {
		t.Errorf("a refused call restarted the server: pid %d then %d", st.PID, st2.PID)
	}
}

// TestRefusedBeforeStart: unknown and disabled servers and arguments
// that are not an object are refused without starting anything.
func TestRefusedBeforeStart(t *testing.T) {
	off := stdioServer(t, "off", "server")
	off.Enabled = false
	h := newHost(t, []Server{stdioServer(t, "on", "server"), off}, Options{})
	cases := []struct {
		server, args string
		want         error
		words        string
	}{
		{"nobody", "{}", ErrUnknownServer, "nobody"},
		{"off", "{}", ErrDisabled, "turned off"},
		{"on", "[1,2]", nil, "not a JSON object"},
		{"on", "{", nil, "not a JSON object"},
		{"on", "null", nil, "not a JSON object"},
	}
	for _, c := range cases {
		_, err := h.CallTool(context.Background(), c.server, "echo", json.RawMessage(c.args))
		if err == nil || (c.want != nil && !errors.Is(err, c.want)) || !strings.Contains(err.Error(), c.words) {
			t.Errorf("%s %s: %v, want %v saying %q", c.server, c.args, err, c.want, c.words)
		}
	}
	for _, st := range h.Status() {
		if st.Running {
			t.Errorf("%s started", st.Name)
		}
	}
}

// TestCallTimeout: a tool that never answers ends at the time limit with
// ErrTimeout; the server stays up and answers the next call.
func TestCallTimeout(t *testing.T) {
	h := newHost(t, []Server{stdioServer(t, "slow", "server")}, Options{CallTimeout: 300 * time.Millisecond})
	before := call(t, h, "slow", "pid", "{}").Text()
	_, err := h.CallTool(context.Background(), "slow", "block", nil)
	if !errors.Is(err, ErrTimeout) || !strings.Contains(err.Error(), "300ms") {
		t.Fatalf("blocked call: %v, want ErrTimeout naming the limit", err)
	}
	if after := call(t, h, "slow", "pid", "{}").Text(); after != before {
		t.Errorf("the server was restarted after a timeout: pid %s then %s", before, after)
	}
	if st := status(t, h, "slow"); !strings.Contains(st.LastError, "no answer within") {
		t.Errorf("last error %q", st.LastError)
	}
}

// TestHugeResult: a result past MaxResultBytes is cut on a character
// boundary, with a marker that says how much was cut.
func TestHugeResult(t *testing.T) {
	const limit = 1001 // odd: the cut lands inside a two-byte "é"
	h := newHost(t, []Server{stdioServer(t, "big", "server")}, Options{MaxResultBytes: limit})
	res := call(t, h, "big", "big", `{"bytes":1000000}`)
	text := res.Text()
	kept, marker, ok := strings.Cut(text, "\n[…")
	if !ok || !strings.Contains(marker, "975.6 KiB more cut") || !strings.Contains(marker, "longer than 1001 bytes") {
		t.Fatalf("no marker saying what was cut: %q", text[max(0, len(text)-120):])
	}
	if len(kept) != 1000 || strings.Trim(kept, "é") != "" {
		t.Errorf("kept %d bytes (%q…), want 1000 of whole characters", len(kept), kept[:10])
	}
	if res.Cut != 1000000-1000 {
		t.Errorf("Cut %d, want %d", res.Cut, 1000000-1000)
	}
}

// TestImageDescribed: images are described, never passed on, and text's
// control characters are dropped.
func TestImageDescribed(t *testing.T) {
	h := newHost(t, []Server{stdioServer(t, "pics", "server")}, Options{})
	res := call(t, h, "pics", "image", "{}")
	want := []Part{{Kind: "image", Text: "[image: image/png, 2.9 KiB, not shown]"}, {Kind: "text", Text: "a caption[31m in red"}}
	if !slices.Equal(res.Parts, want) {
		t.Errorf("parts %q, want %q", res.Parts, want)
	}
}

// TestCrashMidCall: a server that exits during a call gives
// ErrServerFailed with its exit status and last words; another server is
// unaffected, and the crashed one starts again on the next use.
func TestCrashMidCall(t *testing.T) {
	h := newHost(t, []Server{stdioServer(t, "crashy", "server"), stdioServer(t, "steady", "server")}, Options{})
	steadyPID := call(t, h, "steady", "pid", "{}").Text()
	first := call(t, h, "crashy", "pid", "{}").Text()
	_, err := h.CallTool(context.Background(), "crashy", "crash", nil)
	if !errors.Is(err, ErrServerFailed) || !strings.Contains(err.Error(), "exit status 3") ||
		!strings.Contains(err.Error(), "boom: the test server crashes on purpose") {
		t.Fatalf("crash: %v, want ErrServerFailed with the exit status and the last words", err)
	}
	if st := status(t, h, "crashy"); st.Running || !strings.Contains(st.LastError, "exit status 3") {
		t.Errorf("after the crash: %+v", st)
	}
	if got := call(t, h, "steady", "pid", "{}").Text(); got != steadyPID {
		t.Errorf("the other server changed: pid %s then %s", steadyPID, got)
	}
	if again := call(t, h, "crashy", "pid", "{}").Text(); again == first {
		t.Errorf("the crashed server answered with its old pid %s", again)
	}
}

// TestGarbage: a server that is not MCP fails the handshake with a clear
// error; one that writes a stray line on stdout mid-call is stopped with
// an error that says what servers must do.
func TestGarbage(t *testing.T) {
	h := newHost(t, []Server{stdioServer(t, "chatty", "garbage"), stdioServer(t, "stray", "server")}, Options{})
	_, err := h.ListTools(context.Background(), "chatty")
	if !errors.Is(err, ErrServerFailed) || !strings.Contains(err.Error(), "handshake") || !strings.Contains(err.Error(), "not an MCP message") {
		t.Errorf("not MCP: %v, want a failed handshake", err)
	}
	_, err = h.CallTool(context.Background(), "stray", "garble", nil)
	if !errors.Is(err, ErrServerFailed) || !strings.Contains(err.Error(), "not an MCP message") {
		t.Fatalf("stray output: %v, want ErrServerFailed saying the output was not MCP", err)
	}
	if st := status(t, h, "stray"); st.Running {
		t.Errorf("the server that broke the protocol still runs: %+v", st)
	}
	if res := call(t, h, "stray", "echo", `{"text":"again"}`); res.Text() != "echo: again" {
		t.Errorf("after a restart: %q", res.Text())
	}
}

// TestIdleStop: when its idle time comes, an unused server is stopped
// (its process gone); a timer that comes while a call runs stops
// nothing; the next use starts the server again.
func TestIdleStop(t *testing.T) {
	clock := newFakeClock()
	h := newHost(t, []Server{stdioServer(t, "idle", "server")}, Options{AfterFunc: clock.AfterFunc, IdleTimeout: time.Minute})
	call(t, h, "idle", "echo", `{"text":"x"}`)
	pid := status(t, h, "idle").PID
	timers := clock.all()
	if len(timers) != 1 || timers[0].d != time.Minute {
		t.Fatalf("timers after a call: %+v, want one of a minute", timers)
	}
	if n := clock.fire(); n != 1 {
		t.Fatalf("%d timers fired", n)
	}
	if st := status(t, h, "idle"); st.Running || !gone(pid) {
		t.Fatalf("after the idle time: %+v, process %d gone %v", st, pid, gone(pid))
	}

	// A call in flight: the idle timer armed after the last call is
	// cancelled by the new one; even if it fires late, nothing stops.
	call(t, h, "idle", "echo", `{"text":"y"}`)
	pid = status(t, h, "idle").PID
	late := clock.all()[1]
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := h.CallTool(ctx, "idle", "block", nil)
		done <- err
	}()
	select {
	case <-clock.stops: // the call has taken the server
	case err := <-done:
		t.Fatalf("block returned: %v", err)
	}
	late.f()
	if st := status(t, h, "idle"); !st.Running || st.PID != pid || gone(pid) {
		t.Fatalf("an idle timer stopped a server in use: %+v", st)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled call: %v", err)
	}
	if res := call(t, h, "idle", "pid", "{}"); res.Text() != strconv.Itoa(pid) {
		t.Errorf("pid %s, want the same server %d", res.Text(), pid)
	}
}

// TestCloseStopsEveryChild: Close stops every server, a call in flight
// included, and returns when their processes are gone. A server that
// exits when its input closes is stopped that way (the spec's first
// step: it writes its mark); one that ignores that and SIGTERM is killed.
func TestCloseStopsEveryChild(t *testing.T) {
	mark := filepath.Join(t.TempDir(), "mark")
	clock := newFakeClock()
	h := newHost(t, []Server{
		stdioServer(t, "polite", "server", "MCPHOST_TEST_MARK", mark),
		stdioServer(t, "stubborn", "stubborn"),
		stdioServer(t, "busy", "server"),
	}, Options{StopGrace: 100 * time.Millisecond, AfterFunc: clock.AfterFunc})
	var pids []int
	for _, name := range []string{"polite", "stubborn", "busy"} {
		call(t, h, name, "echo", `{"text":"x"}`)
		pids = append(pids, status(t, h, name).PID)
	}
	done := make(chan error, 1)
	go func() {
		_, err := h.CallTool(context.Background(), "busy", "block", nil)
		done <- err
	}()
	select {
	case <-clock.stops: // the call has taken the server
	case err := <-done:
		t.Fatalf("block returned: %v", err)
	}
	h.Close()
	for i, pid := range pids {
		if !gone(pid) {
			t.Errorf("server %d (pid %d) still runs after Close", i, pid)
		}
	}
	if b, err := os.ReadFile(mark); err != nil || string(b) != "input closed\n" {
		t.Errorf("the polite server was not stopped by closing its input: %q %v", b, err)
	}
	if err := <-done; err == nil {
		t.Error("a call in flight at Close succeeded")
	}
	if _, err := h.CallTool(context.Background(), "polite", "echo", nil); !errors.Is(err, ErrClosed) {
		t.Errorf("call after Close: %v, want ErrClosed", err)
	}
}

// TestUpdate: a server that is changed, turned off or removed is
// stopped; one left as it was keeps running.
func TestUpdate(t *testing.T) {
	a, b, c := stdioServer(t, "a", "server"), stdioServer(t, "b", "server"), stdioServer(t, "c", "server")
	h := newHost(t, []Server{a, b, c}, Options{})
	pids := map[string]int{}
	for _, name := range []string{"a", "b", "c"} {
		call(t, h, name, "echo", "{}")
		pids[name] = status(t, h, name).PID
	}
	b.Enabled = false
	a.Trusted = true
	a.Env = map[string]string{roleEnv: "server"} // same run
	if err := h.Update([]Server{a, b}); err != nil {
		t.Fatal(err)
	}
	if err := h.Update([]Server{a, b, {Name: "a"}}); err == nil {
		t.Error("Update took a bad configuration")
	}
	if st := status(t, h, "a"); !st.Running || st.PID != pids["a"] || !st.Trusted {
		t.Errorf("a, unchanged but trusted now: %+v", st)
	}
	if _, err := h.CallTool(context.Background(), "b", "echo", nil); !errors.Is(err, ErrDisabled) {
		t.Errorf("b turned off: %v", err)
	}
	if _, err := h.CallTool(context.Background(), "c", "echo", nil); !errors.Is(err, ErrUnknownServer) {
		t.Errorf("c removed: %v", err)
	}
	h.busy.Wait() // stops run in the background
	if !gone(pids["b"]) || !gone(pids["c"]) {
		t.Errorf("b or c still runs after Update")
	}
}

// TestHTTPServer: a streamable HTTP server is reached with its bearer
// token (sent as "Bearer <token>" and nowhere else), listed and called;
// a wrong token is refused with words that say so.
func TestHTTPServer(t *testing.T) {
	hs := newHTTPServer(t, "secret-token-0123456789", false)
	good := Server{Name: "web", URL: hs.URL + "/mcp", Enabled: true, Token: "secret-token-0123456789"}
	bad := Server{Name: "wrong", URL: hs.URL + "/mcp", Enabled: true, Token: "not-the-token-0123456789"}
	none := Server{Name: "none", URL: hs.URL + "/mcp", Enabled: true}
	h := newHost(t, []Server{good, bad, none}, Options{})
	tools, err := h.ListTools(context.Background(), "web")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(tools, func(t Tool) bool { return t.Name == "wait" }) {
		t.Errorf("tools %+v", tools)
	}
	if res := call(t, h, "web", "echo", `{"text":"over http"}`); res.Text() != "echo: over http" {
		t.Errorf("echo: %q", res.Text())
	}
	for _, name := range []string{"wrong", "none"} {
		_, err := h.ListTools(context.Background(), name)
		if !errors.Is(err, ErrServerFailed) || !strings.Contains(err.Error(), "token") {
			t.Errorf("%s: %v, want a refusal that names the token", name, err)
		}
		if strings.Contains(err.Error(), "not-the-token") {
			t.Errorf("the error shows the token: %v", err)
		}
	}
	headers := hs.authHeaders()
	for _, a := range headers {
		if a != "" && a != "Bearer secret-token-0123456789" && a != "Bearer not-the-token-0123456789" {
			t.Errorf("Authorization %q", a)
		}
	}
	if !slices.Contains(headers, "Bearer secret-token-0123456789") {
		t.Errorf("the token was never sent: %q", headers)
	}
}

// TestHTTPCancel: cancelling a call's context (Stop in the chat) ends the
// call at once with context.Canceled, and the server's tool sees its own
// context end.
func TestHTTPCancel(t *testing.T) {
	hs := newHTTPServer(t, "", false)
	h := newHost(t, []Server{{Name: "web", URL: hs.URL, Enabled: true}}, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := h.CallTool(ctx, "web", "wait", nil)
		done <- err
	}()
	<-hs.gate.entered
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled call: %v", err)
	}
	<-hs.gate.cancelled
	if res := call(t, h, "web", "echo", `{"text":"still here"}`); res.Text() != "echo: still here" {
		t.Errorf("after a cancel: %q", res.Text())
	}
}

// TestTLSVerified: a server whose certificate this computer does not
// trust is refused.
func TestTLSVerified(t *testing.T) {
	hs := newHTTPServer(t, "", true)
	h := newHost(t, []Server{{Name: "tls", URL: hs.URL, Enabled: true}}, Options{})
	_, err := h.ListTools(context.Background(), "tls")
	if !errors.Is(err, ErrServerFailed) || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("untrusted certificate: %v", err)
	}
}

// TestUnreachable: a program that is not there (any more) and an address
// where nothing listens are errors of those servers, said for a person;
// the Host and its other servers go on.
func TestUnreachable(t *testing.T) {
	closed := newHTTPServer(t, "", false)
	closed.Close()
	missing := Server{Name: "missing", Command: []string{filepath.Join(t.TempDir(), "uninstalled-server")}, Enabled: true}
	h := newHost(t, []Server{missing, {Name: "down", URL: closed.URL, Enabled: true}, stdioServer(t, "ok", "server")}, Options{})
	cases := []struct{ server, words string }{
		{"missing", "install it, or write its whole path in Settings"},
		{"down", "nothing listens at that address"},
	}
	for _, c := range cases {
		_, err := h.ListTools(context.Background(), c.server)
		if !errors.Is(err, ErrServerFailed) || !strings.Contains(err.Error(), c.words) {
			t.Errorf("%s: %v, want ErrServerFailed saying %q", c.server, err, c.words)
		}
		if st := status(t, h, c.server); st.LastError != err.Error() {
			t.Errorf("%s: last error %q", c.server, st.LastError)
		}
	}
	if res := call(t, h, "ok", "echo", `{"text":"fine"}`); res.Text() != "echo: fine" {
		t.Errorf("the other server: %q", res.Text())
	}
}

// TestHandshakeTimeout: a server that never finishes the handshake is
// stopped at ConnectTimeout with an error that says so.
func TestHandshakeTimeout(t *testing.T) {
	started := startLog{started: make(chan int, 1)}
	h := newHost(t, []Server{stdioServer(t, "silent", "silent")}, Options{ConnectTimeout: 300 * time.Millisecond, Log: slog.New(started)})
	_, err := h.ListTools(context.Background(), "silent")
	if !errors.Is(err, ErrServerFailed) || !strings.Contains(err.Error(), "did not finish the MCP handshake within 300ms") {
		t.Fatalf("silent server: %v", err)
	}
	if pid := <-started.started; !gone(pid) {
		t.Errorf("the silent server (pid %d) still runs", pid)
	}
}

// TestCloseDuringStart: Close while a server is starting ends the start
// and returns when its process is gone.
func TestCloseDuringStart(t *testing.T) {
	started := startLog{started: make(chan int, 1)}
	h := newHost(t, []Server{stdioServer(t, "silent", "silent")}, Options{Log: slog.New(started)})
	done := make(chan error, 1)
	go func() {
		_, err := h.ListTools(context.Background(), "silent")
		done <- err
	}()
	pid := <-started.started
	h.Close()
	if !gone(pid) {
		t.Errorf("the starting server (pid %d) still runs after Close", pid)
	}
	if err := <-done; !errors.Is(err, ErrClosed) {
		t.Errorf("the start under way: %v, want ErrClosed", err)
	}
}

// TestChildEnvironment: a server gets the few variables the official
// SDKs pass on and its own env, not the rest of NPU Chat's environment;
// BaseEnv replaces the inherited part.
func TestChildEnvironment(t *testing.T) {
	t.Setenv("HF_TOKEN", "hf_secret")
	t.Setenv("HOME", "/home/tester")
	t.Setenv("PATH", "/usr/bin:/bin")
	s := stdioServer(t, "env", "server", "MY_SETTING", "on", "PATH", "/opt/tools")
	h := newHost(t, []Server{s}, Options{})
	got := strings.Split(call(t, h, "env", "env", "{}").Text(), "\n")
	slices.Sort(got)
	want := []string{"MCPHOST_TEST_ROLE=server", "MY_SETTING=on", "PATH=/opt/tools"}
	inherited := []string{"HOME", "LOGNAME", "SHELL", "TERM", "USER"}
	if runtime.GOOS == "windows" {
		inherited = []string{"APPDATA", "HOMEDRIVE", "HOMEPATH", "LOCALAPPDATA", "PROCESSOR_ARCHITECTURE",
			"SYSTEMDRIVE", "SYSTEMROOT", "TEMP", "USERNAME", "USERPROFILE"}
	}
	for _, name := range inherited {
		if v, ok := os.LookupEnv(name); ok {
			want = append(want, name+"="+v)
		}
	}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("environment\n%q\nwant\n%q", got, want)
	}

	h2 := newHost(t, []Server{s}, Options{BaseEnv: []string{"ONLY=this", "MY_SETTING=off"}})
	got = strings.Split(call(t, h2, "env", "env", "{}").Text(), "\n")
	slices.Sort(got)
	if want := []string{"MCPHOST_TEST_ROLE=server", "MY_SETTING=on", "ONLY=this", "PATH=/opt/tools"}; !slices.Equal(got, want) {
		t.Errorf("with BaseEnv: %q, want %q", got, want)
	}
}

// TestConcurrentFirstUse: calls that arrive together at a stopped server
// start it once and all use it.
func TestConcurrentFirstUse(t *testing.T) {
	h := newHost(t, []Server{stdioServer(t, "one", "server")}, Options{})
	const n = 8
	pids := make(chan string, n)
	errs := make(chan error, n)
	for range n {
		go func() {
			res, err := h.CallTool(context.Background(), "one", "pid", nil)
			errs <- err
			pids <- res.Text()
		}()
	}
	seen := map[string]bool{}
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
		seen[<-pids] = true
	}
	if len(seen) != 1 || !seen[strconv.Itoa(status(t, h, "one").PID)] {
		t.Errorf("servers that answered: %v, running: %d", seen, status(t, h, "one").PID)
	}
}

// TestTokenStaysWithItsHost: a server that redirects elsewhere is not
// followed, and the other host never sees the token.
func TestTokenStaysWithItsHost(t *testing.T) {
	other := newHTTPServer(t, "", false)
	redirect := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+"/mcp", http.StatusTemporaryRedirect)
	}))
	t.Cleanup(redirect.Close)
	h := newHost(t, []Server{{Name: "moved", URL: redirect.URL + "/mcp", Enabled: true, Token: "tok-0123456789abcdef"}}, Options{})
	_, err := h.ListTools(context.Background(), "moved")
	if !errors.Is(err, ErrServerFailed) || !strings.Contains(err.Error(), "follows no redirect to another server") {
		t.Errorf("redirect: %v", err)
	}
	if got := other.authHeaders(); len(got) != 0 {
		t.Errorf("the other host was asked, with Authorization %q", got)
	}
}
