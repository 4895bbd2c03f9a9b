package web_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/npuchat/npuchat/service"
	"github.com/npuchat/npuchat/service/backend"
	"github.com/npuchat/npuchat/service/backend/fake"
	"github.com/npuchat/npuchat/service/servicetest"
	"github.com/npuchat/npuchat/web"
	"github.com/npuchat/npuchat/web/webtest"
)

// startServer starts the real server over a fake backend (webtest).
func startServer(t testing.TB, fo fake.Options, so web.Options, mo service.Options) *webtest.Server {
	t.Helper()
	ts := webtest.Start(t, webtest.Config{Fake: fo, Web: so, Service: mo})
	sessions.Store(strings.TrimPrefix(ts.URL, "http://"), ts.Cookie)
	return ts
}

// sessions maps a test server's host:port to its page session cookie:
// do and stream send it, as the page's browser does, unless the test
// sets a Cookie header itself.
var sessions sync.Map

// login opens a one-time link of srv (at url) and keeps its session for
// do and stream.
func login(t testing.TB, url string, srv *web.Server) {
	t.Helper()
	c, err := webtest.Login(url, srv.OpenLink(0))
	if err != nil {
		t.Fatal(err)
	}
	sessions.Store(strings.TrimPrefix(url, "http://"), c)
}

// withSession adds the page session of req's server, if it has one and
// req has no Cookie yet.
func withSession(req *http.Request) {
	if _, set := req.Header["Cookie"]; set {
		return
	}
	if c, ok := sessions.Load(req.URL.Host); ok {
		req.Header.Set("Cookie", c.(string))
	}
}

func do(t testing.TB, method, url, body string, hdr ...string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i] == "Host" {
			req.Host = hdr[i+1]
		} else {
			req.Header.Set(hdr[i], hdr[i+1])
		}
	}
	withSession(req)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// errorOf extracts the OpenAI error object of a body, failing if absent.
func errorOf(t *testing.T, body string) (msg, code string) {
	t.Helper()
	var e struct {
		Error struct {
			Message string `json:"message"`
			Code    string `json:"code"`
			Type    string `json:"type"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(body), &e); err != nil || e.Error.Message == "" || e.Error.Type == "" {
		t.Fatalf("not an OpenAI error object: %s", body)
	}
	return e.Error.Message, e.Error.Code
}

func TestBadRequestsGetClearErrors(t *testing.T) {
	ts := startServer(t, fake.Options{ContextLength: 50}, web.Options{MaxBodyBytes: 4096}, service.Options{})
	msgs := `"messages":[{"role":"user","content":"hi"}]`
	cases := []struct {
		name, path, body string
		status           int
		code, contains   string
	}{
		{"malformed JSON", "/v1/chat/completions", `{"model":`, 400, "invalid_request_error", "not valid JSON"},
		{"empty body", "/v1/chat/completions", ``, 400, "invalid_request_error", "empty"},
		{"no model", "/v1/chat/completions", `{` + msgs + `}`, 400, "invalid_request_error", "model is required"},
		{"unknown model", "/v1/chat/completions", `{"model":"gpt-9",` + msgs + `}`, 404, "model_not_found", "gpt-9"},
		{"no messages", "/v1/chat/completions", `{"model":"minicpm5:2b","messages":[]}`, 400, "invalid_request_error", "at least one message"},
		{"bad role", "/v1/chat/completions", `{"model":"minicpm5:2b","messages":[{"role":"robot","content":"x"}]}`, 400, "invalid_request_error", "robot"},
		{"temperature range", "/v1/chat/completions", `{"model":"minicpm5:2b",` + msgs + `,"temperature":3}`, 400, "invalid_request_error", "temperature must be between 0 and 2"},
		{"top_p range", "/v1/chat/completions", `{"model":"minicpm5:2b",` + msgs + `,"top_p":1.5}`, 400, "invalid_request_error", "top_p"},
		{"top_k negative", "/v1/chat/completions", `{"model":"minicpm5:2b",` + msgs + `,"top_k":-1}`, 400, "invalid_request_error", "top_k"},
		{"max_tokens zero", "/v1/chat/completions", `{"model":"minicpm5:2b",` + msgs + `,"max_tokens":0}`, 400, "invalid_request_error", "max_tokens"},
		{"penalty range", "/v1/chat/completions", `{"model":"minicpm5:2b",` + msgs + `,"presence_penalty":-3}`, 400, "invalid_request_error", "presence_penalty"},
		{"wrong type", "/v1/chat/completions", `{"model":"minicpm5:2b",` + msgs + `,"temperature":"hot"}`, 400, "invalid_request_error", "temperature"},
		{"n > 1", "/v1/chat/completions", `{"model":"minicpm5:2b",` + msgs + `,"n":3}`, 400, "invalid_request_error", "n must be 1"},
		{"image part", "/v1/chat/completions", `{"model":"minicpm5:2b","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"x"}}]}]}`, 400, "invalid_request_error", "text only"},
		{"stop type", "/v1/chat/completions", `{"model":"minicpm5:2b",` + msgs + `,"stop":5}`, 400, "invalid_request_error", "stop"},
		{"prompt too long", "/v1/chat/completions", `{"model":"minicpm5:2b","messages":[{"role":"user","content":"` + strings.Repeat("w ", 100) + `"}]}`, 400, "context_length_exceeded", "prompt"},
		{"body too large", "/v1/chat/completions", `{"model":"minicpm5:2b","messages":[{"role":"user","content":"` + strings.Repeat("x", 5000) + `"}]}`, 413, "request_too_large", "larger than 4096"},
		{"completion prompt list", "/v1/completions", `{"model":"minicpm5:2b","prompt":["a","b"]}`, 400, "invalid_request_error", "one string"},
		{"completion no prompt", "/v1/completions", `{"model":"minicpm5:2b"}`, 400, "invalid_request_error", "prompt is required"},
		{"unknown route", "/v1/audio/speech", `{}`, 404, "not_found", "no route"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			resp, body := do(t, "POST", ts.URL+c.path, c.body)
			if resp.StatusCode != c.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, c.status, body)
			}
			msg, code := errorOf(t, body)
			if code != c.code || !strings.Contains(msg, c.contains) {
				t.Fatalf("error %q (%s), want code %s containing %q", msg, code, c.code, c.contains)
			}
		})
	}
	// The server survived all of it.
	if resp, _ := do(t, "GET", ts.URL+"/v1/models", ""); resp.StatusCode != 200 {
		t.Fatalf("server unhealthy after bad requests: %d", resp.StatusCode)
	}
}

func TestOllamaErrorsAreOllamaShaped(t *testing.T) {
	ts := startServer(t, fake.Options{}, web.Options{}, service.Options{})
	cases := []struct{ body, contains string }{
		{`{"model":"minicpm5:2b","messages":[{"role":"user","content":"x"}],"options":{"temperature":"hot"}}`, "options.temperature must be a number"},
		{`{"model":"minicpm5:2b","messages":[{"role":"user","content":"x"}],"options":{"num_predict":1.5}}`, "whole number"},
		{`{"model":"minicpm5:2b","messages":[{"role":"user","content":"x"}],"keep_alive":"soon"}`, "keep_alive"},
		{`{"model":"minicpm5:2b","messages":[{"role":"user","content":"x","images":["aGk="]}]}`, "images are not supported"},
		{`{"model":"nope","messages":[{"role":"user","content":"x"}]}`, "not found"},
	}
	for _, c := range cases {
		resp, body := do(t, "POST", ts.URL+"/api/chat", c.body)
		var e struct {
			Error string `json:"error"`
		}
		if resp.StatusCode < 400 || json.Unmarshal([]byte(body), &e) != nil || !strings.Contains(e.Error, c.contains) {
			t.Errorf("%s: status %d body %s; want an error containing %q", c.body, resp.StatusCode, body, c.contains)
		}
	}
}

// TestHostAndOriginChecks: the Host must name this server exactly (a
// loopback name, and no port or the one it listens on: issue 38 item 8
// found "127.0.0.1:1.evil.example" accepted); the API's routes take
// requests from pages on any loopback origin, as Ollama's do.
func TestHostAndOriginChecks(t *testing.T) {
	ts := startServer(t, fake.Options{}, web.Options{Origins: []string{"https://tools.example"}}, service.Options{})
	port := portOf(t, ts.URL)
	n, _ := strconv.Atoi(port)
	other := strconv.Itoa(n%60000 + 1)
	cases := []struct {
		name   string
		hdr    []string
		status int
	}{
		{"plain", nil, 200},
		{"localhost host", []string{"Host", "localhost:" + port}, 200},
		{"localhost host, no port", []string{"Host", "localhost"}, 200},
		{"ipv6 loopback host", []string{"Host", "[::1]:" + port}, 200},
		{"another port", []string{"Host", "localhost:" + other}, 403},
		{"port that is a name", []string{"Host", "127.0.0.1:1.evil.example"}, 403},
		{"port after a loopback name, then a name", []string{"Host", "localhost:" + port + ".evil.example"}, 403},
		{"port out of range", []string{"Host", "127.0.0.1:99999"}, 403},
		{"empty host", []string{"Host", ":" + port}, 403},
		{"ipv6 without brackets", []string{"Host", "::1"}, 403},
		{"bracketed name", []string{"Host", "[localhost]:" + port}, 403},
		{"userinfo", []string{"Host", "evil.example@127.0.0.1:" + port}, 403},
		{"rebinding host", []string{"Host", "attacker.example:" + port}, 403},
		{"rebinding host no port", []string{"Host", "attacker.example"}, 403},
		{"loopback origin", []string{"Origin", "http://localhost:3000"}, 200},
		{"same origin", []string{"Origin", ts.URL}, 200},
		{"configured origin", []string{"Origin", "https://tools.example"}, 200},
		{"foreign origin", []string{"Origin", "https://evil.example"}, 403},
		{"null origin", []string{"Origin", "null"}, 403},
		{"file origin", []string{"Origin", "file://"}, 403},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			resp, body := do(t, "GET", ts.URL+"/api/tags", "", c.hdr...)
			if resp.StatusCode != c.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, c.status, body)
			}
		})
	}
	resp, _ := do(t, "OPTIONS", ts.URL+"/v1/chat/completions", "", "Origin", "http://127.0.0.1:5173", "Access-Control-Request-Method", "POST")
	if resp.StatusCode != 204 || resp.Header.Get("Access-Control-Allow-Origin") != "http://127.0.0.1:5173" {
		t.Fatalf("preflight: %d %v", resp.StatusCode, resp.Header)
	}
}

// TestPreflightAllowsThePageAPIsMethods: an allowed origin may use the
// conversation, settings and install routes, whose methods are PATCH,
// PUT and DELETE besides GET and POST.
func TestPreflightAllowsThePageAPIsMethods(t *testing.T) {
	ts := startServer(t, fake.Options{}, web.Options{Origins: []string{"https://tools.example"}}, service.Options{})
	for _, m := range []string{"PATCH", "PUT", "DELETE"} {
		resp, _ := do(t, "OPTIONS", ts.URL+"/api/conversations/1", "", "Origin", "https://tools.example", "Access-Control-Request-Method", m)
		allowed := strings.Split(resp.Header.Get("Access-Control-Allow-Methods"), ", ")
		if resp.StatusCode != 204 || !slices.Contains(allowed, m) {
			t.Errorf("preflight for %s: %d, allowed %q", m, resp.StatusCode, allowed)
		}
	}
}

func TestAPIKey(t *testing.T) {
	ts := startServer(t, fake.Options{}, web.Options{APIKey: "s3cret"}, service.Options{})
	if resp, _ := do(t, "GET", ts.URL+"/v1/models", ""); resp.StatusCode != 401 {
		t.Fatalf("no key: %d", resp.StatusCode)
	}
	if resp, _ := do(t, "GET", ts.URL+"/v1/models", "", "Authorization", "Bearer wrong"); resp.StatusCode != 401 {
		t.Fatalf("wrong key: %d", resp.StatusCode)
	}
	if resp, _ := do(t, "GET", ts.URL+"/v1/models", "", "Authorization", "Bearer s3cret"); resp.StatusCode != 200 {
		t.Fatalf("right key: %d", resp.StatusCode)
	}
	if resp, _ := do(t, "GET", ts.URL+"/", ""); resp.StatusCode != 200 {
		t.Fatalf("the page itself should load without a key: %d", resp.StatusCode)
	}
	// The event stream takes the key in the query (EventSource sends no
	// headers); no other route does.
	if resp, _ := do(t, "GET", ts.URL+"/v1/models?key=s3cret", ""); resp.StatusCode != 401 {
		t.Fatalf("key in the query of another route: %d", resp.StatusCode)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for key, want := range map[string]int{"s3cret": 200, "nope": 401} {
		req, _ := http.NewRequestWithContext(ctx, "GET", ts.URL+"/api/events?key="+key, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Fatalf("events with key %q: %d, want %d", key, resp.StatusCode, want)
		}
	}
}

func TestNonLoopbackNeedsAPIKey(t *testing.T) {
	if _, err := web.NewServer(service.New(service.Options{}), web.Options{Addr: "0.0.0.0:8001"}); err == nil || !strings.Contains(err.Error(), "API key") {
		t.Fatalf("err = %v", err)
	}
	if _, err := web.NewServer(service.New(service.Options{}), web.Options{Addr: "0.0.0.0:8001", APIKey: "k"}); err != nil {
		t.Fatal(err)
	}
}

// readSSE returns the data payloads of an event stream.
func readSSE(t *testing.T, r io.Reader) []string {
	t.Helper()
	var out []string
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			out = append(out, d)
		}
	}
	return out
}

// usageJSON is OpenAI's usage object.
type usageJSON struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

func TestOpenAIStreamFormat(t *testing.T) {
	ts := startServer(t, fake.Options{}, web.Options{}, service.Options{})
	body := `{"model":"minicpm5:2b","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"one two three"}]}`
	resp, err := http.Post(ts.URL+"/v1/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	events := readSSE(t, resp.Body)
	if events[len(events)-1] != "[DONE]" {
		t.Fatalf("stream does not end with [DONE]: %v", events)
	}
	var text strings.Builder
	var finish string
	var usage *usageJSON
	for _, e := range events[:len(events)-1] {
		var c struct {
			Object  string `json:"object"`
			Choices []struct {
				Delta struct {
					Role, Content string
				} `json:"delta"`
				FinishReason *string `json:"finish_reason"`
			} `json:"choices"`
			Usage *usageJSON `json:"usage"`
		}
		if err := json.Unmarshal([]byte(e), &c); err != nil || c.Object != "chat.completion.chunk" {
			t.Fatalf("bad chunk %s: %v", e, err)
		}
		if c.Usage != nil {
			usage = c.Usage
		}
		for _, ch := range c.Choices {
			text.WriteString(ch.Delta.Content)
			if ch.FinishReason != nil {
				finish = *ch.FinishReason
			}
		}
	}
	if text.String() != "echo: one two three" || finish != "stop" {
		t.Fatalf("text %q finish %q", text.String(), finish)
	}
	if usage == nil || usage.PromptTokens != 7 || usage.CompletionTokens != 4 || usage.TotalTokens != 11 {
		t.Fatalf("usage %+v", usage)
	}
}

func TestStopStringsAndMaxTokens(t *testing.T) {
	ts := startServer(t, fake.Options{}, web.Options{}, service.Options{})
	cases := []struct {
		extra, want, finish string
	}{
		{`"stop":"three"`, "echo: one two ", "stop"},
		{`"stop":["wo t","zzz"]`, "echo: one t", "stop"},
		{`"max_tokens":2`, "echo: one ", "length"},
		{`"max_completion_tokens":3,"max_tokens":1`, "echo: one two ", "length"},
	}
	for _, c := range cases {
		for _, stream := range []bool{false, true} {
			body := fmt.Sprintf(`{"model":"minicpm5:2b","stream":%v,"messages":[{"role":"user","content":"one two three four"}],%s}`, stream, c.extra)
			resp, out := do(t, "POST", ts.URL+"/v1/chat/completions", body)
			if resp.StatusCode != 200 {
				t.Fatalf("%s: %d %s", body, resp.StatusCode, out)
			}
			text, finish := "", ""
			if stream {
				for _, e := range readSSE(t, strings.NewReader(out)) {
					if e == "[DONE]" {
						continue
					}
					var ch struct {
						Choices []struct {
							Delta        struct{ Content string } `json:"delta"`
							FinishReason *string                  `json:"finish_reason"`
						} `json:"choices"`
					}
					json.Unmarshal([]byte(e), &ch)
					for _, c := range ch.Choices {
						text += c.Delta.Content
						if c.FinishReason != nil {
							finish = *c.FinishReason
						}
					}
				}
			} else {
				var r struct {
					Choices []struct {
						Message      struct{ Content string } `json:"message"`
						FinishReason string                   `json:"finish_reason"`
					} `json:"choices"`
				}
				json.Unmarshal([]byte(out), &r)
				text, finish = r.Choices[0].Message.Content, r.Choices[0].FinishReason
			}
			if text != c.want || finish != c.finish {
				t.Errorf("%s stream=%v: got %q/%s, want %q/%s", c.extra, stream, text, finish, c.want, c.finish)
			}
		}
	}
}

func TestSamplingParametersReachTheBackend(t *testing.T) {
	ts := startServer(t, fake.Options{}, web.Options{}, service.Options{})
	body := `{"model":"minicpm5:2b","messages":[{"role":"system","content":"be brief"},{"role":"developer","content":"x"},{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}],
	"temperature":0.2,"top_p":0.5,"top_k":7,"min_p":0.1,"seed":42,"repetition_penalty":1.3,"frequency_penalty":0.5,"presence_penalty":-0.5}`
	if resp, out := do(t, "POST", ts.URL+"/v1/chat/completions", body); resp.StatusCode != 200 {
		t.Fatal(out)
	}
	got := ts.Fakes()[0].Requests()[0]
	want := backend.Sampling{Temperature: 0.2, TopP: 0.5, TopK: 7, MinP: 0.1, RepeatPenalty: 1.3, FrequencyPenalty: 0.5, PresencePenalty: -0.5, Seed: 42, HasSeed: true}
	if got.Sampling != want {
		t.Fatalf("sampling %+v, want %+v", got.Sampling, want)
	}
	if len(got.Messages) != 3 || got.Messages[1].Role != "system" || got.Messages[2].Content != "ab" || got.Model != "minicpm5:2b" {
		t.Fatalf("messages %+v", got.Messages)
	}
	// Ollama options map to the same fields.
	body = `{"model":"minicpm5","stream":false,"messages":[{"role":"user","content":"q"}],"options":{"temperature":0.3,"top_k":5,"top_p":0.9,"min_p":0.2,"seed":7,"repeat_penalty":1.1,"num_predict":9,"stop":["x"]}}`
	if resp, out := do(t, "POST", ts.URL+"/api/chat", body); resp.StatusCode != 200 {
		t.Fatal(out)
	}
	got = ts.Fakes()[0].Requests()[1]
	want = backend.Sampling{Temperature: 0.3, TopP: 0.9, TopK: 5, MinP: 0.2, RepeatPenalty: 1.1, Seed: 7, HasSeed: true}
	if got.Sampling != want || got.MaxTokens != 9 || len(got.Stop) != 1 {
		t.Fatalf("ollama request %+v", got)
	}
}

func TestOllamaStreamAndGenerate(t *testing.T) {
	ts := startServer(t, fake.Options{}, web.Options{}, service.Options{})
	resp, out := do(t, "POST", ts.URL+"/api/chat", `{"model":"minicpm5:2b","messages":[{"role":"user","content":"a b"}]}`)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/x-ndjson" {
		t.Fatalf("%d %v", resp.StatusCode, resp.Header)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	var text strings.Builder
	for i, l := range lines {
		var m struct {
			Message struct{ Content string } `json:"message"`
			Done    bool                     `json:"done"`
			Reason  string                   `json:"done_reason"`
			Eval    int                      `json:"eval_count"`
		}
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("line %d: %s", i, l)
		}
		text.WriteString(m.Message.Content)
		if m.Done != (i == len(lines)-1) {
			t.Fatalf("done=%v on line %d of %d", m.Done, i, len(lines))
		}
		if m.Done && (m.Reason != "stop" || m.Eval != 3) {
			t.Fatalf("final line %s", l)
		}
	}
	if text.String() != "echo: a b" {
		t.Fatalf("text %q", text.String())
	}
	// /api/generate, not streamed, with a system prompt.
	resp, out = do(t, "POST", ts.URL+"/api/generate", `{"model":"minicpm5:2b","prompt":"x y","system":"sys","stream":false}`)
	var g struct {
		Response string `json:"response"`
		Done     bool   `json:"done"`
	}
	if resp.StatusCode != 200 || json.Unmarshal([]byte(out), &g) != nil || g.Response != "echo: x y" || !g.Done {
		t.Fatalf("%d %s", resp.StatusCode, out)
	}
	if r := ts.Fakes()[0].Requests()[1]; len(r.Messages) != 2 || r.Messages[0].Role != "system" {
		t.Fatalf("generate request %+v", r)
	}
	// An empty generate with keep_alive 0 unloads.
	resp, out = do(t, "POST", ts.URL+"/api/generate", `{"model":"minicpm5:2b","keep_alive":0}`)
	if resp.StatusCode != 200 || !strings.Contains(out, `"done_reason":"unload"`) || ts.Manager.Status().State != service.StateOff {
		t.Fatalf("unload: %d %s %v", resp.StatusCode, out, ts.Manager.Status().State)
	}
}

func TestModelListsAndShow(t *testing.T) {
	ts := startServer(t, fake.Options{}, web.Options{}, service.Options{})
	_, out := do(t, "GET", ts.URL+"/v1/models", "")
	if !strings.Contains(out, `"id":"minicpm5:2b"`) || !strings.Contains(out, `"object":"list"`) {
		t.Fatal(out)
	}
	if resp, out := do(t, "GET", ts.URL+"/v1/models/minicpm5:2b", ""); resp.StatusCode != 200 || !strings.Contains(out, `"id":"minicpm5:2b"`) {
		t.Fatal(out)
	}
	_, out = do(t, "GET", ts.URL+"/api/tags", "")
	if !strings.Contains(out, `"name":"minicpm5:2b"`) || !strings.Contains(out, `"quantization_level":"Q4_1"`) {
		t.Fatal(out)
	}
	_, out = do(t, "GET", ts.URL+"/api/ps", "")
	if out != "{\"models\":[]}\n" {
		t.Fatalf("ps before load: %s", out)
	}
	do(t, "POST", ts.URL+"/api/generate", `{"model":"minicpm5:2b"}`)
	_, out = do(t, "GET", ts.URL+"/api/ps", "")
	if !strings.Contains(out, `"name":"minicpm5:2b"`) || !strings.Contains(out, "expires_at") {
		t.Fatalf("ps after load: %s", out)
	}
	resp, out := do(t, "POST", ts.URL+"/api/show", `{"model":"MiniCPM5-2B-NPU2"}`)
	if resp.StatusCode != 200 || !strings.Contains(out, `"parameter_size":"2B"`) || !strings.Contains(out, "llama.context_length") {
		t.Fatalf("show: %s", out)
	}
	_, out = do(t, "GET", ts.URL+"/api/version", "")
	if out != "{\"version\":\"test\"}\n" {
		t.Fatal(out)
	}
}

func TestControlAPIAndEvents(t *testing.T) {
	ts := startServer(t, fake.Options{LoadDelay: 40 * time.Millisecond}, web.Options{}, service.Options{})
	req, _ := http.NewRequest("GET", ts.URL+"/api/events", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if r, out := do(t, "POST", ts.URL+"/api/model/start", `{"model":"minicpm5:2b"}`); r.StatusCode != 202 {
		t.Fatal(out)
	}
	sc := bufio.NewScanner(resp.Body)
	var seen []string
	for sc.Scan() && !strings.Contains(strings.Join(seen, " "), `"state":"on"`) {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			seen = append(seen, d)
		}
	}
	all := strings.Join(seen, "\n")
	for _, want := range []string{`"type":"status"`, `"state":"loading"`, `"type":"progress"`, `"state":"on"`} {
		if !strings.Contains(all, want) {
			t.Fatalf("events lack %s:\n%s", want, all)
		}
	}
	_, out := do(t, "GET", ts.URL+"/api/status", "")
	if !strings.Contains(out, `"state":"on"`) || !strings.Contains(out, `"version":"test"`) {
		t.Fatal(out)
	}
	if r, out := do(t, "POST", ts.URL+"/api/model/stop", ""); r.StatusCode != 200 || !strings.Contains(out, `"state":"off"`) {
		t.Fatal(out)
	}
	r, out := do(t, "POST", ts.URL+"/v1/chat/completions", `{"model":"minicpm5:2b","messages":[{"role":"user","content":"x"}]}`)
	if r.StatusCode != 503 || !strings.Contains(out, "switched off") {
		t.Fatalf("request while off: %d %s", r.StatusCode, out)
	}
}

func TestClientDisconnectCancelsGeneration(t *testing.T) {
	// After a few tokens each answer holds until its context ends: it
	// can end only by the client's leaving.
	var tokens atomic.Int32
	hold := func(ctx context.Context) error {
		if tokens.Add(1) > 5 {
			<-ctx.Done()
			return ctx.Err()
		}
		return nil
	}
	ts := startServer(t, fake.Options{BeforeToken: hold}, web.Options{}, service.Options{})
	for _, path := range []string{"/v1/chat/completions", "/api/chat"} {
		tokens.Store(0)
		body := `{"model":"minicpm5:2b","stream":true,"messages":[{"role":"user","content":"` + strings.Repeat("w ", 2000) + `"}]}`
		ctx, cancel := context.WithCancel(context.Background())
		req, _ := http.NewRequestWithContext(ctx, "POST", ts.URL+path, strings.NewReader(body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		br := bufio.NewReader(resp.Body)
		for i := 0; i < 3; i++ { // a few tokens arrive
			if _, err := br.ReadString('\n'); err != nil {
				t.Fatal(err)
			}
		}
		before := ts.Manager.Status().Stats.CompletionTokens
		cancel()
		resp.Body.Close()
		waitUntil(t, path+"'s generation to end after the client left", func() bool { return ts.Manager.Status().Running == 0 })
		if after := ts.Manager.Status().Stats.CompletionTokens; after != before {
			t.Fatalf("a cancelled request was counted as completed")
		}
	}
}

// TestLoad sends 200 concurrent requests through a queue of 8: each gets
// a full answer or a 429 with Retry-After; none hangs; goroutines and
// memory return to where they were.
func TestLoad(t *testing.T) {
	ts := startServer(t, fake.Options{TokenDelay: time.Millisecond}, web.Options{}, service.Options{QueueSize: 8})
	do(t, "POST", ts.URL+"/api/generate", `{"model":"minicpm5:2b"}`) // load
	client := &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 200}}
	baseline := func() (int, uint64) {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return runtime.NumGoroutine(), ms.HeapInuse
	}
	g0, h0 := baseline()
	const n = 200
	var wg sync.WaitGroup
	var mu sync.Mutex
	codes := map[int]int{}
	var bad []string
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			stream := i%2 == 0
			body := fmt.Sprintf(`{"model":"minicpm5:2b","stream":%v,"messages":[{"role":"user","content":"request %d a b c d e f"}]}`, stream, i)
			resp, err := client.Post(ts.URL+"/v1/chat/completions", "application/json", strings.NewReader(body))
			if err != nil {
				mu.Lock()
				bad = append(bad, err.Error())
				mu.Unlock()
				return
			}
			out, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			mu.Lock()
			defer mu.Unlock()
			codes[resp.StatusCode]++
			switch {
			case resp.StatusCode == 429 && resp.Header.Get("Retry-After") == "":
				bad = append(bad, "429 without Retry-After")
			case resp.StatusCode == 200 && !strings.Contains(strings.ReplaceAll(string(out), `"},"finish_reason"`, ""), fmt.Sprintf("request %d", i)) && !stream:
				bad = append(bad, "incomplete answer: "+string(out))
			case resp.StatusCode == 200 && stream && !strings.HasSuffix(string(out), "data: [DONE]\n\n"):
				bad = append(bad, "stream without [DONE]")
			case resp.StatusCode != 200 && resp.StatusCode != 429:
				bad = append(bad, fmt.Sprintf("status %d: %s", resp.StatusCode, out))
			}
		}(i)
	}
	wg.Wait()
	if len(bad) > 0 {
		t.Fatalf("%d bad answers, first: %s", len(bad), bad[0])
	}
	if codes[200] < 9 || codes[200]+codes[429] != n {
		t.Fatalf("codes %v", codes)
	}
	t.Logf("200 requests through a queue of 8: %v", codes)
	client.CloseIdleConnections()
	var g1 int
	var h1 uint64
	waitUntil(t, fmt.Sprintf("the goroutines to come back to %d+2 after the load", g0), func() bool {
		g1, h1 = baseline()
		return g1 <= g0+2
	})
	if h1 > h0+8<<20 {
		t.Fatalf("heap in use %d MB after the load, %d MB before", h1>>20, h0>>20)
	}
	if st := ts.Manager.Status(); st.Running != 0 || st.Waiting != 0 {
		t.Fatalf("status after load %+v", st)
	}
}

func TestCheckRoute(t *testing.T) {
	ts := startServer(t, fake.Options{}, web.Options{}, service.Options{})
	if resp, _ := do(t, "GET", ts.URL+"/api/check", ""); resp.StatusCode != 404 {
		t.Fatalf("without a checker: %d", resp.StatusCode)
	}
	calls := 0
	ts = startServer(t, fake.Options{}, web.Options{CheckNPU: func(ctx context.Context) (any, error) {
		calls++
		return map[string]any{"ready": false, "summary": "No usable NPU"}, nil
	}}, service.Options{})
	resp, out := do(t, "GET", ts.URL+"/api/check", "")
	if resp.StatusCode != 200 || !strings.Contains(out, `"summary":"No usable NPU"`) || calls != 1 {
		t.Fatalf("%d %s (calls %d)", resp.StatusCode, out, calls)
	}
}

func TestServerTimeoutIs504NotAnEmpty200(t *testing.T) {
	ts := startServer(t, fake.Options{}, web.Options{CheckNPU: func(ctx context.Context) (any, error) {
		return nil, fmt.Errorf("xrt probe: %w", context.DeadlineExceeded)
	}}, service.Options{})
	resp, out := do(t, "GET", ts.URL+"/api/check", "")
	if resp.StatusCode != 504 || !strings.Contains(out, "timed out") {
		t.Fatalf("%d %q", resp.StatusCode, out)
	}
}

func TestCrossSiteRequestsWithoutOriginAreRefused(t *testing.T) {
	ts := startServer(t, fake.Options{}, web.Options{}, service.Options{})
	for site, want := range map[string]int{"cross-site": 403, "same-origin": 200, "none": 200, "": 200} {
		resp, _ := do(t, "GET", ts.URL+"/api/status", "", "Sec-Fetch-Site", site)
		if resp.StatusCode != want {
			t.Errorf("Sec-Fetch-Site %q: %d, want %d", site, resp.StatusCode, want)
		}
	}
	// The page itself may be linked from anywhere.
	if resp, _ := do(t, "GET", ts.URL+"/", "", "Sec-Fetch-Site", "cross-site"); resp.StatusCode != 200 {
		t.Fatalf("page: %d", resp.StatusCode)
	}
}

// TestOllamaShowHasTheCLIsKeys: Ollama's CLI type-asserts these.
func TestOllamaShowHasTheCLIsKeys(t *testing.T) {
	ts := startServer(t, fake.Options{}, web.Options{}, service.Options{})
	_, out := do(t, "POST", ts.URL+"/api/show", `{"model":"minicpm5:2b"}`)
	var show struct {
		ModelInfo map[string]any `json:"model_info"`
	}
	if err := json.Unmarshal([]byte(out), &show); err != nil {
		t.Fatal(err)
	}
	arch, ok := show.ModelInfo["general.architecture"].(string)
	if !ok || arch == "" {
		t.Fatalf("model_info %v", show.ModelInfo)
	}
	for _, k := range []string{"general.parameter_count", arch + ".context_length", arch + ".embedding_length"} {
		if _, ok := show.ModelInfo[k].(float64); !ok {
			t.Errorf("model_info[%s] = %v, not a number", k, show.ModelInfo[k])
		}
	}
	if show.ModelInfo["general.parameter_count"] != 2e9 {
		t.Errorf("parameter_count %v", show.ModelInfo["general.parameter_count"])
	}
}

// TestModelListsOnlyInstalled: /v1/models and /api/tags list what can
// answer (installed models), not the catalog's offers, which a client
// that picks the first listed model would otherwise pick and fail with.
func TestModelListsOnlyInstalled(t *testing.T) {
	ts := webtest.Start(t, webtest.Config{Models: []servicetest.Entry{
		{Desc: service.ModelDesc{Name: "qwen3:0.6b", Installed: true, Format: "q4nx"}},
		{Desc: service.ModelDesc{Name: "minicpm5:2b"}},
		{Desc: service.ModelDesc{Name: "llama3.2:1b"}},
		{Desc: service.ModelDesc{Name: "remote-model", Installed: true, Format: "remote"}},
	}})
	for _, tc := range []struct{ path, key string }{{"/v1/models", "id"}, {"/api/tags", "name"}} {
		_, out := do(t, "GET", ts.URL+tc.path, "")
		var list struct {
			Data   []map[string]any `json:"data"`
			Models []map[string]any `json:"models"`
		}
		if err := json.Unmarshal([]byte(out), &list); err != nil {
			t.Fatalf("%s: %v\n%s", tc.path, err, out)
		}
		var names []string
		for _, m := range append(list.Data, list.Models...) {
			names = append(names, fmt.Sprint(m[tc.key]))
		}
		if strings.Join(names, ",") != "qwen3:0.6b,remote-model" {
			t.Errorf("%s lists %v, want the installed qwen3:0.6b and remote-model only", tc.path, names)
		}
	}
}
