package oaicompat

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/npuchat/npuchat/service/backend"
)

// fakeServer is an OpenAI-compatible server for tests: GET /v1/models
// lists models, and the completion endpoints run handler.
type fakeServer struct {
	*httptest.Server
	models  []string
	handler http.HandlerFunc
	entry   map[string]any // more fields of each model's entry

	mu     sync.Mutex
	bodies []map[string]any
	auth   []string
}

func newFakeServer(t *testing.T, handler http.HandlerFunc, models ...string) *fakeServer {
	t.Helper()
	if len(models) == 0 {
		models = []string{"minicpm5:2b"}
	}
	f := &fakeServer{models: models, handler: handler}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/models", func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.auth = append(f.auth, r.Header.Get("Authorization"))
		f.mu.Unlock()
		var list struct {
			Object string           `json:"object"`
			Data   []map[string]any `json:"data"`
		}
		list.Object = "list"
		for _, m := range f.models {
			e := map[string]any{"id": m, "object": "model", "owned_by": "test"}
			for k, v := range f.entry {
				e[k] = v
			}
			list.Data = append(list.Data, e)
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(list)
	})
	record := func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		b, _ := io.ReadAll(r.Body)
		json.Unmarshal(b, &body)
		f.mu.Lock()
		f.bodies = append(f.bodies, body)
		f.auth = append(f.auth, r.Header.Get("Authorization"))
		f.mu.Unlock()
		f.handler(w, r)
	}
	mux.HandleFunc("POST /v1/chat/completions", record)
	mux.HandleFunc("POST /v1/completions", record)
	f.Server = httptest.NewServer(mux)
	t.Cleanup(f.Close)
	return f
}

func (f *fakeServer) lastBody() map[string]any {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.bodies) == 0 {
		return nil
	}
	return f.bodies[len(f.bodies)-1]
}

// serveFile answers with a testdata file as an event stream (or JSON).
func serveFile(t *testing.T, name string) http.HandlerFunc {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(name, ".json") {
			w.Header().Set("Content-Type", "application/json")
		} else {
			w.Header().Set("Content-Type", "text/event-stream")
		}
		w.Write(b)
	}
}

// loaded returns a loaded client for srv.
func loaded(t *testing.T, srv *fakeServer, opts Options) *Client {
	t.Helper()
	opts.BaseURL = srv.URL
	if opts.Model == "" {
		opts.Model = srv.models[0]
	}
	c, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Load(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	return c
}

// collect runs Generate and gathers the emitted text.
func collect(c *Client, ctx context.Context, req *backend.Request) (string, []string, backend.Result, error) {
	var pieces []string
	res, err := c.Generate(ctx, req, func(tok backend.Token) error {
		pieces = append(pieces, tok.Text)
		return nil
	})
	return strings.Join(pieces, ""), pieces, res, err
}

func chat(text string) *backend.Request {
	return &backend.Request{Messages: []backend.Message{{Role: "user", Content: text}}}
}

// TestStreamShapes replays what each server sends for the same answer.
func TestStreamShapes(t *testing.T) {
	tests := []struct {
		file        string
		completion  bool
		text        string
		finish      string
		prompt, gen int
		prefill     time.Duration // 0: measured here, only checked > 0
		decode      time.Duration
	}{
		{file: "flm_chat.sse", text: "Hello, world! 你好", finish: backend.FinishStop, prompt: 12, gen: 4,
			prefill: 250 * time.Millisecond, decode: 500 * time.Millisecond},
		{file: "llamacpp_chat.sse", text: "Hello, world! 你好", finish: backend.FinishLength, prompt: 12, gen: 4,
			prefill: 300 * time.Millisecond, decode: 400 * time.Millisecond},
		{file: "vllm_chat.sse", text: "Hello, world! 你好", finish: backend.FinishStop, prompt: 12, gen: 4},
		{file: "llamacpp_completion.sse", completion: true, text: "Hello, world! 你好", finish: backend.FinishStop, prompt: 12, gen: 4,
			prefill: 300 * time.Millisecond, decode: 400 * time.Millisecond},
		{file: "keepalive_multiline.sse", text: "Hello, world! 你好", finish: backend.FinishStop, gen: 2},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			srv := newFakeServer(t, serveFile(t, tt.file))
			c := loaded(t, srv, Options{})
			req := chat("hi")
			if tt.completion {
				req = &backend.Request{Prompt: "hi"}
			}
			text, _, res, err := collect(c, context.Background(), req)
			if err != nil {
				t.Fatalf("Generate: %v", err)
			}
			if text != tt.text {
				t.Errorf("text = %q, want %q", text, tt.text)
			}
			if res.FinishReason != tt.finish || res.PromptTokens != tt.prompt || res.CompletionTokens != tt.gen {
				t.Errorf("result = %+v, want finish %s prompt %d completion %d", res, tt.finish, tt.prompt, tt.gen)
			}
			if tt.prefill != 0 && (res.PrefillDuration != tt.prefill || res.DecodeDuration != tt.decode) {
				t.Errorf("durations = %v, %v, want %v, %v", res.PrefillDuration, res.DecodeDuration, tt.prefill, tt.decode)
			}
			if tt.prefill == 0 && res.PrefillDuration <= 0 {
				t.Errorf("prefill duration %v not measured", res.PrefillDuration)
			}
		})
	}
}

// TestFLMSpeedsOnly: with only FastFlowLM's speeds, the durations follow
// from them.
func TestFLMSpeedsOnly(t *testing.T) {
	srv := newFakeServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, `data: {"choices":[{"index":0,"delta":{"content":"x"},"finish_reason":"stop"}]}`+"\n\n")
		io.WriteString(w, `data: {"choices":[],"usage":{"prompt_tokens":100,"completion_tokens":20,"prefill_speed_tps":200,"decoding_speed_tps":40}}`+"\n\n")
		io.WriteString(w, "data: [DONE]\n\n")
	})
	c := loaded(t, srv, Options{})
	_, _, res, err := collect(c, context.Background(), chat("hi"))
	if err != nil {
		t.Fatal(err)
	}
	if res.PrefillDuration != 500*time.Millisecond || res.DecodeDuration != 500*time.Millisecond {
		t.Errorf("durations = %v, %v, want 500ms each", res.PrefillDuration, res.DecodeDuration)
	}
	if got := res.DecodeTokensPerSecond(); got != 40 {
		t.Errorf("decode speed = %v, want 40", got)
	}
}

// TestLineEndings: the same stream with CRLF, CR and LF line ends.
func TestLineEndings(t *testing.T) {
	b, err := os.ReadFile("testdata/flm_chat.sse")
	if err != nil {
		t.Fatal(err)
	}
	for name, eol := range map[string]string{"crlf": "\r\n", "cr": "\r", "lf": "\n"} {
		t.Run(name, func(t *testing.T) {
			body := strings.ReplaceAll(string(b), "\n", eol)
			srv := newFakeServer(t, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
				// Write byte by byte so that a CR and its LF arrive apart.
				fl := w.(http.Flusher)
				for i := 0; i < len(body); i += 7 {
					io.WriteString(w, body[i:min(i+7, len(body))])
					fl.Flush()
				}
			})
			c := loaded(t, srv, Options{})
			text, _, res, err := collect(c, context.Background(), chat("hi"))
			if err != nil || text != "Hello, world! 你好" || res.CompletionTokens != 4 {
				t.Fatalf("got %q %+v %v", text, res, err)
			}
		})
	}
}

// TestRequestBody: the sampling parameters and the configured model name
// reach the server.
func TestRequestBody(t *testing.T) {
	srv := newFakeServer(t, serveFile(t, "flm_chat.sse"), "upstream-name")
	c := loaded(t, srv, Options{APIKey: "sekret", Model: "upstream-name"})
	req := &backend.Request{
		Model:     "what-the-client-asked",
		Messages:  []backend.Message{{Role: "system", Content: "be brief"}, {Role: "user", Content: "hi"}},
		MaxTokens: 77,
		Stop:      []string{"a", "b", "c", "d", "e"},
		Sampling: backend.Sampling{Temperature: 0.7, TopP: 0.9, TopK: 40, MinP: 0.05, RepeatPenalty: 1.1,
			FrequencyPenalty: 0.2, PresencePenalty: 0.3, Seed: 42, HasSeed: true},
	}
	if _, _, _, err := collect(c, context.Background(), req); err != nil {
		t.Fatal(err)
	}
	got := srv.lastBody()
	want := map[string]any{
		"model": "upstream-name", "stream": true, "stream_options": map[string]any{"include_usage": true},
		"max_tokens": 77.0, "temperature": 0.7, "top_p": 0.9, "top_k": 40.0, "min_p": 0.05,
		"repetition_penalty": 1.1, "repeat_penalty": 1.1, "frequency_penalty": 0.2, "presence_penalty": 0.3,
		"seed": 42.0, "stop": []any{"a", "b", "c", "d"},
		"messages": []any{map[string]any{"role": "system", "content": "be brief"}, map[string]any{"role": "user", "content": "hi"}},
	}
	gb, _ := json.Marshal(got)
	wb, _ := json.Marshal(want)
	if string(gb) != string(wb) {
		t.Errorf("body\n got %s\nwant %s", gb, wb)
	}
	srv.mu.Lock()
	for _, a := range srv.auth {
		if a != "Bearer sekret" {
			t.Errorf("Authorization = %q", a)
		}
	}
	srv.mu.Unlock()

	// Greedy decoding sends temperature 0 and nothing else.
	if _, _, _, err := collect(c, context.Background(), chat("hi")); err != nil {
		t.Fatal(err)
	}
	got = srv.lastBody()
	for _, k := range []string{"top_p", "top_k", "min_p", "repetition_penalty", "seed", "stop", "max_tokens"} {
		if _, ok := got[k]; ok {
			t.Errorf("greedy request sends %s", k)
		}
	}
	if got["temperature"] != 0.0 {
		t.Errorf("temperature = %v, want 0", got["temperature"])
	}
}

// TestStopStrings: stop strings end the answer even when the server
// ignores them (FastFlowLM does), across chunk boundaries, and the
// upstream request is closed.
func TestStopStrings(t *testing.T) {
	closed := make(chan struct{})
	srv := newFakeServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for _, p := range []string{"Hello", " wor", "ld. <|im", "_end|> more", " and more"} {
			b, _ := json.Marshal(p)
			io.WriteString(w, `data: {"choices":[{"index":0,"delta":{"content":`+string(b)+`},"finish_reason":null}]}`+"\n\n")
			w.(http.Flusher).Flush()
		}
		<-r.Context().Done() // the stream never ends of itself
		close(closed)
	})
	c := loaded(t, srv, Options{})
	req := chat("hi")
	req.Stop = []string{"<|im_end|>", "never"}
	text, _, res, err := collect(c, context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if text != "Hello world. " || res.FinishReason != backend.FinishStop {
		t.Errorf("got %q %q", text, res.FinishReason)
	}
	<-closed // the upstream request was closed after the stop string
}

func TestStopFilter(t *testing.T) {
	tests := []struct {
		stops  []string
		pieces []string
		want   string
		stop   bool
	}{
		{nil, []string{"ab", "cd"}, "abcd", false},
		{[]string{"STOP"}, []string{"xx ST", "O", "P yy"}, "xx ", true},
		{[]string{"STOP"}, []string{"xx ST", "OW"}, "xx STOW", false},
		{[]string{"b", "ab"}, []string{"xa", "b"}, "x", true}, // the earliest match wins: "ab" at 1, not "b" at 2
		{[]string{"é!"}, []string{"caf", "é", "!"}, "caf", true},
		{[]string{"\n\n"}, []string{"line\n", "\nnext"}, "line", true},
	}
	for _, tt := range tests {
		f := newStopFilter(tt.stops)
		var out strings.Builder
		stopped := false
		for _, p := range tt.pieces {
			o, s := f.push(p)
			out.WriteString(o)
			if s {
				stopped = true
				break
			}
		}
		if !stopped {
			out.WriteString(f.flush())
		}
		if out.String() != tt.want || stopped != tt.stop {
			t.Errorf("%q %q: got %q %v, want %q %v", tt.stops, tt.pieces, out.String(), stopped, tt.want, tt.stop)
		}
	}
}

// TestUpstreamErrors: HTTP errors, in-stream errors and broken streams map
// to the backend sentinels, and say what was emitted.
func TestUpstreamErrors(t *testing.T) {
	tests := []struct {
		name    string
		handler func(t *testing.T) http.HandlerFunc
		kind    error
		msg     string
		emitted int
	}{
		{"flm ERT timeout after prefill", func(t *testing.T) http.HandlerFunc { return serveFile(t, "flm_ert_timeout.json") },
			backend.ErrDeviceFailed, "ERT_CMD_STATE_TIMEOUT", 0},
		{"openai 400", jsonStatus(400, `{"error":{"message":"temperature must be at most 2","type":"invalid_request_error","param":"temperature","code":null}}`),
			backend.ErrBadRequest, "temperature must be at most 2", 0},
		{"openai context", jsonStatus(400, `{"error":{"message":"This model's maximum context length is 4096 tokens. However, your messages resulted in 5000 tokens.","type":"invalid_request_error","code":"context_length_exceeded"}}`),
			backend.ErrPromptTooLong, "maximum context length", 0},
		{"flm max length", jsonStatus(400, `{"error":{"message":"Max length reached!","type":"model_error","code":400}}`),
			backend.ErrPromptTooLong, "Max length reached", 0},
		{"vllm old shape", jsonStatus(400, `{"object":"error","message":"This model's maximum context length is 2048 tokens.","type":"BadRequestError","param":null,"code":400}`),
			backend.ErrPromptTooLong, "2048", 0},
		{"http 500 device", jsonStatus(500, `{"error":{"message":"[XRT] ERROR: Failed to submit the command to the hw queue (0xc01e0200)","type":"server_error","code":500}}`),
			backend.ErrDeviceFailed, "hw queue", 0},
		{"llama.cpp error field", func(t *testing.T) http.HandlerFunc { return serveFile(t, "llamacpp_error_field.sse") },
			backend.ErrPromptTooLong, "exceeds the available context size", 0},
		{"vllm in-stream error", func(t *testing.T) http.HandlerFunc { return serveFile(t, "vllm_error.sse") },
			nil, "engine is dead", 1},
		{"stream cut mid-answer", func(t *testing.T) http.HandlerFunc {
			return func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/event-stream")
				io.WriteString(w, `data: {"choices":[{"index":0,"delta":{"content":"one "},"finish_reason":null}]}`+"\n\n")
				io.WriteString(w, `data: {"choices":[{"index":0,"delta":{"content":"two "},"finish_reason":null}]}`+"\n\n")
				w.(http.Flusher).Flush()
				panic(http.ErrAbortHandler) // the process died: the connection drops
			}
		}, backend.ErrDeviceFailed, "broke", 2},
		{"stream ends without finish", func(t *testing.T) http.HandlerFunc {
			return func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/event-stream")
				io.WriteString(w, `data: {"choices":[{"index":0,"delta":{"content":"one "},"finish_reason":null}]}`+"\n\n")
			}
		}, backend.ErrDeviceFailed, "before the answer was complete", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newFakeServer(t, tt.handler(t))
			c := loaded(t, srv, Options{})
			_, pieces, _, err := collect(c, context.Background(), chat("hi"))
			if err == nil {
				t.Fatal("no error")
			}
			var oe *Error
			if !errors.As(err, &oe) {
				t.Fatalf("error %T %v is not *Error", err, err)
			}
			if tt.kind != nil && !errors.Is(err, tt.kind) {
				t.Errorf("error %q is not %v", err, tt.kind)
			}
			if tt.kind == nil && oe.Kind != nil {
				t.Errorf("error %q classified as %v", err, oe.Kind)
			}
			if !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("error %q lacks %q", err, tt.msg)
			}
			if oe.Emitted != tt.emitted || len(pieces) != tt.emitted || oe.EmittedText != strings.Join(pieces, "") {
				t.Errorf("emitted %d %q, caller saw %q", oe.Emitted, oe.EmittedText, pieces)
			}
			var counted interface{ EmittedTokens() int }
			if !errors.As(err, &counted) || counted.EmittedTokens() != tt.emitted {
				t.Error("EmittedTokens not reachable through errors.As")
			}
		})
	}
}

func jsonStatus(code int, body string) func(*testing.T) http.HandlerFunc {
	return func(*testing.T) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(code)
			io.WriteString(w, body)
		}
	}
}

// TestServerGone: a server that stops answering is a device failure in
// Generate (the service falls back) and a clear error in Load.
func TestServerGone(t *testing.T) {
	srv := newFakeServer(t, serveFile(t, "flm_chat.sse"))
	c := loaded(t, srv, Options{})
	srv.Close()
	_, _, _, err := collect(c, context.Background(), chat("hi"))
	if !errors.Is(err, backend.ErrDeviceFailed) {
		t.Fatalf("Generate after the server died: %v, want ErrDeviceFailed", err)
	}
	c2, _ := New(Options{BaseURL: srv.URL, Model: "m"})
	err = c2.Load(context.Background(), nil)
	if err == nil || !strings.Contains(err.Error(), "cannot reach") {
		t.Fatalf("Load with no server: %v", err)
	}
}

func TestLoad(t *testing.T) {
	srv := newFakeServer(t, serveFile(t, "flm_chat.sse"), "first", "second")
	c, _ := New(Options{BaseURL: srv.URL + "/v1/", Model: "third"})
	err := c.Load(context.Background(), nil)
	if err == nil || !strings.Contains(err.Error(), `"third"`) || !strings.Contains(err.Error(), "first, second") {
		t.Errorf("unlisted model: %v", err)
	}
	if _, err := c.Generate(context.Background(), chat("hi"), nil); !errors.Is(err, backend.ErrNotLoaded) {
		t.Errorf("Generate before Load: %v", err)
	}
	c, _ = New(Options{BaseURL: srv.URL})
	if err := c.Load(context.Background(), nil); err != nil || c.Model() != "first" || c.Info().Name != "first" {
		t.Errorf("no model named: %v, model %q", err, c.Model())
	}
	if c.Kind() != "remote" || c.Info().Format != "remote" {
		t.Errorf("kind %q format %q", c.Kind(), c.Info().Format)
	}

	keyed := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusUnauthorized)
		io.WriteString(w, `{"error":{"message":"Invalid API Key","type":"invalid_request_error"}}`)
	}))
	defer keyed.Close()
	c, _ = New(Options{BaseURL: keyed.URL, Model: "m"})
	if err := c.Load(context.Background(), nil); err == nil || !strings.Contains(err.Error(), "API key") {
		t.Errorf("401: %v", err)
	}

	for _, bad := range []string{"", "ftp://x", "http://", "::"} {
		if _, err := New(Options{BaseURL: bad}); err == nil {
			t.Errorf("New(%q) accepted", bad)
		}
	}
	for in, want := range map[string]string{
		"http://h:1":         "http://h:1/v1",
		"http://h:1/":        "http://h:1/v1",
		"http://h:1/v1":      "http://h:1/v1",
		"https://h/api/v1/":  "https://h/api/v1",
		"http://h:1/openai":  "http://h:1/openai/v1",
		" http://h:1/v1?x=1": "http://h:1/v1",
	} {
		c, err := New(Options{BaseURL: in})
		if err != nil || c.BaseURL() != want {
			t.Errorf("BaseURL(%q) = %q, %v; want %q", in, c.BaseURL(), err, want)
		}
	}
}

// endlessServer streams pieces pieces of text, then keeps the stream
// open until its client goes away, and reports that on gone: a request to
// it ends only by the client's doing.
func endlessServer(t *testing.T, pieces int) (*fakeServer, chan struct{}) {
	gone := make(chan struct{}, 1)
	srv := newFakeServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for range pieces {
			io.WriteString(w, `data: {"choices":[{"index":0,"delta":{"content":"x"},"finish_reason":null}]}`+"\n\n")
			w.(http.Flusher).Flush()
		}
		<-r.Context().Done()
		gone <- struct{}{}
	})
	return srv, gone
}

// TestCancel: a cancelled context ends Generate with ctx.Err() and closes
// the upstream request (which never ends of itself).
func TestCancel(t *testing.T) {
	srv, gone := endlessServer(t, 3)
	c := loaded(t, srv, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	n := 0
	_, err := c.Generate(ctx, chat("hi"), func(backend.Token) error {
		n++
		if n == 3 {
			cancel()
		}
		return nil
	})
	if !errors.Is(err, context.Canceled) || n != 3 {
		t.Fatalf("err = %v after %d tokens, want context.Canceled after 3", err, n)
	}
	<-gone
}

// TestEmitError: an error from emit is returned as is, and ends the
// upstream request.
func TestEmitError(t *testing.T) {
	srv, gone := endlessServer(t, 1)
	c := loaded(t, srv, Options{})
	boom := errors.New("client went away")
	_, err := c.Generate(context.Background(), chat("hi"), func(backend.Token) error { return boom })
	if err != boom {
		t.Fatalf("err = %v, want %v", err, boom)
	}
	<-gone
}

// TestUnloadDuringGenerate: Unload makes a running Generate return (the
// stream never ends of itself).
func TestUnloadDuringGenerate(t *testing.T) {
	srv, gone := endlessServer(t, 1)
	c := loaded(t, srv, Options{})
	done := make(chan error, 1)
	started := make(chan struct{})
	var once sync.Once
	go func() {
		_, err := c.Generate(context.Background(), chat("hi"), func(backend.Token) error {
			once.Do(func() { close(started) })
			return nil
		})
		done <- err
	}()
	<-started
	if err := c.Unload(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, backend.ErrNotLoaded) {
		t.Errorf("err = %v, want ErrNotLoaded", err)
	}
	<-gone
}

// TestNonStreamingAnswer: a server that ignores "stream" still works.
func TestNonStreamingAnswer(t *testing.T) {
	srv := newFakeServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"x","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"Whole answer. END tail"},"finish_reason":"length"}],"usage":{"prompt_tokens":3,"completion_tokens":5,"total_tokens":8}}`)
	})
	c := loaded(t, srv, Options{})
	req := chat("hi")
	text, _, res, err := collect(c, context.Background(), req)
	if err != nil || text != "Whole answer. END tail" || res.FinishReason != backend.FinishLength || res.CompletionTokens != 5 {
		t.Fatalf("got %q %+v %v", text, res, err)
	}
	req.Stop = []string{" END"}
	text, _, res, err = collect(c, context.Background(), req)
	if err != nil || text != "Whole answer." || res.FinishReason != backend.FinishStop {
		t.Fatalf("with stop: got %q %+v %v", text, res, err)
	}
}

func TestClassify(t *testing.T) {
	tests := []struct {
		status int
		msg    string
		want   error
	}{
		{200, "runlist failed execution (ERT_CMD_STATE_TIMEOUT)", backend.ErrDeviceFailed},
		{0, "runlist failed execution (ERT_CMD_STATE_NEW)", backend.ErrDeviceFailed},
		{500, "No such device with index '0'", backend.ErrDeviceFailed},
		{500, "[XRT] ERROR: Failed to submit the command to the hw queue (0xc01e0200)", backend.ErrDeviceFailed},
		{500, "Failed to create context virtual (0xc01e0009)", backend.ErrDeviceFailed},
		{0, "amdxdna: CREATE_HWCTX err=-22", backend.ErrDeviceFailed},
		{400, "runlist failed", backend.ErrDeviceFailed}, // the device wins over the status
		{400, "Max length reached!", backend.ErrPromptTooLong},
		{400, "the request exceeds the available context size, try increasing it", backend.ErrPromptTooLong},
		{400, "This model's maximum context length is 4096 tokens.", backend.ErrPromptTooLong},
		{0, "input is too large to process. increase the physical batch size", backend.ErrPromptTooLong},
		{400, "temperature must be between 0 and 2", backend.ErrBadRequest},
		{422, "field required", backend.ErrBadRequest},
		{413, "Request payload too large", backend.ErrBadRequest},
		{500, "CUDA out of memory", nil},
		{503, "NPU is in use and request queue is full (limit: 10). Please try again later.", nil},
		{404, "The model `x` does not exist.", nil},
		{0, "", nil},
	}
	for _, tt := range tests {
		if got := Classify(tt.status, tt.msg); got != tt.want {
			t.Errorf("Classify(%d, %q) = %v, want %v", tt.status, tt.msg, got, tt.want)
		}
	}
}

func TestSSEReader(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []event
	}{
		{"lf", "data: a\n\ndata: b\n\n", []event{{Data: "a"}, {Data: "b"}}},
		{"crlf", "data: a\r\n\r\ndata: b\r\n\r\n", []event{{Data: "a"}, {Data: "b"}}},
		{"cr", "data: a\r\rdata: b\r\r", []event{{Data: "a"}, {Data: "b"}}},
		{"multi-line", "data: a\ndata:b\ndata:  c\n\n", []event{{Data: "a\nb\n c"}}},
		{"comments", ": ping\n\n:x\ndata: a\n: mid\n\n", []event{{Data: "a"}}},
		{"event and error", "event: error\ndata: {\"m\":1}\n\nerror: {\"code\":500}\n\n", []event{{Name: "error", Data: "{\"m\":1}"}, {Error: "{\"code\":500}"}}},
		{"no final blank line", "data: a\n\ndata: [DONE]", []event{{Data: "a"}, {Data: "[DONE]"}}},
		{"bom and ignored fields", "\uFEFFid: 1\nretry: 5\ndata: a\n\n", []event{{Data: "a"}}},
		{"empty data", "data\n\n", []event{{Data: ""}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newSSEReader(strings.NewReader(tt.in))
			var got []event
			for {
				ev, err := r.Next()
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, ev)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Errorf("event %d = %+v, want %+v", i, got[i], tt.want[i])
				}
			}
		})
	}
}

// FuzzSSE: no input makes the reader panic or loop.
func FuzzSSE(f *testing.F) {
	for _, s := range []string{"data: a\n\n", "data: a\r\n\r\n", "\r\r\r", ":\n", "error: x", "data:[DONE]"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		r := newSSEReader(strings.NewReader(in))
		for i := 0; i <= len(in)+1; i++ {
			if _, err := r.Next(); err != nil {
				return
			}
		}
		t.Fatalf("more events than bytes in %q", in)
	})
}

// TestIdleTimeout: a server that goes silent mid-answer (a hung
// accelerator) is a device failure after IdleTimeout; keep-alive comments
// count as life.
func TestIdleTimeout(t *testing.T) {
	// In a synctest bubble the clock moves only when every goroutine
	// waits, so the times below are exact, whatever the machine's load.
	synctest.Test(t, func(t *testing.T) {
		const idle = 250 * time.Millisecond
		mux := http.NewServeMux()
		mux.HandleFunc("GET /v1/models", func(w http.ResponseWriter, r *http.Request) {
			io.WriteString(w, `{"object":"list","data":[{"id":"minicpm5:2b","object":"model"}]}`)
		})
		hel := func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, `data: {"choices":[{"index":0,"delta":{"content":"Hel"},"finish_reason":null}]}`+"\n\n")
			w.(http.Flusher).Flush()
		}
		mux.HandleFunc("POST /v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
			hel(w)
			<-r.Context().Done() // silent from here on
		})
		mux.HandleFunc("POST /v1/completions", func(w http.ResponseWriter, r *http.Request) {
			hel(w)
			for range 20 { // 500 ms in all, in gaps of a tenth of the idle timeout
				time.Sleep(idle / 10)
				io.WriteString(w, ": keep-alive\n\n")
				w.(http.Flusher).Flush()
			}
			io.WriteString(w, `data: {"choices":[{"index":0,"delta":{"content":"lo"},"finish_reason":"stop"}]}`+"\n\ndata: [DONE]\n\n")
		})
		c, err := New(Options{BaseURL: "http://npu.test", Model: "minicpm5:2b", IdleTimeout: idle,
			HTTPClient: &http.Client{Transport: pipeTransport{mux}}})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Load(context.Background(), nil); err != nil {
			t.Fatal(err)
		}

		start := time.Now()
		text, _, _, err := collect(c, context.Background(), chat("hi"))
		var oe *Error
		if !errors.Is(err, backend.ErrDeviceFailed) || !errors.As(err, &oe) || oe.Emitted != 1 || text != "Hel" {
			t.Fatalf("silent server: %q %v", text, err)
		}
		if d := time.Since(start); d != idle {
			t.Errorf("gave up after %v, want %v", d, idle)
		}
		start = time.Now()
		text, _, _, err = collect(c, context.Background(), &backend.Request{Prompt: "hi"})
		if err != nil || text != "Hello" {
			t.Errorf("server with keep-alives: %q %v", text, err)
		}
		if d := time.Since(start); d != 20*idle/10 {
			t.Errorf("the lively answer took %v, want %v", d, 20*idle/10)
		}
		if _, err := c.Generate(context.Background(), &backend.Request{Messages: []backend.Message{}}, nil); !errors.Is(err, backend.ErrBadRequest) {
			t.Errorf("empty messages: %v", err)
		}
	})
}

// pipeTransport serves requests with its handler in this process, through
// an io.Pipe rather than a socket, so that a synctest bubble can see
// every wait (a socket's is invisible to it). The handler's request
// context is the client's; a cancelled request ends the response body
// with the context's error.
type pipeTransport struct{ h http.Handler }

// RoundTrip runs the handler and returns once it has written its header.
func (p pipeTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	pr, pw := io.Pipe()
	w := &pipeWriter{header: http.Header{}, body: pw, wrote: make(chan struct{})}
	stop := context.AfterFunc(req.Context(), func() { pw.CloseWithError(req.Context().Err()) })
	go func() {
		defer stop()
		p.h.ServeHTTP(w, req)
		w.WriteHeader(http.StatusOK)
		pw.Close()
	}()
	select {
	case <-w.wrote:
	case <-req.Context().Done():
		return nil, req.Context().Err()
	}
	return &http.Response{StatusCode: w.code, Status: http.StatusText(w.code), Header: w.header,
		Body: pr, Request: req, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, ContentLength: -1}, nil
}

// pipeWriter is a handler's http.ResponseWriter (and http.Flusher) that
// writes the body into a pipe.
type pipeWriter struct {
	header http.Header
	body   *io.PipeWriter
	code   int
	wrote  chan struct{} // closed when the header is written
}

func (w *pipeWriter) Header() http.Header { return w.header }

func (w *pipeWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
		close(w.wrote)
	}
}

func (w *pipeWriter) Write(p []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	return w.body.Write(p)
}

func (w *pipeWriter) Flush() {}

// TestReasoningContent: a server's reasoning_content deltas reach the
// caller as Thinking, apart from the answer's text, in order.
func TestReasoningContent(t *testing.T) {
	srv := newFakeServer(t, serveFile(t, "oflm_reasoning.sse"))
	c := loaded(t, srv, Options{})
	var thinking, text []string
	res, err := c.Generate(context.Background(), chat("hi"), func(tok backend.Token) error {
		if tok.Thinking != "" {
			if len(text) > 0 {
				t.Errorf("thinking %q after the answer began", tok.Thinking)
			}
			thinking = append(thinking, tok.Thinking)
		}
		if tok.Text != "" {
			text = append(text, tok.Text)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("Generate: %v", err)
	}
	if got := strings.Join(thinking, ""); got != "The user greets. Answer briefly." {
		t.Errorf("thinking = %q", got)
	}
	if got := strings.Join(text, ""); got != "Hello!" {
		t.Errorf("text = %q", got)
	}
	if res.FinishReason != backend.FinishStop || res.CompletionTokens != 7 {
		t.Errorf("result = %+v", res)
	}
}
