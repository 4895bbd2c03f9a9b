package app

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/npuchat/npuchat/config"
	"github.com/npuchat/npuchat/engine/testmodel"
	"github.com/npuchat/npuchat/eventbus/eventbustest"
	"github.com/npuchat/npuchat/service"
	"github.com/npuchat/npuchat/web/webtest"
)

// testEnv is a private HOME, data folder and settings file.
func testEnv(t *testing.T) map[string]string {
	t.Helper()
	home := t.TempDir()
	return map[string]string{
		"HOME": home, "NPUCHAT_DATA": filepath.Join(home, "data"), "FLM_MODEL_PATH": filepath.Join(home, "flm"),
		"XDG_CONFIG_HOME": filepath.Join(home, ".config"),
	}
}

// tinyModel writes a small random Hugging Face folder.
func tinyModel(t *testing.T) string {
	t.Helper()
	w, err := testmodel.Random(3, testmodel.Qwen3Small())
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "tiny")
	if err := testmodel.WriteHF(dir, w, testmodel.HFOptions{}); err != nil {
		t.Fatal(err)
	}
	return dir
}

func newApp(t *testing.T, env map[string]string, flags Flags) *App {
	t.Helper()
	if flags.Addr == "" {
		flags.Addr = "127.0.0.1:0"
	}
	a, err := New(context.Background(), Options{Getenv: func(k string) string { return env[k] }, Flags: flags,
		Logger: slog.New(slog.DiscardHandler), Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Shutdown(context.Background()) })
	return a
}

// running runs a until the test ends and returns its chat URL.
func running(t *testing.T, a *App, ro RunOptions) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	ro.Ready = func(url string) { ready <- url }
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx, ro) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(60 * time.Second): // a failure bound
			t.Error("awaiting Run's return after its ctx ended: not returned after 60 s")
		}
	})
	select {
	case url := <-ready:
		return url
	case err := <-done:
		t.Fatalf("Run returned before listening: %v", err)
	case <-time.After(60 * time.Second):
		t.Fatal("not listening after 60 s")
	}
	return ""
}

func post(t *testing.T, url, body string) (int, string) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// waitState waits for the service's events to show the state want (the
// first event is the status now) and returns that status.
func waitState(t *testing.T, a *App, want service.State) service.Status {
	t.Helper()
	events, stop := a.Subscribe()
	defer stop()
	seen := eventbustest.Expect(t, events, eventbustest.Is("the state "+string(want), func(ev service.Event) bool {
		return ev.Status.State == want
	}))
	return seen[len(seen)-1].Status
}

// TestTrayStartsWithTheModelOff: the API listens and answers 503 until
// the model is started (the tray's left click), then answers.
func TestTrayStartsWithTheModelOff(t *testing.T) {
	a := newApp(t, testEnv(t), Flags{Model: tinyModel(t), Name: "tiny", Engine: "cpu"})
	url := running(t, a, RunOptions{Model: ModelOff})
	if a.ChatURL() != url || !strings.HasPrefix(url, "http://127.0.0.1:") || strings.HasSuffix(url, ":0/") {
		t.Fatalf("chat URL %q (Ready said %q)", a.ChatURL(), url)
	}
	st := a.Status()
	if st.State != service.StateOff || st.Enabled {
		t.Fatalf("at start: %+v", st)
	}
	if !a.ModelInstalled() {
		t.Fatal("a --model folder is not installed")
	}
	chat := `{"model":"tiny","max_tokens":3,"messages":[{"role":"user","content":"hi"}]}`
	if code, body := post(t, url+"v1/chat/completions", chat); code != 503 || !strings.Contains(body, "switched off") {
		t.Fatalf("chat with the model off: %d %s", code, body)
	}
	if err := a.StartModel(); err != nil {
		t.Fatal(err)
	}
	waitState(t, a, service.StateOn)
	if code, body := post(t, url+"v1/chat/completions", chat); code != 200 {
		t.Fatalf("chat with the model on: %d %s", code, body)
	}
	if err := a.StopModel(context.Background()); err != nil {
		t.Fatal(err)
	}
	if st := a.Status(); st.State != service.StateOff || st.Enabled {
		t.Fatalf("after StopModel: %+v", st)
	}
}

func TestServeStartsTheModel(t *testing.T) {
	a := newApp(t, testEnv(t), Flags{Model: tinyModel(t), Name: "tiny", Engine: "cpu"})
	running(t, a, RunOptions{Model: ModelOn})
	if st := waitState(t, a, service.StateOn); st.Model != "tiny" || st.Backend != "cpu" {
		t.Fatalf("%+v", st)
	}
}

// TestTakenPortIsReportedAndTriedAgain: the tray stays up, its status
// says the port is taken and by what kind of program, and it serves as
// soon as the port is free.
func TestTakenPortIsReportedAndTriedAgain(t *testing.T) {
	other, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	a := newApp(t, testEnv(t), Flags{Addr: other.Addr().String()})
	watch, stop := a.WatchServer()
	defer stop()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx, RunOptions{Model: ModelOff, RetryListen: 50 * time.Millisecond}) }()
	s := <-watch
	if s.Listening || s.Err == nil || !strings.Contains(s.Err.Error(), "the port is taken") || !strings.Contains(s.Err.Error(), "--addr") {
		t.Fatalf("server status %+v", s)
	}
	if got := a.Server(); got.Err == nil {
		t.Fatalf("ServerStatus %+v", got)
	}
	// Run tries again: three more failed tries are reported (each a new
	// status; a slow reader may see fewer values, never more), and Run
	// has not returned.
	for tries := 0; tries < 3; {
		select {
		case err := <-done:
			t.Fatalf("Run gave up: %v", err)
		case s = <-watch:
			if s.Listening || s.Err == nil {
				t.Fatalf("server status %+v while the port is taken", s)
			}
			tries++
		case <-time.After(60 * time.Second):
			t.Fatal("awaiting Run's next try to listen: none after 60 s")
		}
	}
	other.Close()
	deadline := time.After(60 * time.Second)
	for !s.Listening {
		select {
		case s = <-watch:
		case <-deadline:
			t.Fatal("not listening after the port was freed")
		}
	}
	resp, err := http.Get(a.ChatURL() + "api/status")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("status: %v %v", resp, err)
	}
	resp.Body.Close()
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestTakenPortFailsServe: without RetryListen (`npuchat serve`) Run
// returns the error, which says what to do.
func TestTakenPortFailsServe(t *testing.T) {
	other, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	a := newApp(t, testEnv(t), Flags{Addr: other.Addr().String()})
	err = a.Run(context.Background(), RunOptions{})
	if err == nil || !strings.Contains(err.Error(), "the port is taken") {
		t.Fatalf("Run: %v", err)
	}
}

// endless is an OpenAI-compatible upstream whose answers never end (a
// token every 20 ms), for the remote engine.
func endless(t *testing.T) *httptest.Server {
	t.Helper()
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.HasSuffix(r.URL.Path, "/models"):
			fmt.Fprint(w, `{"object":"list","data":[{"id":"up","object":"model"}]}`)
		case strings.HasSuffix(r.URL.Path, "/chat/completions"):
			w.Header().Set("Content-Type", "text/event-stream")
			for i := 0; ; i++ {
				if _, err := fmt.Fprintf(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"w%d \"}}]}\n\n", i); err != nil {
					return
				}
				w.(http.Flusher).Flush()
				select { // paces the stream on purpose: an answer that goes on
				case <-r.Context().Done():
					return
				case <-time.After(20 * time.Millisecond):
				}
			}
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(up.Close)
	return up
}

// TestShutdownEndsARunningAnswerInTime: an answer that would never end
// is cut when the app shuts down, and Run returns within ShutdownTimeout.
func TestShutdownEndsARunningAnswerInTime(t *testing.T) {
	up := endless(t)
	a := newApp(t, testEnv(t), Flags{Engine: "remote", RemoteURL: up.URL + "/v1", Model: "up"})
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx, RunOptions{Model: ModelOn, Ready: func(u string) { ready <- u }}) }()
	url := <-ready
	resp, err := http.Post(url+"v1/chat/completions", "application/json",
		strings.NewReader(`{"model":"up","stream":true,"messages":[{"role":"user","content":"go on"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("the answer ended before it began: %v", err)
		}
		if strings.Contains(line, "w0") {
			break
		}
	}
	start := time.Now()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(ShutdownTimeout + time.Second):
		t.Fatal("Run did not return in time")
	}
	if d := time.Since(start); d > ShutdownTimeout {
		t.Fatalf("shutdown took %v", d)
	}
	io.Copy(io.Discard, br) // the stream ends
	if st := a.Status(); st.State != service.StateOff {
		t.Fatalf("after shutdown: %+v", st)
	}
	if err := a.Shutdown(context.Background()); err != nil {
		t.Fatalf("a second Shutdown: %v", err)
	}
}

func TestOnShutdownRunsAfterTheModelStopped(t *testing.T) {
	a := newApp(t, testEnv(t), Flags{})
	var order []string
	a.OnShutdown(func(ctx context.Context) error {
		order = append(order, "history flushed, model "+string(a.Status().State))
		return nil
	})
	a.OnShutdown(func(ctx context.Context) error { return fmt.Errorf("history: disk full") })
	ready := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- a.Run(context.Background(), RunOptions{Model: ModelOff, Ready: func(u string) { ready <- u }})
	}()
	<-ready
	err := a.Shutdown(context.Background())
	if runErr := <-done; runErr == nil || runErr.Error() != err.Error() {
		t.Fatalf("Run returned %v, Shutdown %v", runErr, err)
	}
	if len(order) != 1 || order[0] != "history flushed, model off" || err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("order %v, err %v", order, err)
	}
}

// TestSettingsAreSavedAloneAndEngineSwitches: a change from the tray
// writes that setting only (not this run's flags), and a model that is
// on loads again on the new engine.
func TestSettingsAreSavedAloneAndEngineSwitches(t *testing.T) {
	env := testEnv(t)
	settings := filepath.Join(env["XDG_CONFIG_HOME"], "npuchat", "settings.json")
	os.MkdirAll(filepath.Dir(settings), 0o755)
	os.WriteFile(settings, []byte(`{"threads": 2, "keep_alive": "10m"}`), 0o644)
	a := newApp(t, env, Flags{Model: tinyModel(t), Name: "tiny", Engine: "cpu", KeepAlive: "-1"})
	defer a.Shutdown(context.Background())
	if a.ServeAtStart() {
		t.Fatal("serve at start is on by default")
	}
	if none := newApp(t, testEnv(t), Flags{}); none.ModelInstalled() {
		t.Fatal("minicpm5:2b installed in an empty home")
	}
	if err := a.SetServeAtStart(true); err != nil {
		t.Fatal(err)
	}
	if err := a.SetEngine(context.Background(), "bogus"); err == nil {
		t.Fatal("engine bogus accepted")
	}
	if err := a.SetEngine(context.Background(), "remote"); err == nil || !strings.Contains(err.Error(), "remote_url") {
		t.Fatalf("remote without a URL: %v", err)
	}
	a.StartModel()
	waitState(t, a, service.StateOn)
	if err := a.SetEngine(context.Background(), "auto"); err != nil {
		t.Fatal(err)
	}
	if a.Engine() != "auto" {
		t.Fatalf("engine %q", a.Engine())
	}
	if st := waitState(t, a, service.StateOn); st.Backend != "cpu" { // a local file runs on the CPU
		t.Fatalf("after the switch: %+v", st)
	}
	s, err := config.ReadSettings(settings)
	if err != nil {
		t.Fatal(err)
	}
	want := config.Settings{Threads: 2, KeepAlive: "10m", ServeAtStart: true, Engine: "auto"}
	if fmt.Sprint(s) != fmt.Sprint(want) {
		t.Fatalf("settings file %+v, want %+v", s, want)
	}
	b, _ := os.ReadFile(settings)
	var raw map[string]any
	json.Unmarshal(b, &raw)
	if _, ok := raw["model"]; ok {
		t.Fatalf("the run's --model was saved: %s", b)
	}
	again := newApp(t, env, Flags{})
	defer again.Shutdown(context.Background())
	if !again.ServeAtStart() || again.Engine() != "auto" {
		t.Fatalf("next start: serve at start %v, engine %s", again.ServeAtStart(), again.Engine())
	}
}

// TestLaunchAtLoginIsTheRealEntry: the check mark reads the XDG file.
func TestLaunchAtLoginIsTheRealEntry(t *testing.T) {
	env := testEnv(t)
	a, err := New(context.Background(), Options{Getenv: func(k string) string { return env[k] }, GOOS: "linux",
		Logger: slog.New(slog.DiscardHandler), Executable: "/usr/bin/npuchat"})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Shutdown(context.Background())
	if on, err := a.LaunchAtLogin(); on || err != nil {
		t.Fatalf("before: %v %v", on, err)
	}
	if err := a.SetLaunchAtLogin(true); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(env["XDG_CONFIG_HOME"], "autostart", "npuchat.desktop")
	b, err := os.ReadFile(file)
	if err != nil || !strings.Contains(string(b), `Exec="/usr/bin/npuchat" --hidden`) {
		t.Fatalf("%s: %s %v", file, b, err)
	}
	os.Remove(file)
	if on, _ := a.LaunchAtLogin(); on {
		t.Fatal("on after the file was removed by hand")
	}
}

func TestNewRefusesBadFlags(t *testing.T) {
	env := testEnv(t)
	cases := []struct {
		flags Flags
		want  string
	}{
		{Flags{Engine: "gpu"}, `--engine "gpu" is not one of`},
		{Flags{Engine: "remote"}, "--remote-url"},
		{Flags{KeepAlive: "soon"}, "--keep-alive"},
		{Flags{Parallel: "lots"}, `--parallel "lots"`},
		{Flags{Parallel: "17"}, `--parallel "17"`},
		{Flags{Model: "/no/such/model.gguf"}, "--model /no/such/model.gguf"},
		{Flags{Addr: "0.0.0.0:8001"}, "set an API key"},
	}
	for _, c := range cases {
		_, err := New(context.Background(), Options{Getenv: func(k string) string { return env[k] }, Flags: c.flags, Logger: slog.New(slog.DiscardHandler)})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.flags, err, c.want)
		}
	}
}

func TestOpenChatUsesTheOpener(t *testing.T) {
	env := testEnv(t)
	var opened []string
	a, err := New(context.Background(), Options{Getenv: func(k string) string { return env[k] }, Flags: Flags{Addr: "127.0.0.1:0"},
		Logger: slog.New(slog.DiscardHandler), OpenURL: func(u string) error { opened = append(opened, u); return nil }})
	if err != nil {
		t.Fatal(err)
	}
	url := running(t, a, RunOptions{Model: ModelOff})
	if err := a.OpenChat(); err != nil || len(opened) != 1 || !strings.HasPrefix(opened[0], url+"open?t=") {
		t.Fatalf("opened %v (%v), want a link on %s", opened, err, url)
	}
	// Every opening is a fresh one-time link that starts the page's
	// session (the history and the settings need it), so the tray and a
	// second launch always get the person in.
	if err := a.OpenChat(); err != nil || len(opened) != 2 || opened[1] == opened[0] {
		t.Fatalf("opened again %v (%v), want a fresh link", opened, err)
	}
	for _, link := range opened {
		cookie, err := webtest.Login(strings.TrimSuffix(url, "/"), strings.TrimPrefix(link, strings.TrimSuffix(url, "/")))
		if err != nil {
			t.Fatalf("%s: %v", link, err)
		}
		req, _ := http.NewRequest("GET", url+"api/conversations", nil)
		req.Header.Set("Cookie", cookie)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("the history with the link's session: %d", resp.StatusCode)
		}
	}
	if _, err := webtest.Login(strings.TrimSuffix(url, "/"), strings.TrimPrefix(opened[0], strings.TrimSuffix(url, "/"))); err == nil {
		t.Error("a link worked twice")
	}
}

// TestOpenChatWhenServingWaitsForTheServer: a second launch may ask for
// the chat while this one is still starting: the page opens once the
// server listens (not before, on a page that does not load), and when
// the port is taken the error says so instead of opening a dead page.
func TestOpenChatWhenServingWaitsForTheServer(t *testing.T) {
	env := testEnv(t)
	var mu sync.Mutex
	var opened []string
	a, err := New(context.Background(), Options{Getenv: func(k string) string { return env[k] }, Flags: Flags{Addr: "127.0.0.1:0"},
		Logger: slog.New(slog.DiscardHandler), OpenURL: func(u string) error { mu.Lock(); opened = append(opened, u); mu.Unlock(); return nil }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Shutdown(context.Background()) })
	done := make(chan error, 1)
	go func() { done <- a.OpenChatWhenServing(context.Background()) }()
	// A return before the server listened shows below, without waiting
	// for it here: its error, or a link on no bound port (the bound
	// port is known only once listening).
	url := running(t, a, RunOptions{Model: ModelOff})
	select {
	case err := <-done:
		mu.Lock()
		defer mu.Unlock()
		if err != nil || len(opened) != 1 || !strings.HasPrefix(opened[0], url+"open?t=") {
			t.Fatalf("opened %v (%v), want a link on %s", opened, err, url)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the chat did not open once the server listened")
	}

	other, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	b := newApp(t, testEnv(t), Flags{Addr: other.Addr().String()})
	b.opts.OpenURL = func(u string) error { t.Errorf("opened %s, which is not served", u); return nil }
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go b.Run(ctx, RunOptions{Model: ModelOff, RetryListen: time.Hour})
	if err := b.OpenChatWhenServing(context.Background()); err == nil || !strings.Contains(err.Error(), "the port is taken") {
		t.Fatalf("port taken: %v", err)
	}
}

// TestOpenChatSaysWhyThePageIsNotServed: "Open chat" while another
// program holds the port says so, rather than opening a page that
// cannot load (or, worse, the other program's).
func TestOpenChatSaysWhyThePageIsNotServed(t *testing.T) {
	other, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	a := newApp(t, testEnv(t), Flags{Addr: other.Addr().String()})
	a.opts.OpenURL = func(u string) error { t.Errorf("opened %s, which NPU Chat does not serve", u); return nil }
	watch, stop := a.WatchServer()
	defer stop()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go a.Run(ctx, RunOptions{Model: ModelOff, RetryListen: time.Hour})
	<-watch
	if err := a.OpenChat(); err == nil || !strings.Contains(err.Error(), "the port is taken") {
		t.Fatalf("Open chat with the port taken: %v", err)
	}
}

// TestRemoteWithoutURLSaysWhere: the remote engine without a URL is
// refused with words about where "remote" came from (the settings file,
// by its path; NPUCHAT_ENGINE; --engine) and how to fix it there, not
// about flags the user never passed.
func TestRemoteWithoutURLSaysWhere(t *testing.T) {
	for _, tc := range []struct {
		name     string
		settings string // settings.json's text ("" for none)
		env      map[string]string
		flags    Flags
		want     []string // "<settings>" is the settings file's path
		notWant  string
	}{
		{"settings file", `{"engine": "remote"}`, nil, Flags{},
			[]string{`the settings file <settings> says "engine": "remote" but has no "remote_url"`, `add "remote_url"`, "NPUCHAT_REMOTE_URL"}, "--engine"},
		{"environment", "", map[string]string{"NPUCHAT_ENGINE": "remote"}, Flags{},
			[]string{"NPUCHAT_ENGINE=remote is set", "set NPUCHAT_REMOTE_URL too", `"remote_url" in <settings>`, "unset NPUCHAT_ENGINE"}, "--engine"},
		{"flag", `{"engine": "cpu"}`, nil, Flags{Engine: "remote"},
			[]string{"--engine remote needs", "pass --remote-url too", `"remote_url" in <settings>`}, "the settings file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := testEnv(t)
			for k, v := range tc.env {
				env[k] = v
			}
			settings := filepath.Join(env["XDG_CONFIG_HOME"], "npuchat", "settings.json")
			if tc.settings != "" {
				if err := os.MkdirAll(filepath.Dir(settings), 0o700); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(settings, []byte(tc.settings), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			_, err := New(context.Background(), Options{Getenv: func(k string) string { return env[k] }, Flags: tc.flags, Logger: slog.New(slog.DiscardHandler)})
			if err == nil {
				t.Fatal("the remote engine without a URL was accepted")
			}
			for _, w := range tc.want {
				if w = strings.ReplaceAll(w, "<settings>", settings); !strings.Contains(err.Error(), w) {
					t.Errorf("the error lacks %q:\n%v", w, err)
				}
			}
			if strings.Contains(err.Error(), tc.notWant) {
				t.Errorf("the error talks of %q:\n%v", tc.notWant, err)
			}
		})
	}
}
