package app

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestShowKnowsAModelFileBeforeItLoads (issue 13, item 7): /api/show
// reports a --model folder's family and context length before the
// first request (Ollama's clients size num_ctx from it), and accepts
// LOCALHOST as a loopback address.
func TestShowKnowsAModelFileBeforeItLoads(t *testing.T) {
	a := newApp(t, testEnv(t), Flags{Model: tinyModel(t), Name: "tiny", Engine: "cpu", Addr: "LOCALHOST:0"})
	url := running(t, a, RunOptions{Model: ModelOff})
	code, body := post(t, url+"api/show", `{"model":"tiny"}`)
	var show struct {
		Details struct {
			Family string `json:"family"`
		} `json:"details"`
		ModelInfo map[string]any `json:"model_info"`
	}
	if code != 200 || json.Unmarshal([]byte(body), &show) != nil {
		t.Fatalf("%d %s", code, body)
	}
	fam := show.Details.Family
	if fam == "" || show.ModelInfo["general.architecture"] != fam {
		t.Fatalf("family %q, architecture %v", fam, show.ModelInfo["general.architecture"])
	}
	if n, _ := show.ModelInfo[fam+".context_length"].(float64); n <= 0 {
		t.Fatalf("%s.context_length = %v before the model loaded: %s", fam, show.ModelInfo[fam+".context_length"], body)
	}
}

// TestShutdownCutsAnswersExplicitly (issue 13, item 2): Quit and SIGTERM
// (Run's context ending) cut an answer that would not end within the
// grace with an explicit error, streamed or whole, and a queued request
// gets 503, never an empty 200 or a stream that just stops.
func TestShutdownCutsAnswersExplicitly(t *testing.T) {
	for _, stream := range []bool{true, false} {
		t.Run(fmt.Sprintf("stream=%v", stream), func(t *testing.T) {
			up := endless(t)
			a := newApp(t, testEnv(t), Flags{Engine: "remote", RemoteURL: up.URL + "/v1", Model: "up"})
			ctx, cancel := context.WithCancel(context.Background())
			ready := make(chan string, 1)
			done := make(chan error, 1)
			go func() { done <- a.Run(ctx, RunOptions{Model: ModelOn, Ready: func(u string) { ready <- u }}) }()
			url := <-ready
			type answer struct {
				status int
				body   string
			}
			post := func(body string) chan answer {
				ch := make(chan answer, 1)
				go func() {
					resp, err := http.Post(url+"v1/chat/completions", "application/json", strings.NewReader(body))
					if err != nil {
						ch <- answer{0, err.Error()}
						return
					}
					b, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					ch <- answer{resp.StatusCode, string(b)}
				}()
				return ch
			}
			running := post(fmt.Sprintf(`{"model":"up","stream":%v,"messages":[{"role":"user","content":"go on"}]}`, stream))
			waitUntil(t, "the answer to run", func() bool { return a.Status().Running == 1 })
			queued := post(`{"model":"up","messages":[{"role":"user","content":"me too"}]}`)
			waitUntil(t, "the second to queue", func() bool { return a.Status().Waiting == 1 })
			cancel() // what SIGTERM does
			if err := <-done; err != nil {
				t.Fatalf("Run: %v", err)
			}
			r := <-running
			if stream {
				lines := strings.Split(strings.TrimSpace(r.body), "\n")
				last := lines[len(lines)-1]
				if r.status != 200 || !strings.Contains(r.body, "w0") || strings.Contains(r.body, "[DONE]") || !strings.HasPrefix(last, `data: {"error"`) {
					t.Fatalf("streamed answer: %d, ends %q", r.status, last)
				}
			} else if r.status != 503 || !strings.Contains(r.body, "shutting") {
				t.Fatalf("whole answer: %d %s", r.status, r.body)
			}
			if q := <-queued; q.status != 503 {
				t.Fatalf("queued request: %d %s", q.status, q.body)
			}
		})
	}
}

// waitUntil polls cond for up to 60 s (a failure bound: long, for a
// loaded two-core CI machine; a cond that holds soon costs nothing). It
// is for the service's Running and Waiting counts, whose changes
// publish no event; the sleep only paces the poll.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
