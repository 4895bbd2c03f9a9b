package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/npuchat/npuchat/engine"
	"github.com/npuchat/npuchat/engine/testmodel"
	"github.com/npuchat/npuchat/enginekind"
	"github.com/npuchat/npuchat/history"
	"github.com/npuchat/npuchat/service"
	"github.com/npuchat/npuchat/service/backend"
	"github.com/npuchat/npuchat/service/backend/fake"
	"github.com/npuchat/npuchat/service/cpu"
	"github.com/npuchat/npuchat/web"
	"github.com/npuchat/npuchat/web/webtest"
)

// lockedLog is a log the service writes while a test reads it.
type lockedLog struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (l *lockedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *lockedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// specServer serves a small random model with the in-process engine,
// the server's speculative setting set (off when "", the default), and
// a history; log is the service's log.
func specServer(t *testing.T, setting engine.Speculative) (ts *webtest.Server, log *lockedLog) {
	t.Helper()
	w, err := testmodel.Random(7, testmodel.MiniCPM5Small())
	if err != nil {
		t.Fatal(err)
	}
	h := history.NewHandle(filepath.Join(t.TempDir(), "history.db"), history.Options{})
	t.Cleanup(func() { h.Close() })
	path := filepath.Join(t.TempDir(), "spec.gguf")
	if err := testmodel.WriteGGUF(path, w, testmodel.F32); err != nil {
		t.Fatal(err)
	}
	log = &lockedLog{}
	ts = webtest.Start(t, webtest.Config{
		NewBackend: func(_ context.Context, model string, _ enginekind.Kind) (backend.Backend, error) {
			return cpu.New(cpu.Options{Path: path, Name: model, Threads: 1, Speculative: setting}), nil
		},
		Service: service.Options{KeepAlive: -1, Logger: slog.New(slog.NewTextHandler(log, nil))},
		Web:     web.Options{History: h},
	})
	sessions.Store(strings.TrimPrefix(ts.URL, "http://"), ts.Cookie) // the page's session, for do and stream
	return ts, log
}

// specRepeating is a prompt whose greedy continuation, with random
// weights, settles into repeating what came before: guesses get made.
const specRepeating = "one two three four five six seven one two three four five six seven one two three four five six seven one two three four five six seven one two three four five six seven one two three four five six seven "

// specGot is what an answer says: its text, and the guess counts when
// it has them.
type specGot struct {
	text                string
	counts              bool
	drafted, accepted   int
	rejected, accepted2 int // usage.completion_tokens_details (OpenAI)
	details             bool
	// usage.draft_n and draft_n_accepted (OpenAI)
	usageDrafted, usageAccepted int
}

// openAIFinal is the part of an OpenAI answer or chunk the test reads.
type openAIFinal struct {
	Choices []struct {
		Text    string `json:"text"`
		Message *struct {
			Content string `json:"content"`
		} `json:"message"`
		Delta *struct {
			Content string `json:"content"`
		} `json:"delta"`
	} `json:"choices"`
	Usage *struct {
		DraftN         *int `json:"draft_n"`
		DraftNAccepted *int `json:"draft_n_accepted"`
		Details        *struct {
			Accepted int `json:"accepted_prediction_tokens"`
			Rejected int `json:"rejected_prediction_tokens"`
		} `json:"completion_tokens_details"`
	} `json:"usage"`
	Timings *struct {
		DraftN         int `json:"draft_n"`
		DraftNAccepted int `json:"draft_n_accepted"`
	} `json:"timings"`
}

func (o openAIFinal) into(t *testing.T, g *specGot) {
	for _, c := range o.Choices {
		g.text += c.Text
		if c.Message != nil {
			g.text += c.Message.Content
		}
		if c.Delta != nil {
			g.text += c.Delta.Content
		}
	}
	if o.Timings != nil {
		if g.counts {
			t.Errorf("timings in more than one chunk")
		}
		g.counts, g.drafted, g.accepted = true, o.Timings.DraftN, o.Timings.DraftNAccepted
	}
	if o.Usage != nil && o.Usage.Details != nil {
		g.details, g.accepted2, g.rejected = true, o.Usage.Details.Accepted, o.Usage.Details.Rejected
		if o.Usage.DraftN == nil || o.Usage.DraftNAccepted == nil {
			t.Errorf("usage has completion_tokens_details but not draft_n and draft_n_accepted")
		} else {
			g.usageDrafted, g.usageAccepted = *o.Usage.DraftN, *o.Usage.DraftNAccepted
		}
	} else if o.Usage != nil && (o.Usage.DraftN != nil || o.Usage.DraftNAccepted != nil) {
		t.Errorf("usage has draft_n but not completion_tokens_details")
	}
}

func openAIWhole(t *testing.T, body string) specGot {
	var g specGot
	decodeInto(t, body, new(openAIFinal)).into(t, &g)
	return g
}

func openAIStreamed(t *testing.T, body string) specGot {
	var g specGot
	for _, d := range readSSE(t, strings.NewReader(body)) {
		if d == "[DONE]" {
			continue
		}
		decodeInto(t, d, new(openAIFinal)).into(t, &g)
	}
	return g
}

// ollamaLine is the part of an Ollama answer or line the test reads.
type ollamaLine struct {
	Response string `json:"response"`
	Message  *struct {
		Content string `json:"content"`
	} `json:"message"`
	Done     bool `json:"done"`
	Drafted  *int `json:"draft_count"`
	Accepted *int `json:"draft_accepted_count"`
}

func ollamaLines(t *testing.T, body string) specGot {
	var g specGot
	for _, line := range strings.Split(strings.TrimSpace(body), "\n") {
		l := decodeInto(t, line, new(ollamaLine))
		g.text += l.Response
		if l.Message != nil {
			g.text += l.Message.Content
		}
		if (l.Drafted != nil || l.Accepted != nil) && !l.Done {
			t.Errorf("counts before the final line: %s", line)
		}
		if l.Drafted != nil {
			g.counts, g.drafted = true, *l.Drafted
		}
		if l.Accepted != nil {
			g.counts, g.accepted = true, *l.Accepted
		}
	}
	return g
}

func decodeInto[T any](t *testing.T, s string, v *T) *T {
	t.Helper()
	if err := json.Unmarshal([]byte(s), v); err != nil {
		t.Fatalf("decode %s: %v", s, err)
	}
	return v
}

// TestSpeculativeThroughTheAPIs (issue 34, items 3 and 4): through the
// real routes and the in-process engine, greedy, a request with
// speculative "auto" gets the same text as one with "off"; its answer
// carries the guess counts (OpenAI's timings and usage draft_n and
// draft_n_accepted and usage.completion_tokens_details, Ollama's
// draft_count and draft_accepted_count, in whole and streamed answers),
// consistent with each other; "off" carries none.
func TestSpeculativeThroughTheAPIs(t *testing.T) {
	ts, log := specServer(t, "")
	msgs := fmt.Sprintf(`[{"role":"user","content":%q}]`, specRepeating)
	cases := []struct {
		name, path string
		body       func(mode string) string // mode is a JSON value
		read       func(*testing.T, string) specGot
		openAI     bool
	}{
		{"openai-chat", "/v1/chat/completions", func(m string) string {
			return `{"model":"minicpm5:2b","temperature":0,"max_tokens":48,"speculative":` + m + `,"messages":` + msgs + `}`
		}, openAIWhole, true},
		{"openai-chat-stream", "/v1/chat/completions", func(m string) string {
			return `{"model":"minicpm5:2b","stream":true,"stream_options":{"include_usage":true},"temperature":0,"max_tokens":48,"speculative":` + m + `,"messages":` + msgs + `}`
		}, openAIStreamed, true},
		{"openai-completions", "/v1/completions", func(m string) string {
			return fmt.Sprintf(`{"model":"minicpm5:2b","temperature":0,"max_tokens":48,"speculative":%s,"prompt":%q}`, m, specRepeating)
		}, openAIWhole, true},
		{"openai-completions-stream", "/v1/completions", func(m string) string {
			return fmt.Sprintf(`{"model":"minicpm5:2b","stream":true,"stream_options":{"include_usage":true},"temperature":0,"max_tokens":48,"speculative":%s,"prompt":%q}`, m, specRepeating)
		}, openAIStreamed, true},
		{"ollama-chat", "/api/chat", func(m string) string {
			return `{"model":"minicpm5:2b","stream":false,"options":{"temperature":0,"num_predict":48,"speculative":` + m + `},"messages":` + msgs + `}`
		}, ollamaLines, false},
		{"ollama-chat-stream", "/api/chat", func(m string) string {
			return `{"model":"minicpm5:2b","options":{"temperature":0,"num_predict":48,"speculative":` + m + `},"messages":` + msgs + `}`
		}, ollamaLines, false},
		{"ollama-generate-stream", "/api/generate", func(m string) string {
			return fmt.Sprintf(`{"model":"minicpm5:2b","raw":true,"options":{"temperature":0,"num_predict":48,"speculative":%s},"prompt":%q}`, m, specRepeating)
		}, ollamaLines, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			run := func(mode string) specGot {
				resp, out := do(t, "POST", ts.URL+c.path, c.body(mode))
				if resp.StatusCode != 200 {
					t.Fatalf("speculative %s: %d %s", mode, resp.StatusCode, out)
				}
				return c.read(t, out)
			}
			plain, spec := run(`"off"`), run(`"auto"`)
			if plain.counts || plain.details {
				t.Errorf("speculative off: the answer has guess counts: %+v", plain)
			}
			if spec.text != plain.text {
				t.Errorf("the text differs:\n auto %q\n off  %q", spec.text, plain.text)
			}
			if plain.text == "" {
				t.Error("empty answer: the test compares nothing")
			}
			if !spec.counts || spec.drafted <= 0 || spec.accepted < 0 || spec.accepted > spec.drafted {
				t.Errorf("speculative auto: counts %+v, want drafted > 0 and 0 <= accepted <= drafted", spec)
			}
			if c.openAI { // every OpenAI case has usage (streams ask for it)
				if !spec.details || spec.accepted2 != spec.accepted || spec.rejected != spec.drafted-spec.accepted ||
					spec.usageDrafted != spec.drafted || spec.usageAccepted != spec.accepted {
					t.Errorf("usage.completion_tokens_details %+v disagrees with timings (drafted %d, accepted %d)", spec, spec.drafted, spec.accepted)
				}
			}
			// false is off, as Ollama's options take booleans
			if b := run("false"); b.counts || b.text != plain.text {
				t.Errorf("speculative false: %+v, want off's text and no counts", b)
			}
		})
	}
	// the model's counters, for /api/ps and the log, grew
	resp, out := do(t, "GET", ts.URL+"/api/ps", "")
	var ps struct {
		Models []struct {
			Drafts *struct {
				Drafted, Accepted int64
				Rate              float64 `json:"accept_rate"`
			} `json:"drafts"`
		} `json:"models"`
	}
	if resp.StatusCode != 200 || json.Unmarshal([]byte(out), &ps) != nil || len(ps.Models) != 1 {
		t.Fatalf("/api/ps: %d %s", resp.StatusCode, out)
	}
	d := ps.Models[0].Drafts
	if d == nil || d.Drafted <= 0 || d.Accepted > d.Drafted || d.Rate != float64(d.Accepted)/float64(d.Drafted) {
		t.Errorf("/api/ps drafts %+v, want the guesses counted: %s", d, out)
	}
	// the log: a line per answer that guessed (auto), with its rate and
	// the model's; none for off
	lines := regexp.MustCompile(`msg="tokens guessed" model=minicpm5:2b backend=cpu drafted=(\d+) accepted=(\d+) rate=\d+% model_rate="\d+% of \d+"`).FindAllString(log.String(), -1)
	if len(lines) != len(cases) {
		t.Errorf("%d 'tokens guessed' lines in the log for %d answers that guessed:\n%s", len(lines), len(cases), log)
	}
}

// TestSpeculativeBadValue: a speculative value that is not auto, off,
// true or false is a 400 naming the field and the values it takes, on
// every API, and the server answers the next request.
func TestSpeculativeBadValue(t *testing.T) {
	ts := webtest.Start(t, webtest.Config{Fake: fake.Options{}})
	for _, c := range []struct{ path, body, param string }{
		{"/v1/chat/completions", `{"model":"minicpm5:2b","speculative":"always","messages":[{"role":"user","content":"hi"}]}`, "speculative"},
		{"/v1/completions", `{"model":"minicpm5:2b","speculative":3,"prompt":"hi"}`, "speculative"},
		{"/v1/responses", `{"model":"minicpm5:2b","speculative":"yes","input":"hi"}`, "speculative"},
		{"/v1/messages", `{"model":"minicpm5:2b","max_tokens":8,"speculative":"on","messages":[{"role":"user","content":"hi"}]}`, "speculative"},
		{"/api/chat", `{"model":"minicpm5:2b","options":{"speculative":"ngram"},"messages":[{"role":"user","content":"hi"}]}`, "options.speculative"},
		{"/api/generate", `{"model":"minicpm5:2b","options":{"speculative":{"x":1}},"prompt":"hi"}`, "options.speculative"},
	} {
		t.Run(c.path, func(t *testing.T) {
			resp, out := do(t, "POST", ts.URL+c.path, c.body)
			if resp.StatusCode != 400 {
				t.Fatalf("%d %s, want 400", resp.StatusCode, out)
			}
			for _, want := range []string{c.param, `"auto"`, `"off"`} {
				if !strings.Contains(out, strings.ReplaceAll(want, `"`, `\"`)) && !strings.Contains(out, want) {
					t.Errorf("the error does not name %s: %s", want, out)
				}
			}
		})
	}
	for _, ok := range []string{`"auto"`, `"off"`, `true`, `false`, `null`} {
		resp, out := do(t, "POST", ts.URL+"/v1/chat/completions", `{"model":"minicpm5:2b","max_tokens":4,"speculative":`+ok+`,"messages":[{"role":"user","content":"hi"}]}`)
		if resp.StatusCode != 200 {
			t.Errorf("speculative %s: %d %s", ok, resp.StatusCode, out)
		}
	}
}

// TestSpeculativeInTheChat: with the server's setting auto, a chat's
// answer to a repeating message stores how many of its tokens were
// guessed (the done event's stats draft_tokens and draft_accepted), and
// the page's answer line says "n of m tokens guessed" beside tok/s;
// with the setting off, neither.
func TestSpeculativeInTheChat(t *testing.T) {
	for _, setting := range []engine.Speculative{engine.SpeculativeAuto, engine.SpeculativeOff} {
		t.Run(string(setting), func(t *testing.T) {
			ts, _ := specServer(t, setting)
			_, body := do(t, "POST", ts.URL+"/api/conversations", `{"temperature": 0, "max_tokens": 48}`)
			conv := decodeJSON[history.Conversation](t, body)
			evs := stream(t, context.Background(), fmt.Sprintf("%s/api/conversations/%d/messages", ts.URL, conv.ID),
				fmt.Sprintf(`{"content": %q}`, specRepeating), nil)
			last := evs[len(evs)-1]
			if last.Name != "done" {
				t.Fatalf("the answer ended with %s: %s", last.Name, last.Data)
			}
			st := decodeJSON[history.Message](t, string(last.Data)).Stats
			_, page := do(t, "GET", fmt.Sprintf("%s/c/%d", ts.URL, conv.ID), "")
			line := fmt.Sprintf("%d of %d tokens guessed", st.DraftAccepted, st.CompletionTokens)
			if setting == engine.SpeculativeOff {
				if st.DraftTokens != 0 || strings.Contains(page, "tokens guessed") {
					t.Errorf("setting off: stats %+v, or the page says tokens were guessed", st)
				}
				return
			}
			if st.DraftTokens <= 0 || st.DraftAccepted > st.DraftTokens || st.DraftAccepted > st.CompletionTokens {
				t.Fatalf("stats %+v, want tokens guessed, 0 <= kept <= guessed", st)
			}
			if !strings.Contains(page, line) {
				t.Errorf("the page does not say %q", line)
			}
		})
	}
}
