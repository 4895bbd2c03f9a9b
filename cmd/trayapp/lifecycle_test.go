//go:build linux

package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/npuchat/npuchat/engine/testmodel"
	"github.com/npuchat/npuchat/gui/desktoptest"
	"github.com/npuchat/npuchat/web/webtest"
)

// These tests run the real npuchat binary on a desktop (an Xvfb display
// and a session D-Bus, as a login session has) and send it real
// signals: one instance per user, the model off at start, SIGTERM
// stopping within 5 s with exit 0, a taken port that keeps the tray up.
// They wait for what they need by polling it (desktoptest.Eventually)
// with deadlines long enough for a loaded two-core CI machine; the only
// short times are the ones the app promises (5 s to stop).

// waitLong bounds a wait for something the test needs (a daemon up, a
// model loaded, a line in a log): long, since on a loaded machine a
// start takes many times what it takes alone; a wait that ends early
// costs nothing.
const waitLong = 60 * time.Second

// builtNPUChat builds this command once for all the tests of this file
// (a build takes seconds on two cores).
var builtNPUChat = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "npuchat-lifecycle-")
	if err != nil {
		return "", err
	}
	exe := filepath.Join(dir, "npuchat")
	cmd := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "build", "-o", exe, ".")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build: %v\n%s", err, out)
	}
	return exe, nil
})

// buildNPUChat returns the built command.
func buildNPUChat(t *testing.T) string {
	t.Helper()
	exe, err := builtNPUChat()
	if err != nil {
		t.Fatal(err)
	}
	return exe
}

// startWithFD starts a daemon that writes one line (its address) to fd 3
// and returns that line; the daemon stops when the test ends.
func startWithFD(t *testing.T, name string, args ...string) string {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(name, args...)
	cmd.ExtraFiles = []*os.File{w}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s (scripts/setup installs it): %v", name, err)
	}
	w.Close()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
	})
	line := make(chan string, 1)
	go func() {
		l, _ := bufio.NewReader(r).ReadString('\n')
		line <- strings.TrimSpace(l)
	}()
	select {
	case l := <-line:
		if l == "" {
			t.Fatalf("%s said nothing on fd 3", name)
		}
		return l
	case <-time.After(waitLong):
		t.Fatalf("%s did not start within %v", name, waitLong)
	}
	return ""
}

// desktop is a user's login session: a private home, runtime folder and
// settings, an X display, a session bus, and an xdg-open that records
// the URLs it is asked to open.
type desktop struct {
	env    []string
	home   string
	opened string // file xdg-open appends to
}

func newDesktop(t *testing.T) *desktop {
	t.Helper()
	home := t.TempDir()
	run := filepath.Join(home, "run")
	os.Mkdir(run, 0o700)
	bin := filepath.Join(home, "bin")
	os.Mkdir(bin, 0o755)
	d := &desktop{home: home, opened: filepath.Join(home, "opened")}
	script := fmt.Sprintf("#!/bin/sh\necho \"$1\" >> %q\n", d.opened)
	if err := os.WriteFile(filepath.Join(bin, "xdg-open"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	display := startWithFD(t, "Xvfb", "-displayfd", "3", "-screen", "0", "1024x768x24", "-nolisten", "tcp")
	bus := startWithFD(t, "dbus-daemon", "--session", "--nofork", "--print-address=3")
	d.env = []string{
		"HOME=" + home, "XDG_RUNTIME_DIR=" + run, "XDG_CONFIG_HOME=" + filepath.Join(home, ".config"),
		"NPUCHAT_DATA=" + filepath.Join(home, "data"), "FLM_MODEL_PATH=" + filepath.Join(home, "flm"),
		"DISPLAY=:" + display, "DBUS_SESSION_BUS_ADDRESS=" + bus,
		"PATH=" + bin + ":" + os.Getenv("PATH"),
	}
	return d
}

// proc is a running npuchat.
type proc struct {
	cmd    *exec.Cmd
	stdout *bufio.Reader
	done   chan error
	stderr *syncBuffer // what it printed, for a failure's message
}

// syncBuffer is a bytes.Buffer a child process writes while a test reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func (d *desktop) start(t *testing.T, exe string, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(exe, args...)
	cmd.Env = d.env
	out, _ := cmd.StdoutPipe()
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{cmd: cmd, stdout: bufio.NewReader(out), done: make(chan error, 1), stderr: stderr}
	go func() { p.done <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-p.done
	})
	return p
}

// login asks the running tray for the chat as a second launch does,
// and opens the one-time link it gave xdg-open: the page's session, as a
// "Cookie" header value.
func (d *desktop) login(t *testing.T, exe, url string) string {
	t.Helper()
	second := exec.Command(exe)
	second.Env = d.env
	if out, err := second.CombinedOutput(); err != nil {
		t.Fatalf("second launch: %v\n%s", err, out)
	}
	var cookie string
	desktoptest.Eventually(t, waitLong, "the link the tray opened", func() error {
		b, _ := os.ReadFile(d.opened) // xdg-open runs in the background
		lines := strings.Fields(string(b))
		if len(lines) == 0 {
			return errors.New("nothing opened yet")
		}
		var err error
		cookie, err = webtest.Login(url, strings.TrimPrefix(lines[len(lines)-1], url))
		return err
	})
	return cookie
}

// url waits for the "serving on" line and returns the chat URL.
func (p *proc) url(t *testing.T) string {
	t.Helper()
	line := make(chan string, 1)
	go func() {
		l, _ := p.stdout.ReadString('\n')
		line <- l
	}()
	select {
	case l := <-line:
		rest, ok := strings.CutPrefix(l, "NPU Chat is serving on ")
		if !ok {
			t.Fatalf("npuchat said %q", l)
		}
		url, _, _ := strings.Cut(rest, " ")
		return url
	case <-time.After(waitLong):
		t.Fatalf("npuchat is not serving after %v", waitLong)
	}
	return ""
}

// terminate sends SIGTERM and fails unless the process exits with 0
// (Run's Shutdown returned no error: it met its ShutdownTimeout).
func (p *proc) terminate(t *testing.T) {
	t.Helper()
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-p.done:
		p.done <- err // for the cleanup
		if err != nil {
			t.Fatalf("after SIGTERM: %v; it printed:\n%s", err, p.stderr)
		}
	case <-time.After(60 * time.Second): // a failure bound, not a measure
		t.Fatal("awaiting the exit after SIGTERM: still running after 60 s")
	}
}

func status(t *testing.T, url string) (st struct {
	State   string
	Enabled bool
	Backend string
}) {
	t.Helper()
	getJSON(t, url+"/api/status", &st)
	return st
}

// waitState polls /api/status until the model's state is want.
func waitState(t *testing.T, url, want, what string) {
	t.Helper()
	desktoptest.Eventually(t, waitLong, what, func() error {
		if st := status(t, url); st.State != want {
			return fmt.Errorf("status %+v, want %s", st, want)
		}
		return nil
	})
}

func TestTrayLifecycle(t *testing.T) {
	exe := buildNPUChat(t)
	d := newDesktop(t)
	w, _ := testmodel.Random(3, testmodel.Qwen3Small())
	model := filepath.Join(d.home, "tiny")
	if err := testmodel.WriteHF(model, w, testmodel.HFOptions{}); err != nil {
		t.Fatal(err)
	}
	first := d.start(t, exe, "--addr", "127.0.0.1:0", "--model", model, "--name", "tiny", "--engine", "cpu")
	url := first.url(t)

	// The API listens, the model is off until someone starts it.
	if st := status(t, url); st.State != "off" || st.Enabled {
		t.Fatalf("at start: %+v", st)
	}
	resp, err := http.Post(url+"/v1/chat/completions", "application/json", strings.NewReader(`{"model":"tiny","messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 503 {
		t.Fatalf("chat with the model off: %d", resp.StatusCode)
	}

	// A second launch asks the first to open the chat, and exits 0.
	second := exec.Command(exe)
	second.Env = d.env
	out, err := second.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "already running") {
		t.Fatalf("second launch: %v\n%s", err, out)
	}
	desktoptest.Eventually(t, waitLong, "the chat opened by the first instance", func() error {
		b, _ := os.ReadFile(d.opened) // xdg-open runs in the background
		if got := strings.TrimSpace(string(b)); !strings.HasPrefix(got, url+"/open?t=") {
			return fmt.Errorf("opened %q, want a link on %s/", got, url)
		}
		return nil
	})

	// On, then SIGTERM: exit 0 within 5 s.
	resp, err = http.Post(url+"/api/model/start", "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	waitState(t, url, "on", "the model on")
	first.terminate(t) // exit 0: Shutdown met its ShutdownTimeout (a timed-out one is an error, exit 1)
	// The instance is free again: a new launch is the first.
	again := d.start(t, exe, "--hidden", "--addr", "127.0.0.1:0")
	url2 := again.url(t)
	if st := status(t, url2); st.State != "off" {
		t.Fatalf("relaunch: %+v", st)
	}
	again.terminate(t)
}

// TestTrayStopsInItsShutdownBoundMidAnswer: serve at start is on, an
// answer in a chat-page conversation is streaming from a remote server
// that never ends it, and SIGTERM still ends the process with 0, which
// it gives only when Shutdown finished within ShutdownTimeout (the 5 s
// promise; no clock is read here); started again, the history holds
// every word that was shown, as a cut answer.
func TestTrayStopsInItsShutdownBoundMidAnswer(t *testing.T) {
	exe := buildNPUChat(t)
	d := newDesktop(t)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/models") {
			fmt.Fprint(w, `{"object":"list","data":[{"id":"up","object":"model"}]}`)
			return
		}
		// Ten words, then an answer that never ends.
		w.Header().Set("Content-Type", "text/event-stream")
		for i := range 10 {
			fmt.Fprintf(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"w%d \"}}]}\n\n", i)
			w.(http.Flusher).Flush()
		}
		<-r.Context().Done()
	}))
	defer up.Close()
	settings := filepath.Join(d.home, ".config", "npuchat", "settings.json")
	os.MkdirAll(filepath.Dir(settings), 0o755)
	os.WriteFile(settings, []byte(`{"serve_at_start": true}`), 0o644)
	args := []string{"--addr", "127.0.0.1:0", "--engine", "remote", "--remote-url", up.URL + "/v1", "--model", "up"}
	p := d.start(t, exe, args...)
	url := p.url(t)
	waitState(t, url, "on", "serve at start starting the model")
	cookie := d.login(t, exe, url)
	post := func(url, body string) (*http.Response, error) {
		req, _ := http.NewRequest("POST", url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Cookie", cookie)
		return http.DefaultClient.Do(req)
	}
	var conv struct{ ID int64 }
	resp, err := post(url+"/api/conversations", `{"title":"long"}`)
	if err != nil {
		t.Fatal(err)
	}
	json.NewDecoder(resp.Body).Decode(&conv)
	resp.Body.Close()
	if resp.StatusCode != 201 || conv.ID == 0 {
		t.Fatalf("new conversation: %d %+v", resp.StatusCode, conv)
	}
	resp, err = post(fmt.Sprintf("%s/api/conversations/%d/messages", url, conv.ID), `{"content":"go on"}`)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	var shown strings.Builder
	for !strings.Contains(shown.String(), "w3") {
		l, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("the answer ended after %q: %v", shown.String(), err)
		}
		var tok struct{ Text string }
		if data, ok := strings.CutPrefix(strings.TrimSpace(l), "data: "); ok && json.Unmarshal([]byte(data), &tok) == nil {
			shown.WriteString(tok.Text)
		}
	}
	p.terminate(t) // exit 0: Shutdown met its ShutdownTimeout (a timed-out one is an error, exit 1)

	// Restarted on the same port, as a person's server is (the session
	// cookie is named for the port: a server on another port would not
	// take it).
	port := url[strings.LastIndex(url, ":")+1:]
	again := d.start(t, exe, append([]string{"--addr", "127.0.0.1:" + port}, args[2:]...)...)
	url = again.url(t)
	var msgs struct {
		Messages []struct {
			Role, Content string
			Cut           bool
			CutReason     string `json:"cut_reason"`
		}
	}
	// The session outlives the restart (its hash is in the data folder).
	req, _ := http.NewRequest("GET", fmt.Sprintf("%s/api/conversations/%d/messages", url, conv.ID), nil)
	req.Header.Set("Cookie", cookie)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	err = json.NewDecoder(resp.Body).Decode(&msgs)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("messages after the restart: %d %v", resp.StatusCode, err)
	}
	n := len(msgs.Messages)
	if n != 2 || msgs.Messages[1].Role != "assistant" || !msgs.Messages[1].Cut ||
		!strings.HasPrefix(msgs.Messages[1].Content, shown.String()) {
		t.Fatalf("after SIGTERM the history holds %+v; %q was shown", msgs.Messages, shown.String())
	}
	again.terminate(t)
}

// TestTrayWithATakenPortStaysUp: another program has the port; the tray
// does not crash, says why in its log, and SIGTERM still ends it with 0.
func TestTrayWithATakenPortStaysUp(t *testing.T) {
	exe := buildNPUChat(t)
	d := newDesktop(t)
	other, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	p := d.start(t, exe, "--addr", other.Addr().String())
	logFile := filepath.Join(d.home, "data", "logs", "npuchat.log")
	desktoptest.Eventually(t, waitLong, "the log saying the port is taken", func() error {
		select {
		case err := <-p.done:
			p.done <- err // for the cleanup
			t.Fatalf("npuchat exited with a taken port: %v", err)
		default:
		}
		if b, _ := os.ReadFile(logFile); !strings.Contains(string(b), "the port is taken") {
			return fmt.Errorf("log:\n%s", b)
		}
		return nil
	})
	// And it stays up, trying again: the log tells of a second try.
	desktoptest.Eventually(t, waitLong, "a second try to listen in the log", func() error {
		select {
		case err := <-p.done:
			p.done <- err // for the cleanup
			t.Fatalf("npuchat exited with a taken port: %v", err)
		default:
		}
		if b, _ := os.ReadFile(logFile); strings.Count(string(b), "trying again") < 2 {
			return fmt.Errorf("log:\n%s", b)
		}
		return nil
	})
	p.terminate(t)
}
