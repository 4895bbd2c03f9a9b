package page

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/npuchat/npuchat/web/webtest"
)

// npuchat is the binary under test, built once by TestMain.
var npuchat string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "npuchat-page-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	npuchat = filepath.Join(dir, "npuchat")
	build := exec.Command("go", "build", "-o", npuchat, "../../cmd/trayapp")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build npuchat:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// server is one `npuchat serve` process.
type server struct {
	t   *testing.T
	URL string
	// Link is the one-time link serve printed (used by serve already,
	// unless NPUCHAT_API_KEY is set); Cookie is its session.
	Link, Cookie string
	cmd          *exec.Cmd
	done         chan struct{}
	log          *strings.Builder
	mu           sync.Mutex
}

// serve starts `npuchat serve --addr 127.0.0.1:0 args...` with env (and
// nothing else of this process's environment) and waits until it
// listens. It is stopped when the test ends.
func serve(t *testing.T, env map[string]string, args ...string) *server {
	t.Helper()
	cmd := exec.Command(npuchat, append([]string{"serve", "--addr", "127.0.0.1:0"}, args...)...)
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	out, _ := cmd.StdoutPipe()
	s := &server{t: t, cmd: cmd, done: make(chan struct{}), log: &strings.Builder{}}
	cmd.Stderr = writerFunc(func(p []byte) (int, error) {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.log.Write(p)
	})
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { cmd.Wait(); close(s.done) }()
	lines := make(chan [2]string, 1)
	go func() {
		r := bufio.NewReader(out)
		line, _ := r.ReadString('\n')
		link, _ := r.ReadString('\n')
		lines <- [2]string{line, link}
		io.Copy(io.Discard, r)
	}()
	select {
	case got := <-lines:
		line := got[0]
		url, _, _ := strings.Cut(strings.TrimPrefix(line, "NPU Chat is serving on "), " ")
		if !strings.HasPrefix(url, "http://127.0.0.1:") {
			t.Fatalf("serve printed %q; log:\n%s", line, s.logText())
		}
		s.URL = url
		if i := strings.Index(got[1], url+"/open?t="); i >= 0 {
			s.Link = strings.TrimSpace(got[1][i:])
		} else {
			t.Fatalf("serve printed no link to the page: %q", got[1])
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("serve did not start; log:\n%s", s.logText())
	}
	t.Cleanup(s.stop)
	if env["NPUCHAT_API_KEY"] == "" {
		// The person at the desktop: the page's session, for apiCall and
		// every browser that opens this server (with an API key the
		// tests use the key instead).
		cookie, err := webtest.Login(s.URL, strings.TrimPrefix(s.Link, s.URL))
		if err != nil {
			t.Fatal(err)
		}
		s.Cookie = cookie
		sessions.Store(s.URL, cookie)
		t.Cleanup(func() { sessions.Delete(s.URL) })
	}
	return s
}

// sessions maps a running server's URL to its page session ("Cookie"
// header value): apiCall sends it, and browser.open gives it to the
// browser, as the link the tray opens would.
var sessions sync.Map

// sessionFor returns the session of the server url is on ("" if none).
func sessionFor(url string) string {
	var c string
	sessions.Range(func(k, v any) bool {
		if strings.HasPrefix(url, k.(string)+"/") || url == k.(string) {
			c = v.(string)
			return false
		}
		return true
	})
	return c
}

func (s *server) logText() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.log.String()
}

// kill ends the server with SIGKILL: no shutdown, nothing flushed.
func (s *server) kill() {
	s.cmd.Process.Kill()
	<-s.done
}

// stop ends the server as a user would (SIGTERM) and waits.
func (s *server) stop() {
	select {
	case <-s.done:
		return
	default:
	}
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(20 * time.Second):
		s.t.Errorf("serve did not stop on SIGTERM")
		s.kill()
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// browser is one headless Chromium tab. Every request the page makes is
// recorded; when the test ends, one that went anywhere but the servers
// the test allowed fails it.
type browser struct {
	t       *testing.T
	ctx     context.Context
	mu      sync.Mutex
	urls    []string
	allowed []string
}

func newBrowser(t *testing.T) *browser {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatalf("chromium is needed for the page tests (scripts/setup installs Debian's chromium): %v", err)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.WindowSize(1280, 860),
		chromedp.Flag("lang", "en-US"),
	)
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelC := chromedp.NewContext(actx)
	ctx, cancelT := context.WithTimeout(ctx, 4*time.Minute)
	b := &browser{t: t, ctx: ctx}
	chromedp.ListenTarget(ctx, func(ev any) {
		if e, ok := ev.(*network.EventRequestWillBeSent); ok {
			b.mu.Lock()
			b.urls = append(b.urls, e.Request.URL)
			b.mu.Unlock()
		}
	})
	if err := chromedp.Run(ctx, network.Enable()); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	t.Cleanup(func() {
		b.checkLocal()
		cancelT()
		cancelC()
		cancelA()
	})
	return b
}

// allow adds a server the page may talk to.
func (b *browser) allow(base string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.allowed = append(b.allowed, strings.TrimSuffix(base, "/")+"/")
}

// checkLocal fails the test if the page requested anything elsewhere.
func (b *browser) checkLocal() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.urls) == 0 {
		b.t.Error("no request was recorded: the network listener is not working")
	}
	for _, u := range b.urls {
		ok := strings.HasPrefix(u, "data:") || strings.HasPrefix(u, "blob:") || strings.HasPrefix(u, "about:")
		for _, a := range b.allowed {
			ok = ok || strings.HasPrefix(u, a)
		}
		if !ok {
			b.t.Errorf("the page made a request that leaves NPU Chat: %s", u)
		}
	}
}

func (b *browser) run(actions ...chromedp.Action) {
	b.t.Helper()
	if err := chromedp.Run(b.ctx, actions...); err != nil {
		b.t.Fatalf("browser: %v", err)
	}
}

// open navigates to url and waits for the page's script to be running.
func (b *browser) open(url string) {
	b.t.Helper()
	base := url[:strings.Index(url[len("http://"):], "/")+len("http://")]
	b.allow(base + "/")
	if c := sessionFor(url); c != "" {
		name, value, _ := strings.Cut(c, "=")
		b.run(network.SetCookie(name, value).WithURL(base + "/").WithHTTPOnly(true).WithSameSite(network.CookieSameSiteStrict))
	}
	b.run(chromedp.Navigate(url), chromedp.WaitReady("#app", chromedp.ByQuery))
	b.waitJS(`document.getElementById("status-text").textContent !== "Checking the model…"`, 30*time.Second)
}

// eval evaluates js and returns its JSON value decoded into T.
func eval[T any](b *browser, js string) T {
	b.t.Helper()
	var v T
	if err := chromedp.Run(b.ctx, chromedp.Evaluate(js, &v)); err != nil {
		b.t.Fatalf("eval %s: %v", js, err)
	}
	return v
}

// waitJS waits until js is truthy. The timeout only bounds a failure:
// it is at least a minute, however short the caller's guess of how long
// the page normally takes, so that a loaded machine is no failure.
func (b *browser) waitJS(js string, timeout time.Duration) {
	b.t.Helper()
	timeout = max(timeout, time.Minute)
	var ok bool
	if err := chromedp.Run(b.ctx, chromedp.Poll(js, &ok, chromedp.WithPollingTimeout(timeout), chromedp.WithPollingInterval(50*time.Millisecond))); err != nil {
		b.t.Fatalf("waiting for %s: %v\npage text: %s", js, err, eval[string](b, `document.body.innerText.slice(0, 2000)`))
	}
}

// waitIdle waits until the page has no request in flight (#app's
// data-requests, which app.js counts): what the last action started has
// ended, with every request it led to. A test waits for this instead of
// sleeping before it asserts that something did not happen.
func (b *browser) waitIdle() {
	b.t.Helper()
	b.waitJS(`document.getElementById('app').dataset.requests === '0'`, 30*time.Second)
}

// waitStill waits until the element sel has no transition or animation
// running (the chat list's slide, before a screenshot or an axe check).
func (b *browser) waitStill(sel string) {
	b.t.Helper()
	b.waitJS(fmt.Sprintf(`(() => { const e = document.querySelector(%q); return !!e && e.getAnimations().length === 0 })()`, sel), 10*time.Second)
}

// eventually waits until cond holds, checking every 20 ms; after a
// minute (a bound on a failure, not a measure) it fails saying what was
// awaited.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(time.Minute)
	for !cond() {
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("waited a minute for %s", what)
		}
	}
}

// shot saves a screenshot of the viewport as ARTIFACTS/name.png.
func (b *browser) shot(name string) {
	b.t.Helper()
	var png []byte
	b.run(chromedp.CaptureScreenshot(&png))
	dir := artifacts(b.t)
	if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
		b.t.Fatal(err)
	}
}

// artifacts is where screenshots go: $NPUCHAT_ARTIFACTS/page or the
// repository's .artifacts/page (gitignored).
func artifacts(t *testing.T) string {
	dir := os.Getenv("NPUCHAT_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join("..", "..", ".artifacts")
	}
	dir = filepath.Join(dir, "page")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// upstream is a scripted OpenAI-compatible server for the remote engine:
// every chat request is answered with Reply's pieces, one chunk each,
// Delay apart, so that the test knows every word the page should show.
type upstream struct {
	*httptest.Server
	mu        sync.Mutex
	reply     []string
	delay     time.Duration
	requests  int
	cancelled int    // requests whose client left before the answer ended
	finish    string // the finish reason sent ("stop" when empty)
	// pieces, when set by feed, gives the next answers' pieces one at a
	// time as the test sends them, instead of reply and delay.
	pieces chan string
}

// feed makes the answers stream the pieces the test gives with say, each
// when it is given; an answer ends when the test ends.
func (u *upstream) feed(t *testing.T) {
	ch := make(chan string)
	u.mu.Lock()
	u.pieces = ch
	u.mu.Unlock()
	t.Cleanup(func() { close(ch) })
}

// say hands piece to the answer streaming now (see feed). It fails the
// test when no answer takes it within a minute: none is streaming.
func (u *upstream) say(t *testing.T, piece string) {
	t.Helper()
	u.mu.Lock()
	ch := u.pieces
	u.mu.Unlock()
	select {
	case ch <- piece:
	case <-time.After(time.Minute):
		t.Fatalf("no answer took %q from the upstream: none is streaming", piece)
	}
}

func newUpstream(t *testing.T) *upstream {
	u := &upstream{}
	u.Server = httptest.NewServer(http.HandlerFunc(u.serve))
	t.Cleanup(u.Close)
	return u
}

// script sets the next answers.
func (u *upstream) script(delay time.Duration, pieces ...string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.reply, u.delay = pieces, delay
}

func (u *upstream) counts() (requests, cancelled int) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.requests, u.cancelled
}

func (u *upstream) serve(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/v1/models":
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"object": "list", "data": [{"id": "scripted", "object": "model", "owned_by": "test"}]}`)
		return
	case "/v1/chat/completions":
	default:
		http.NotFound(w, r)
		return
	}
	u.mu.Lock()
	u.requests++
	reply, delay, finish, pieces := u.reply, u.delay, u.finish, u.pieces
	u.mu.Unlock()
	if finish == "" {
		finish = "stop"
	}
	w.Header().Set("Content-Type", "text/event-stream")
	send := func(v any) bool {
		b, _ := json.Marshal(v)
		if _, err := fmt.Fprintf(w, "data: %s\n\n", b); err != nil {
			return false
		}
		w.(http.Flusher).Flush()
		return true
	}
	chunk := func(delta map[string]string, finish any) map[string]any {
		return map[string]any{"id": "up-1", "object": "chat.completion.chunk", "created": 1, "model": "scripted",
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}}
	}
	send(chunk(map[string]string{"role": "assistant", "content": ""}, nil))
	for pieces != nil {
		select {
		case <-r.Context().Done():
			u.mu.Lock()
			u.cancelled++
			u.mu.Unlock()
			return
		case p, ok := <-pieces:
			if !ok {
				pieces = nil
				break
			}
			if !send(chunk(map[string]string{"content": p}, nil)) {
				return
			}
		}
	}
	for _, p := range reply {
		select {
		case <-r.Context().Done():
			u.mu.Lock()
			u.cancelled++
			u.mu.Unlock()
			return
		case <-time.After(delay):
		}
		if !send(chunk(map[string]string{"content": p}, nil)) {
			return
		}
	}
	send(chunk(map[string]string{}, finish))
	send(map[string]any{"id": "up-1", "object": "chat.completion.chunk", "choices": []any{},
		"usage": map[string]int{"prompt_tokens": 12, "completion_tokens": len(reply), "total_tokens": 12 + len(reply)}})
	io.WriteString(w, "data: [DONE]\n\n")
}

// home is a private home, data and settings folder for one server.
func home(t *testing.T, base string, extra map[string]string) map[string]string {
	env := map[string]string{
		"HOME":           filepath.Join(base, "home"),
		"NPUCHAT_DATA":   filepath.Join(base, "data"),
		"NPUCHAT_CONFIG": filepath.Join(base, "settings.json"),
		"FLM_MODEL_PATH": filepath.Join(base, "flm-models"),
		"PATH":           "/usr/bin:/bin",
	}
	for k, v := range extra {
		env[k] = v
	}
	return env
}
