package web_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"runtime/metrics"
	"strings"
	"testing"
	"time"

	"github.com/npuchat/npuchat/enginekind"
	"github.com/npuchat/npuchat/service"
	"github.com/npuchat/npuchat/service/backend"
	"github.com/npuchat/npuchat/service/backend/fake"
	"github.com/npuchat/npuchat/service/servicetest"
	"github.com/npuchat/npuchat/web"
)

// TestUnsupportedFeaturesAreRefused (issue 13, item 8): a client that
// asks for tools, JSON output or logprobs from a backend that cannot do
// them (here the scripted backend, which says it can only complete) gets
// a 400 naming the parameter, not a normal-looking answer that ignored
// it; the defaults that ask for nothing still pass.
func TestUnsupportedFeaturesAreRefused(t *testing.T) {
	ts := startServer(t, fake.Options{}, web.Options{}, service.Options{})
	msgs := `"model":"minicpm5:2b","messages":[{"role":"user","content":"hi"}]`
	tool := `[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}]`
	cases := []struct {
		path, body, param string // param "" means accepted
	}{
		{"/v1/chat/completions", `{` + msgs + `,"tools":` + tool + `}`, "tools"},
		{"/v1/chat/completions", `{` + msgs + `,"tools":` + tool + `,"tool_choice":"required"}`, "tools"},
		{"/v1/chat/completions", `{` + msgs + `,"response_format":{"type":"json_object"}}`, "response_format"},
		{"/v1/chat/completions", `{` + msgs + `,"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{}}}}`, "response_format"},
		{"/v1/chat/completions", `{` + msgs + `,"logprobs":true}`, "logprobs"},
		{"/v1/chat/completions", `{` + msgs + `,"logprobs":true,"top_logprobs":3}`, "logprobs"},
		{"/v1/completions", `{"model":"minicpm5:2b","prompt":"x","logprobs":2}`, "logprobs"},
		{"/api/chat", `{` + msgs + `,"stream":false,"format":"json"}`, "format"},
		{"/api/chat", `{` + msgs + `,"stream":false,"format":{"type":"object"}}`, "format"},
		{"/api/chat", `{` + msgs + `,"stream":false,"tools":` + tool + `}`, "tools"},
		{"/api/generate", `{"model":"minicpm5:2b","prompt":"x","stream":false,"format":"json"}`, "format"},
		// Asking for nothing is fine.
		{"/v1/chat/completions", `{` + msgs + `,"tools":[],"tool_choice":"none","response_format":{"type":"text"},"logprobs":false,"top_logprobs":null}`, ""},
		{"/api/chat", `{` + msgs + `,"stream":false,"format":"","tools":[]}`, ""},
	}
	for _, c := range cases {
		resp, body := do(t, "POST", ts.URL+c.path, c.body)
		if c.param == "" {
			if resp.StatusCode != 200 {
				t.Errorf("%s %s: %d %s", c.path, c.body, resp.StatusCode, body)
			}
			continue
		}
		if resp.StatusCode != 400 || !strings.Contains(body, "not supported") || !strings.Contains(body, c.param) {
			t.Errorf("%s %s: %d %s", c.path, c.body, resp.StatusCode, body)
			continue
		}
		if strings.HasPrefix(c.path, "/v1/") {
			var e struct {
				Error struct{ Param, Code string }
			}
			if json.Unmarshal([]byte(body), &e) != nil || e.Error.Param != c.param || e.Error.Code != "unsupported_parameter" {
				t.Errorf("%s: error object %s", c.body, body)
			}
		}
	}
}

// rawRequest opens a connection and sends raw bytes; the caller reads.
func rawRequest(t *testing.T, url, raw string) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if _, err := io.WriteString(conn, raw); err != nil {
		t.Fatal(err)
	}
	return conn
}

// waitUntil polls cond until it holds; after a minute (a bound on a
// failure, not a measure) it fails saying what was awaited.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(10 * time.Millisecond)
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

// longWords is a reply of n words of 64 KiB: a few of them fill the
// socket buffers of a client that does not read.
func longWords(n int) func(*backend.Request) string {
	word := strings.Repeat("x", 64<<10) + " "
	reply := strings.Repeat(word, n)
	return func(*backend.Request) string { return reply }
}

// TestNonReadingClientIsDropped (issue 13, item 1): a client that stays
// connected but reads nothing loses its answer after the write timeout,
// and the generation slot is free for everyone else.
func TestNonReadingClientIsDropped(t *testing.T) {
	ts := startServer(t, fake.Options{Reply: longWords(600)}, web.Options{WriteTimeout: 300 * time.Millisecond}, service.Options{})
	for _, path := range []string{"/v1/chat/completions", "/api/chat"} {
		body := `{"model":"minicpm5:2b","stream":true,"messages":[{"role":"user","content":"go"}]}`
		rawRequest(t, ts.URL, fmt.Sprintf("POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", path, len(body), body))
		waitUntil(t, "the answer to start", func() bool { return ts.Manager.Status().Running == 1 })
		waitUntil(t, "the stuck answer to be dropped", func() bool { st := ts.Manager.Status(); return st.Running == 0 && st.Waiting == 0 })
	}
	// Everyone else is served; a stop does not wait 30 s.
	start := time.Now()
	if resp, out := do(t, "POST", ts.URL+"/api/model/stop", ""); resp.StatusCode != 200 || time.Since(start) > 2*time.Second {
		t.Fatalf("stop: %d after %v: %s", resp.StatusCode, time.Since(start), out)
	}
}

// TestStalledBodiesAreCut (issue 13, item 3): a body that does not
// arrive in time gets 408 and its connection back; so does one that
// trickles a byte at a time.
func TestStalledBodiesAreCut(t *testing.T) {
	ts := startServer(t, fake.Options{}, web.Options{BodyTimeout: 300 * time.Millisecond}, service.Options{})
	head := "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n"
	silent := rawRequest(t, ts.URL, head+`{"model":`)
	trickle := rawRequest(t, ts.URL, head)
	go func() {
		for i := 0; i < 50; i++ {
			if _, err := trickle.Write([]byte(" ")); err != nil {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
	for name, conn := range map[string]net.Conn{"silent": silent, "trickle": trickle} {
		conn.SetReadDeadline(time.Now().Add(3 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatalf("%s: no answer within 3 s: %v", name, err)
		}
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusRequestTimeout || !strings.Contains(string(b), "did not arrive") {
			t.Fatalf("%s: %d %s", name, resp.StatusCode, b)
		}
	}
	if st := ts.Manager.Status(); st.Waiting != 0 {
		t.Fatalf("stalled bodies still hold %d queue places", st.Waiting)
	}
}

// TestStalledPDFIsCut: a PDF attachment that does not arrive in time
// gets 408, as every body does (it got 400 "did not arrive whole").
func TestStalledPDFIsCut(t *testing.T) {
	ts := startServer(t, fake.Options{}, web.Options{BodyTimeout: 300 * time.Millisecond, APIKey: "k"}, service.Options{})
	conn := rawRequest(t, ts.URL, "POST /api/attachments/pdf HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer k\r\n"+
		"Content-Type: application/pdf\r\nContent-Length: 100\r\n\r\n%PDF-1.4\n")
	conn.SetReadDeadline(time.Now().Add(time.Minute)) // a failure bound only
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusRequestTimeout || !strings.Contains(string(b), "did not arrive within") {
		t.Fatalf("a stalled PDF: %d %s", resp.StatusCode, b)
	}
}

// TestSmallHardeningItems (issue 13, item 7).
func TestSmallHardeningItems(t *testing.T) {
	ts := startServer(t, fake.Options{ContextLength: 20}, web.Options{APIKey: "s3cret", MaxBodyBytes: 1 << 20}, service.Options{})
	auth := func(h string) []string { return []string{"Authorization", h} }
	msgs := `"model":"minicpm5:2b","messages":[{"role":"user","content":"hi"}]`

	t.Run("bearer is case-insensitive", func(t *testing.T) {
		for _, h := range []string{"Bearer s3cret", "bearer s3cret", "BEARER s3cret", "Bearer  s3cret "} {
			if resp, out := do(t, "POST", ts.URL+"/v1/chat/completions", `{`+msgs+`}`, auth(h)...); resp.StatusCode != 200 {
				t.Errorf("%q: %d %s", h, resp.StatusCode, out)
			}
		}
		if resp, _ := do(t, "POST", ts.URL+"/v1/chat/completions", `{`+msgs+`}`, auth("Basic s3cret")...); resp.StatusCode != 401 {
			t.Errorf("Basic scheme accepted: %d", resp.StatusCode)
		}
	})
	t.Run("expect 100-continue with an oversize body gets 413 at once", func(t *testing.T) {
		conn := rawRequest(t, ts.URL, "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer s3cret\r\nContent-Type: application/json\r\nExpect: 100-continue\r\nContent-Length: 10485760\r\n\r\n")
		conn.SetReadDeadline(time.Now().Add(2 * time.Second))
		line, err := bufio.NewReader(conn).ReadString('\n')
		if err != nil || !strings.HasPrefix(line, "HTTP/1.1 413") {
			t.Fatalf("first line %q (%v), want 413", line, err)
		}
	})
	t.Run("malformed chunked body is 400", func(t *testing.T) {
		conn := rawRequest(t, ts.URL, "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer s3cret\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n")
		conn.SetReadDeadline(time.Now().Add(2 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil || resp.StatusCode != 400 {
			t.Fatalf("%v %v", resp, err)
		}
	})
	t.Run("error parameters are the client's names", func(t *testing.T) {
		cases := []struct{ path, body, param, notIn string }{
			{"/v1/chat/completions", `{"model":5,"messages":[]}`, "model", "openAICommon"},
			{"/v1/chat/completions", `{"model":"m","stream":"yes","messages":[]}`, "stream", "openAICommon"},
			{"/v1/chat/completions", `{"model":"m","messages":[{"role":7}]}`, "messages.role", "chatMessage"},
			{"/v1/chat/completions", `[]`, "", "web."},
			{"/v1/completions", `{"model":"minicpm5:2b","prompt":"` + strings.Repeat("w ", 40) + `"}`, "prompt", "messages"},
		}
		for _, c := range cases {
			resp, out := do(t, "POST", ts.URL+c.path, c.body, auth("Bearer s3cret")...)
			var e struct {
				Error struct {
					Message string
					Param   *string
				}
			}
			json.Unmarshal([]byte(out), &e)
			param := ""
			if e.Error.Param != nil {
				param = *e.Error.Param
			}
			if resp.StatusCode != 400 || param != c.param || strings.Contains(out, c.notIn) {
				t.Errorf("%s: %d param %q: %s", c.body, resp.StatusCode, param, out)
			}
		}
	})
}

// TestBlankAPIKeyIsRefused (issue 13, item 7).
func TestBlankAPIKeyIsRefused(t *testing.T) {
	if _, err := web.NewServer(service.New(service.Options{}), web.Options{APIKey: "   "}); err == nil || !strings.Contains(err.Error(), "blank") {
		t.Fatalf("err = %v", err)
	}
}

// bigBody streams a chat request whose content is n bytes of 'x',
// without holding it in memory.
func bigBody(n int) (io.Reader, int64) {
	head := `{"model":"minicpm5:2b","max_tokens":1,"messages":[{"role":"user","content":"`
	tail := `"}]}`
	return io.MultiReader(strings.NewReader(head), io.LimitReader(repeatByte('x'), int64(n)), strings.NewReader(tail)), int64(len(head) + n + len(tail))
}

type repeatByte byte

func (r repeatByte) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(r)
	}
	return len(p), nil
}

// heapPeak samples the live heap every few milliseconds until stop is
// closed and returns the highest value seen.
func heapPeak(stop <-chan struct{}) <-chan uint64 {
	out := make(chan uint64, 1)
	go func() {
		s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
		var peak uint64
		for {
			metrics.Read(s)
			peak = max(peak, s[0].Value.Uint64())
			select {
			case <-stop:
				out <- peak
				return
			case <-time.After(2 * time.Millisecond):
			}
		}
	}()
	return out
}

// TestBigBodiesHoldBoundedMemory (issue 13, item 4): many concurrent
// 8 MB requests while the queue is full are answered 429, and the memory
// their bodies hold stays bounded: what the queue can take (here 1
// running + 4 waiting) and Options.QueuedBodyBytes for bodies still
// arriving (issue 38, item 5: a place is taken only once the body is
// here), the rest read and dropped.
func TestBigBodiesHoldBoundedMemory(t *testing.T) {
	const queue = 4
	endless := strings.Repeat("w ", 100000)
	ts := startServer(t, fake.Options{TokenDelay: 20 * time.Millisecond, Reply: func(*backend.Request) string { return endless }},
		web.Options{}, service.Options{QueueSize: queue})
	// An answer that does not end by itself holds the slot for the whole
	// burst, however slow the machine: it is ended (its client leaves)
	// once every request the queue could not take has been answered.
	holdCtx, endHold := context.WithCancel(context.Background())
	defer endHold()
	hold := make(chan struct{})
	go func() {
		defer close(hold)
		req, _ := http.NewRequestWithContext(holdCtx, "POST", ts.URL+"/v1/chat/completions",
			strings.NewReader(`{"model":"minicpm5:2b","stream":true,"messages":[{"role":"user","content":"hold"}]}`))
		req.Header.Set("Content-Type", "application/json")
		if resp, err := http.DefaultClient.Do(req); err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}()
	waitUntil(t, "the long answer", func() bool { return ts.Manager.Status().Running == 1 })
	runtime.GC()
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	before := s[0].Value.Uint64()
	stop := make(chan struct{})
	peak := heapPeak(stop)

	const clients, size = 40, 8<<20 - 4096
	expect := &http.Client{Transport: &http.Transport{ExpectContinueTimeout: 10 * time.Second}}
	plain := &http.Client{Transport: &http.Transport{}}
	type result struct {
		status int
		err    error
		expect bool
	}
	results := make(chan result, clients)
	for i := 0; i < clients; i++ {
		go func(i int) {
			body, n := bigBody(size)
			req, _ := http.NewRequest("POST", ts.URL+"/v1/chat/completions", body)
			req.ContentLength = n
			req.Header.Set("Content-Type", "application/json")
			c := plain
			if i%2 == 0 {
				req.Header.Set("Expect", "100-continue")
				c = expect
			}
			resp, err := c.Do(req)
			if err != nil {
				results <- result{err: err, expect: i%2 == 0}
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			results <- result{status: resp.StatusCode, expect: i%2 == 0}
		}(i)
	}
	counts := map[int]int{}
	timeout := time.After(120 * time.Second)
	for i := 0; i < clients; i++ {
		if i == clients-queue {
			// At most the queue's places are still waiting, behind the
			// held answer: let them run.
			if st := ts.Manager.Status(); st.Running != 1 {
				t.Errorf("the held answer ended before the burst was answered: %+v", st)
			}
			endHold()
		}
		select {
		case r := <-results:
			switch {
			case r.err == nil:
				counts[r.status]++
			case r.expect:
				t.Errorf("a client that waits for 100 Continue got an error instead of an answer: %v", r.err)
			default:
				// A client that sends its body regardless may see the
				// connection closed after the early 429.
				counts[-1]++
			}
		case <-timeout:
			t.Fatalf("only %d of %d answered within 120 s: %v", i, clients, counts)
		}
	}
	close(stop)
	got := <-peak
	t.Logf("answers %v (-1: closed early); heap %d MB before, peak %d MB", counts, before>>20, got>>20)
	for status, n := range counts {
		if status != 200 && status != 429 && status != -1 {
			t.Errorf("%d answers with status %d", n, status)
		}
	}
	// At most the 4 queue places were answered; every client that waited
	// for 100 Continue and did not get a place was refused with 429.
	if counts[200] > queue || counts[429] < clients/2-queue {
		t.Errorf("while the queue was full: %v", counts)
	}
	// 5 bodies of 8 MB in the queue, each held as bytes and as the
	// decoded string: about 80 MB. Reading every body first held 40.
	if limit := before + 160<<20; got > limit {
		t.Errorf("heap peaked at %d MB (%d MB before): bodies the queue refused were kept", got>>20, before>>20)
	}
	ts.Manager.Stop(context.Background())
	<-hold
}

// TestShutdownEndsAnswersExplicitly (issue 13, item 2): when the server
// shuts down (SIGTERM ends Serve's context), the answers still running
// after the grace, and those still queued, end with an explicit error in
// their own format, never an empty 200 or a stream cut without an end.
func TestShutdownEndsAnswersExplicitly(t *testing.T) {
	long := `"messages":[{"role":"user","content":"` + strings.Repeat("w ", 500) + `"}]`
	shutJSON := func(st int, b string) bool { return st == 503 && strings.Contains(b, "NPU Chat is shutting down") }
	running := []struct {
		name, path, body string
		check            func(status int, body string) bool
	}{
		{"openai whole", "/v1/chat/completions", `{"model":"minicpm5:2b",` + long + `}`, func(st int, b string) bool {
			return st == 503 && strings.Contains(b, `"code":"shutting_down"`)
		}},
		{"openai stream", "/v1/chat/completions", `{"model":"minicpm5:2b","stream":true,` + long + `}`, func(st int, b string) bool {
			ev := readSSE(t, strings.NewReader(b))
			return st == 200 && len(ev) > 1 && strings.Contains(ev[len(ev)-1], `"code":"shutting_down"`) && !strings.Contains(b, "[DONE]")
		}},
		{"ollama stream", "/api/chat", `{"model":"minicpm5:2b",` + long + `}`, func(st int, b string) bool {
			lines := strings.Split(strings.TrimSpace(b), "\n")
			return st == 200 && len(lines) > 1 && strings.HasPrefix(lines[len(lines)-1], `{"error":"NPU Chat is shutting down`)
		}},
		{"ollama whole", "/api/generate", `{"model":"minicpm5:2b","stream":false,"prompt":"` + strings.Repeat("w ", 500) + `"}`, shutJSON},
	}
	queued := []struct{ path, body string }{
		{"/api/generate", `{"model":"minicpm5:2b","stream":false,"prompt":"x"}`},
		{"/v1/chat/completions", `{"model":"minicpm5:2b","stream":true,"messages":[{"role":"user","content":"x"}]}`},
	}
	for _, c := range running {
		t.Run(c.name, func(t *testing.T) {
			reg := &servicetest.Registry{}
			reg.Add(servicetest.Entry{Desc: service.ModelDesc{Name: "minicpm5:2b", Installed: true}})
			mgr := service.New(service.Options{
				Resolve: reg.Resolve, Models: reg.Models, KeepAlive: -1,
				NewBackend: func(_ context.Context, model string, kind enginekind.Kind) (backend.Backend, error) {
					return fake.New(fake.Options{Name: model, Kind: kind, TokenDelay: 30 * time.Millisecond}), nil
				},
			})
			defer mgr.Close(context.Background())
			srv, err := web.NewServer(mgr, web.Options{Addr: "127.0.0.1:0", ShutdownGrace: 300 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			served := make(chan error, 1)
			go func() { served <- srv.Serve(ctx, ln, nil) }()
			url := "http://" + ln.Addr().String()
			type got struct {
				status int
				body   string
			}
			post := func(path, body string) chan got {
				ch := make(chan got, 1)
				go func() {
					resp, err := http.Post(url+path, "application/json", strings.NewReader(body))
					if err != nil {
						ch <- got{0, err.Error()}
						return
					}
					b, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					ch <- got{resp.StatusCode, string(b)}
				}()
				return ch
			}
			first := post(c.path, c.body)
			waitUntil(t, "the answer to run", func() bool { return mgr.Status().Running == 1 })
			var waiting []chan got
			for _, q := range queued {
				waiting = append(waiting, post(q.path, q.body))
			}
			waitUntil(t, "the others to queue", func() bool { return mgr.Status().Waiting == len(queued) })
			start := time.Now()
			cancel() // what SIGTERM does
			if r := <-first; !c.check(r.status, r.body) {
				t.Errorf("running answer: status %d, body ends %q", r.status, tail(r.body, 300))
			}
			for i, ch := range waiting {
				if r := <-ch; !shutJSON(r.status, r.body) {
					t.Errorf("queued %s: status %d, body %q", queued[i].path, r.status, tail(r.body, 300))
				}
			}
			if err := <-served; err != nil {
				t.Fatalf("serve: %v", err)
			}
			if d := time.Since(start); d > 3*time.Second {
				t.Fatalf("shutdown took %v", d)
			}
		})
	}
}

// TestShutdownLetsShortAnswersFinish: an answer that ends within the
// grace is sent whole.
func TestShutdownLetsShortAnswersFinish(t *testing.T) {
	reg := &servicetest.Registry{}
	reg.Add(servicetest.Entry{Desc: service.ModelDesc{Name: "minicpm5:2b", Installed: true}})
	mgr := service.New(service.Options{
		Resolve: reg.Resolve, Models: reg.Models, KeepAlive: -1,
		NewBackend: func(_ context.Context, model string, kind enginekind.Kind) (backend.Backend, error) {
			return fake.New(fake.Options{Name: model, Kind: kind, TokenDelay: 50 * time.Millisecond}), nil
		},
	})
	defer mgr.Close(context.Background())
	srv, _ := web.NewServer(mgr, web.Options{Addr: "127.0.0.1:0", ShutdownGrace: 2 * time.Second})
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, ln, nil) }()
	done := make(chan string, 1)
	go func() {
		resp, err := http.Post("http://"+ln.Addr().String()+"/v1/chat/completions", "application/json",
			strings.NewReader(`{"model":"minicpm5:2b","messages":[{"role":"user","content":"one two three four"}]}`))
		if err != nil {
			done <- err.Error()
			return
		}
		b, _ := io.ReadAll(resp.Body)
		done <- fmt.Sprint(resp.StatusCode, " ", string(b))
	}()
	waitUntil(t, "the answer to run", func() bool { return mgr.Status().Running == 1 })
	cancel()
	if out := <-done; !strings.HasPrefix(out, "200 ") || !strings.Contains(out, `"content":"echo: one two three four"`) {
		t.Fatalf("answer during shutdown: %s", out)
	}
	<-served
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
