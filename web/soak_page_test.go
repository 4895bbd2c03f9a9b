package web_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/npuchat/npuchat/config"
	"github.com/npuchat/npuchat/history"
	"github.com/npuchat/npuchat/service"
	"github.com/npuchat/npuchat/service/backend"
	"github.com/npuchat/npuchat/service/backend/fake"
	"github.com/npuchat/npuchat/web"
)

// procStat reads one "Name: value" field of a /proc/self file as a
// number (the first word of the value), or -1.
func procStat(file, name string) int64 {
	b, err := os.ReadFile("/proc/self/" + file)
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, name+":"); ok {
			f := strings.Fields(v)
			if len(f) > 0 {
				n, _ := strconv.ParseInt(f[0], 10, 64)
				return n
			}
		}
	}
	return -1
}

// TestSoakPageRoutes (issue 20, "Show"): for the whole run, chats on the
// page's routes (create, send, regenerate, delete mid-answer, list,
// search, export), the settings (read and saved), the install status and
// the OpenAI API generate side by side, on a history in a real SQLite
// file. It asserts that the process's resident memory stays within
// 300 MB of where it started and that what the process writes to storage
// (/proc/self/io write_bytes: pages dirtied, so sockets do not count)
// stays a small multiple of the answers streamed into the history, and
// logs the figures the README's reliability section quotes. It needs
// /proc (Linux).
func TestSoakPageRoutes(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the soak test runs in the full suite")
	}
	if procStat("status", "VmRSS") < 0 || procStat("io", "write_bytes") < 0 {
		t.Skipf("no /proc/self/status or /proc/self/io on %s: RSS and bytes written cannot be measured", runtime.GOOS)
	}
	dir := t.TempDir()
	h := history.NewHandle(filepath.Join(dir, "history.db"), history.Options{})
	t.Cleanup(func() { h.Close() })
	settings := newTestSettings(&config.Config{SettingsPath: filepath.Join(dir, "settings.json")})
	reply := func(*backend.Request) string { return strings.Repeat("lorem ipsum dolor ", 500) }
	ts := startServer(t, fake.Options{TokenDelay: 100 * time.Microsecond, NoRecord: true, Reply: reply},
		web.Options{History: h, Settings: settings}, service.Options{QueueSize: 8})

	// Half of -soak (the suite runs TestSoak for the other half), at
	// least 20 s: the chats' creation and the settings' saves must not
	// outweigh the answers in the bytes written.
	runFor := max(*soakFor/2, 20*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), runFor)
	defer cancel()
	var wg sync.WaitGroup
	var requests, answerBytes, maxRSS atomic.Int64
	var statusMu sync.Mutex
	statuses := map[int]int{}
	var failures atomic.Int64
	fail := func(format string, args ...any) {
		if failures.Add(1) <= 10 {
			t.Errorf(format, args...)
		}
	}
	client := &http.Client{Timeout: 30 * time.Second}
	call := func(method, path, body string) (int, string) {
		req, _ := http.NewRequestWithContext(ctx, method, ts.URL+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Cookie", ts.Cookie)
		resp, err := client.Do(req)
		requests.Add(1)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	// send streams a message into a chat and returns the answer bytes;
	// cut > 0 stops reading (the client leaves) after that many events.
	send := func(id int64, body string, cut int) (int64, int) {
		req, _ := http.NewRequestWithContext(ctx, "POST", fmt.Sprintf("%s/api/conversations/%d/messages", ts.URL, id), strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Cookie", ts.Cookie)
		resp, err := client.Do(req)
		requests.Add(1)
		if err != nil {
			return 0, 0
		}
		defer resp.Body.Close()
		if resp.StatusCode != 200 {
			return 0, resp.StatusCode
		}
		var n int64
		events := 0
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			line := sc.Text()
			if d, ok := strings.CutPrefix(line, "data: "); ok {
				var v struct{ Text string }
				if json.Unmarshal([]byte(d), &v) == nil {
					n += int64(len(v.Text))
				}
				events++
				if cut > 0 && events >= cut {
					break
				}
			}
		}
		return n, 200
	}
	worker := func(seed uint64, f func(rng *rand.Rand)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, 20))
			for ctx.Err() == nil {
				f(rng)
			}
		}()
	}
	// Chats on the page's routes.
	for i := range 3 {
		worker(uint64(i), func(rng *rand.Rand) {
			st, body := call("POST", "/api/conversations", fmt.Sprintf(`{"title": "soak %d"}`, rng.IntN(1000)))
			if st != 201 {
				if ctx.Err() == nil {
					fail("create: %d %s", st, body)
				}
				return
			}
			var c history.Conversation
			json.Unmarshal([]byte(body), &c)
			for j := range 1 + rng.IntN(3) {
				in := fmt.Sprintf(`{"content": "question %d"}`, j)
				if j > 0 && rng.IntN(4) == 0 {
					in = `{"regenerate": true}`
				}
				cut := 0
				if rng.IntN(10) == 0 {
					cut = 1 + rng.IntN(50)
				}
				n, st := send(c.ID, in, cut)
				answerBytes.Add(n)
				statusMu.Lock()
				statuses[st]++
				statusMu.Unlock()
				if st != 200 && st != 429 && st != 409 && ctx.Err() == nil {
					fail("send: %d", st)
				}
			}
			call("GET", "/api/conversations", "")
			call("GET", "/api/conversations?q=lorem", "")
			call("GET", fmt.Sprintf("/api/conversations/%d/export?format=json", c.ID), "")
			if rng.IntN(2) == 0 {
				if st, body := call("DELETE", fmt.Sprintf("/api/conversations/%d", c.ID), ""); st != 204 && ctx.Err() == nil {
					fail("delete: %d %s", st, body)
				}
			}
		})
	}
	// The settings, read and saved.
	worker(10, func(rng *rand.Rand) {
		call("GET", "/api/settings", "")
		ka := []string{"5m", "10m", "-1"}[rng.IntN(3)]
		if st, body := call("PUT", "/api/settings", `{"keep_alive": "`+ka+`"}`); st != 200 && ctx.Err() == nil {
			fail("settings: %d %s", st, body)
		}
		sleepCtx(ctx, time.Second)
	})
	// The install status and the history's state, as the page polls them.
	worker(11, func(rng *rand.Rand) {
		call("GET", "/api/models/minicpm5:2b/install", "")
		call("GET", "/api/history", "")
		call("GET", "/api/status", "")
		sleepCtx(ctx, 50*time.Millisecond)
	})
	// The OpenAI API beside them.
	worker(12, func(rng *rand.Rand) {
		if st, body := call("POST", "/v1/chat/completions", `{"model": "minicpm5:2b", "messages": [{"role": "user", "content": "hi"}]}`); st != 200 && st != 429 && ctx.Err() == nil {
			fail("chat: %d %s", st, body)
		}
		sleepCtx(ctx, 200*time.Millisecond)
	})
	baseRSS := procStat("status", "VmRSS") << 10
	baseWritten := procStat("io", "write_bytes")
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			if rss := procStat("status", "VmRSS") << 10; rss > maxRSS.Load() {
				maxRSS.Store(rss)
			}
			sleepCtx(ctx, 100*time.Millisecond)
		}
	}()
	wg.Wait()
	written := procStat("io", "write_bytes") - baseWritten
	perByte := float64(written) / float64(max(answerBytes.Load(), 1))
	t.Logf("soak %s: %d requests; RSS %d MB at start, %d MB at most; %d bytes of answers into the history, %d bytes written (%.1f per answer byte)",
		runFor, requests.Load(), baseRSS>>20, maxRSS.Load()>>20, answerBytes.Load(), written, perByte)
	t.Logf("sends by status: %v", statuses)
	if answerBytes.Load() == 0 {
		t.Fatal("no answer streamed into the history")
	}
	if grew := maxRSS.Load() - baseRSS; grew > 300<<20 {
		t.Errorf("RSS grew by %d MB", grew>>20)
	}
	if perByte > 64 {
		t.Errorf("%.1f bytes written per byte of answer", perByte)
	}
}
