package web_test

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/npuchat/npuchat/pdftext/pdftexttest"
	"github.com/npuchat/npuchat/service"
	"github.com/npuchat/npuchat/service/backend/fake"
	"github.com/npuchat/npuchat/web"
)

var soakFor = flag.Duration("soak", 45*time.Second, "how long TestSoak runs (go test ./web -run TestSoak -soak 5m for the long version)")

// TestSoak (issue 13, "Show"; issue 38, PDF attachments): a bounded
// loopback soak that mixes slow readers, clients that read nothing,
// stalled bodies, disconnects, big bodies, start and stop, normal chats,
// and PDF attachments, normal and hostile (soak_pdf_test.go). It ends
// with every normal chat answered in full or refused with 429 or 503,
// every normal PDF's text read, every hostile PDF refused with a clear
// 422 or 413 (or 503 with Retry-After while the readers are busy), the
// heap's peak within what the PDF limits allow, no goroutine or heap
// growth past the bounds stated below, and the service's state what
// /api/status says. `make test` runs it for 45 s; -soak sets the time.
func TestSoak(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the soak test runs in the full suite")
	}
	ts := startServer(t, fake.Options{TokenDelay: 2 * time.Millisecond, NoRecord: true},
		web.Options{WriteTimeout: 500 * time.Millisecond, BodyTimeout: 500 * time.Millisecond},
		service.Options{QueueSize: 8})
	const maxBody = 8 << 20 // web.Options.MaxBodyBytes's default
	hostile := hostilePDFs(t, maxBody)
	// Warm up, then take the baselines.
	if resp, out := do(t, "POST", ts.URL+"/v1/chat/completions", `{"model":"minicpm5:2b","messages":[{"role":"user","content":"warm"}]}`); resp.StatusCode != 200 {
		t.Fatalf("warm-up: %d %s", resp.StatusCode, out)
	}
	http.DefaultTransport.(*http.Transport).CloseIdleConnections()
	runtime.GC()
	baseG := runtime.NumGoroutine()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	baseHeap := ms.HeapAlloc
	baseObjects := heapNow()

	ctx, cancel := context.WithTimeout(context.Background(), *soakFor)
	defer cancel()
	var wg sync.WaitGroup
	var mu sync.Mutex
	counts := map[string]int{}
	count := func(k string) { mu.Lock(); counts[k]++; mu.Unlock() }
	var failures atomic.Int64
	fail := func(format string, args ...any) {
		if failures.Add(1) <= 10 {
			t.Errorf(format, args...)
		}
	}
	worker := func(name string, f func(rng *rand.Rand)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(len(name)), 7))
			for ctx.Err() == nil {
				f(rng)
				count(name)
			}
		}()
	}
	client := &http.Client{Timeout: 20 * time.Second}
	stopPeak := make(chan struct{})
	peakCh := heapPeak(stopPeak)

	// Normal chats: four formats, streamed and whole; the answer is the
	// fake's echo, checked in full.
	for i := 0; i < 4; i++ {
		worker(fmt.Sprintf("chat%d", i), func(rng *rand.Rand) {
			words := make([]string, 1+rng.IntN(30))
			for j := range words {
				words[j] = fmt.Sprintf("w%d", rng.IntN(1000))
			}
			text := strings.Join(words, " ")
			stream := rng.IntN(2) == 0
			ollama := rng.IntN(2) == 0
			path, body := "/v1/chat/completions", fmt.Sprintf(`{"model":"minicpm5:2b","stream":%v,"messages":[{"role":"user","content":%q}]}`, stream, text)
			if ollama {
				path = "/api/chat"
			}
			resp, err := client.Post(ts.URL+path, "application/json", strings.NewReader(body))
			if err != nil {
				fail("normal chat: %v", err)
				return
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			switch resp.StatusCode {
			case 429, 503:
				count(fmt.Sprintf("refused %d", resp.StatusCode))
				sleepCtx(ctx, 50*time.Millisecond) // as a client honouring Retry-After would, briefly
				return
			case 200:
			default:
				fail("normal chat: %d %s", resp.StatusCode, b)
				return
			}
			got, complete := answerText(string(b), stream, ollama)
			if !complete {
				// Stopped mid-answer: the end must say so.
				if strings.Contains(string(b), "switched off") || strings.Contains(string(b), "model_not_available") {
					count("cut by stop, said so")
					return
				}
				fail("normal chat cut without an end: %s", tail(string(b), 300))
				return
			}
			if got != "echo: "+text {
				fail("normal chat answered %q, want %q", got, "echo: "+text)
				return
			}
			count("answered")
		})
	}
	// A slow reader: a long answer read a few bytes at a time.
	worker("slow reader", func(rng *rand.Rand) {
		resp, err := client.Post(ts.URL+"/v1/chat/completions", "application/json",
			strings.NewReader(`{"model":"minicpm5:2b","stream":true,"messages":[{"role":"user","content":"`+strings.Repeat("slow ", 200)+`"}]}`))
		if err != nil {
			return
		}
		buf := make([]byte, 16)
		for i := 0; i < 20 && ctx.Err() == nil; i++ {
			if _, err := resp.Body.Read(buf); err != nil {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		resp.Body.Close()
	})
	// A client that reads nothing at all.
	worker("non-reader", func(rng *rand.Rand) {
		conn, err := net.Dial("tcp", strings.TrimPrefix(ts.URL, "http://"))
		if err != nil {
			return
		}
		body := `{"model":"minicpm5:2b","stream":true,"messages":[{"role":"user","content":"` + strings.Repeat("x", 60000) + " " + strings.Repeat("y ", 100) + `"}]}`
		fmt.Fprintf(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
		sleepCtx(ctx, time.Duration(500+rng.IntN(1500))*time.Millisecond)
		conn.Close()
	})
	// A body that stops arriving.
	worker("stalled body", func(rng *rand.Rand) {
		conn, err := net.Dial("tcp", strings.TrimPrefix(ts.URL, "http://"))
		if err != nil {
			return
		}
		fmt.Fprintf(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"model\":")
		conn.SetReadDeadline(time.Now().Add(3 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			fail("stalled body: no answer in 3 s: %v", err)
		} else if resp.StatusCode != 408 && resp.StatusCode != 429 {
			fail("stalled body: %d", resp.StatusCode)
		}
		conn.Close()
	})
	// Disconnects in the middle of a stream.
	worker("disconnect", func(rng *rand.Rand) {
		rctx, rcancel := context.WithCancel(ctx)
		req, _ := http.NewRequestWithContext(rctx, "POST", ts.URL+"/api/chat",
			strings.NewReader(`{"model":"minicpm5:2b","messages":[{"role":"user","content":"`+strings.Repeat("bye ", 100)+`"}]}`))
		resp, err := client.Do(req)
		if err == nil {
			bufio.NewReader(resp.Body).ReadString('\n')
			rcancel()
			resp.Body.Close()
		}
		rcancel()
	})
	// Big bodies (4 MB).
	worker("big body", func(rng *rand.Rand) {
		body, n := bigBody(4 << 20)
		req, _ := http.NewRequestWithContext(ctx, "POST", ts.URL+"/v1/chat/completions", body)
		req.ContentLength = n
		resp, err := client.Do(req)
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 && resp.StatusCode != 429 && resp.StatusCode != 503 {
				fail("big body: %d", resp.StatusCode)
			}
		}
	})
	// Start and stop.
	worker("start/stop", func(rng *rand.Rand) {
		sleepCtx(ctx, time.Duration(1500+rng.IntN(2000))*time.Millisecond)
		if resp, out := do(t, "POST", ts.URL+"/api/model/stop", ""); resp.StatusCode != 200 {
			fail("stop: %d %s", resp.StatusCode, out)
		}
		sleepCtx(ctx, time.Duration(100+rng.IntN(300))*time.Millisecond)
		if resp, out := do(t, "POST", ts.URL+"/api/model/start", `{"model":"minicpm5:2b"}`); resp.StatusCode != 202 {
			fail("start: %d %s", resp.StatusCode, out)
		}
	})
	// PDF attachments (issue 38): normal ones read, hostile ones (a zip
	// bomb, a page tree naming itself, a file cut short, a body too
	// large) refused, all while the heap stays within what the limits
	// allow.
	pdfs := &pdfSoak{url: ts.URL, cookie: ts.Cookie, client: client, hostile: hostile, fail: fail, count: count}
	// Paced as people attach files (a few a second in all), so that
	// reading them, a core each, leaves the chats their share.
	worker("pdf normal", func(rng *rand.Rand) { pdfs.normal(ctx, rng); sleepCtx(ctx, pdfPause(rng)) })
	worker("pdf hostile", func(rng *rand.Rand) { pdfs.hostileOne(ctx, rng); sleepCtx(ctx, pdfPause(rng)) })
	worker("pdf hostile b", func(rng *rand.Rand) { pdfs.hostileOne(ctx, rng); sleepCtx(ctx, pdfPause(rng)) })
	wg.Wait()
	close(stopPeak)
	peak := <-peakCh
	t.Logf("soak %v: %v", *soakFor, counts)
	if counts["answered"] == 0 {
		t.Fatal("no normal chat was answered")
	}
	// The heap's peak: the baseline, the PDFs' bound, and the 64 MB the
	// rest of the soak may hold (below), twice over for garbage not yet
	// collected (GOGC=100). The bound is far below what the zip bomb
	// decodes to, so a server that held it fails here.
	heapBound := baseObjects + 2*(pdfHeapBound(maxBody)+64<<20)
	t.Logf("PDFs: %d requests, %d normal read, %d hostile refused, %d busy; heap %d MB at start, %d MB at most (bound %d MB)",
		counts["pdf requests"], counts["pdf normal read"], counts["pdf hostile refused"],
		counts["pdf normal busy (503)"]+counts["pdf hostile busy (503)"], baseObjects>>20, peak>>20, heapBound>>20)
	if heapBound >= bombMiB<<20 {
		t.Fatalf("the heap bound, %d MB, would not catch a server that holds the zip bomb's %d MB", heapBound>>20, bombMiB)
	}
	if counts["pdf normal read"] == 0 || counts["pdf hostile refused"] == 0 {
		t.Errorf("PDFs: %d normal read, %d hostile refused; want some of each", counts["pdf normal read"], counts["pdf hostile refused"])
	}
	if peak > heapBound {
		t.Errorf("the heap reached %d MB, more than the %d MB the limits allow", peak>>20, heapBound>>20)
	}

	// Quiet again: nothing runs or waits, and the status agrees.
	waitUntil(t, "the queue to empty", func() bool { st := ts.Manager.Status(); return st.Running == 0 && st.Waiting == 0 })
	if resp, _ := do(t, "POST", ts.URL+"/api/model/start", `{"model":"minicpm5:2b"}`); resp.StatusCode != 202 {
		t.Fatalf("start after the soak: %d", resp.StatusCode)
	}
	waitUntil(t, "the model on", func() bool { return ts.Manager.Status().State == service.StateOn })
	resp, out := do(t, "GET", ts.URL+"/api/status", "")
	var st service.Status
	if err := json.Unmarshal([]byte(out), &st); err != nil || resp.StatusCode != 200 {
		t.Fatalf("status: %d %s", resp.StatusCode, out)
	}
	if mgr := ts.Manager.Status(); st.State != mgr.State || st.Enabled != mgr.Enabled || !st.Enabled || st.Running != 0 || st.Waiting != 0 {
		t.Fatalf("/api/status %+v disagrees with the service %+v", st, mgr)
	}
	if resp, out := do(t, "POST", ts.URL+"/v1/chat/completions", `{"model":"minicpm5:2b","messages":[{"role":"user","content":"after"}]}`); resp.StatusCode != 200 || !strings.Contains(out, "echo: after") {
		t.Fatalf("chat after the soak: %d %s", resp.StatusCode, out)
	}
	after := pdftexttest.PDF([][]string{{"read after the soak"}})
	if resp, out, err := postPDF(context.Background(), client, ts.URL, ts.Cookie, after); err != nil || resp.StatusCode != 200 || !strings.Contains(out, "read after the soak") {
		t.Fatalf("a PDF after the soak: %v %v %s", err, resp, out)
	}

	// No growth: goroutines back near the baseline once connections
	// close (bound: 20 more), the heap within 64 MB of it.
	http.DefaultTransport.(*http.Transport).CloseIdleConnections()
	client.CloseIdleConnections()
	var g int
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for deadline := time.After(time.Minute); ; { // a bound on a failure, not a measure
		runtime.GC()
		if g = runtime.NumGoroutine(); g <= baseG+20 {
			break
		}
		select {
		case <-tick.C:
			continue
		case <-deadline:
		}
		break
	}
	runtime.ReadMemStats(&ms)
	t.Logf("goroutines %d -> %d; heap %d MB -> %d MB", baseG, g, baseHeap>>20, ms.HeapAlloc>>20)
	if g > baseG+20 {
		buf := make([]byte, 1<<20)
		t.Fatalf("goroutines grew from %d to %d:\n%s", baseG, g, buf[:runtime.Stack(buf, true)])
	}
	if ms.HeapAlloc > baseHeap+64<<20 {
		t.Fatalf("heap grew from %d MB to %d MB", baseHeap>>20, ms.HeapAlloc>>20)
	}
}

// answerText extracts the text of an OpenAI or Ollama answer, whole or
// streamed, and whether it ended as a complete answer does.
func answerText(body string, stream, ollama bool) (string, bool) {
	var sb strings.Builder
	switch {
	case !stream && !ollama:
		var c struct {
			Choices []struct {
				Message struct{ Content string } `json:"message"`
			} `json:"choices"`
		}
		if json.Unmarshal([]byte(body), &c) != nil || len(c.Choices) != 1 {
			return "", false
		}
		return c.Choices[0].Message.Content, true
	case !stream && ollama:
		var c struct {
			Message struct{ Content string } `json:"message"`
			Done    bool                     `json:"done"`
		}
		if json.Unmarshal([]byte(body), &c) != nil {
			return "", false
		}
		return c.Message.Content, c.Done
	case stream && !ollama:
		done := false
		for _, line := range strings.Split(body, "\n") {
			d, ok := strings.CutPrefix(line, "data: ")
			if !ok {
				continue
			}
			if d == "[DONE]" {
				done = true
				continue
			}
			var c struct {
				Choices []struct {
					Delta struct{ Content string } `json:"delta"`
				} `json:"choices"`
			}
			json.Unmarshal([]byte(d), &c)
			for _, ch := range c.Choices {
				sb.WriteString(ch.Delta.Content)
			}
		}
		return sb.String(), done
	default:
		done := false
		for _, line := range strings.Split(strings.TrimSpace(body), "\n") {
			var c struct {
				Message struct{ Content string } `json:"message"`
				Done    bool                     `json:"done"`
			}
			json.Unmarshal([]byte(line), &c)
			sb.WriteString(c.Message.Content)
			done = done || c.Done
		}
		return sb.String(), done
	}
}

func sleepCtx(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}
