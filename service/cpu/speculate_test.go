package cpu

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/npuchat/npuchat/engine"
	"github.com/npuchat/npuchat/service/backend"
)

// specAnswer is everything a generation gives a client but the tool calls'
// random ids.
type specAnswer struct {
	Text      string
	IDs       []int
	Logprobs  []backend.Logprob
	Calls     []string
	Finish    string
	Stop      string
	Tokens    int
	Drafted   int
	Accepted  int
	Truncated bool
}

func answerOf(t *testing.T, b *Backend, req *backend.Request) specAnswer {
	t.Helper()
	var a specAnswer
	var sb strings.Builder
	res, err := b.Generate(t.Context(), req, func(tok backend.Token) error {
		sb.WriteString(tok.Text)
		if tok.ID >= 0 {
			a.IDs = append(a.IDs, tok.ID)
		}
		a.Logprobs = append(a.Logprobs, tok.Logprobs...)
		for _, c := range tok.ToolCalls {
			a.Calls = append(a.Calls, c.Name+" "+string(c.Arguments))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	a.Text, a.Finish, a.Stop, a.Tokens = sb.String(), res.FinishReason, res.StopSequence, res.CompletionTokens
	a.Drafted, a.Accepted = res.DraftTokens, res.DraftAccepted
	return a
}

// TestSpeculativeAnswersAsPlain: through the backend, a request with
// speculative auto gets plain decoding's answer exactly (text, token
// ids, log-probabilities, tool calls, finish reason): greedy and sampled
// with a seed, with a JSON schema or a tools grammar active, with stop
// strings and log-probabilities, and for the next turn of the chat,
// resumed from the KV cache the guessing session left; the result
// counts the guesses (none when off), and some are kept.
func TestSpeculativeAnswersAsPlain(t *testing.T) {
	b := toolModel(t)
	text := "the cat sat on the mat and the dog sat on the log; the cat sat on the mat and the dog sat on the log; the cat sat"
	schema := `{"type":"object","properties":{"city":{"type":"string","maxLength":12},"days":{"type":"integer"}},"required":["city","days"],"additionalProperties":false}`
	cases := map[string]func() *backend.Request{
		"greedy": func() *backend.Request { r := greedy(text); r.MaxTokens = 80; return r },
		"logprobs": func() *backend.Request {
			r := greedy(text)
			r.MaxTokens, r.Logprobs, r.TopLogprobs = 60, true, 3
			return r
		},
		"stop": func() *backend.Request { r := greedy(text); r.MaxTokens = 80; r.Stop = []string{"STOP"}; return r },
		"sampled": func() *backend.Request {
			r := sampled(3, text)
			r.MaxTokens, r.Sampling.TopK, r.Sampling.TopP = 80, 40, 0.95
			return r
		},
		"schema": func() *backend.Request {
			r := sampled(5, "the weather, as JSON: "+text)
			r.Format = &backend.Format{Type: backend.FormatSchema, Schema: json.RawMessage(schema)}
			return r
		},
		"tools": func() *backend.Request {
			r := sampled(2, "weather in Paris? "+text)
			r.Tools, r.ToolChoice = []backend.Tool{weatherTool}, backend.ToolChoice{Mode: backend.ToolRequired}
			return r
		},
	}
	// a stop string from the middle of the plain answer
	plainGreedy := answerOf(t, b, withScope(cases["greedy"](), "probe", ""))
	if len(plainGreedy.Text) < 20 {
		t.Fatalf("answer too short to test a stop string: %q", plainGreedy.Text)
	}
	stop := plainGreedy.Text[len(plainGreedy.Text)/2:][:4]
	mk := cases["stop"]
	cases["stop"] = func() *backend.Request { r := mk(); r.Stop = []string{stop}; return r }

	var kept int
	for name, mk := range cases {
		t.Run(name, func(t *testing.T) {
			// each mode in a cache scope of its own: the second turn
			// resumes from what its first left
			plain := answerOf(t, b, withScope(mk(), "off-"+name, "off"))
			spec := answerOf(t, b, withScope(mk(), "auto-"+name, "auto"))
			if plain.Drafted != 0 || plain.Accepted != 0 {
				t.Errorf("off guessed: %d drafted, %d kept", plain.Drafted, plain.Accepted)
			}
			kept += spec.Accepted
			t.Logf("%d tokens, %d of %d guesses kept", spec.Tokens, spec.Accepted, spec.Drafted)
			spec.Drafted, spec.Accepted = 0, 0
			if !reflect.DeepEqual(spec, plain) {
				t.Fatalf("speculative specAnswer differs from plain decoding:\n auto %+v\n off  %+v", spec, plain)
			}
			if name == "stop" && plain.Stop != stop {
				t.Errorf("the stop string %q did not end the specAnswer: %+v", stop, plain)
			}
			next := func(scope, mode string) specAnswer {
				r := mk()
				r.Messages = append(r.Messages, backend.Message{Role: "assistant", Content: plain.Text},
					backend.Message{Role: "user", Content: "again: " + text})
				return answerOf(t, b, withScope(r, scope, mode))
			}
			plain2, spec2 := next("off-"+name, "off"), next("auto-"+name, "auto")
			spec2.Drafted, spec2.Accepted = 0, 0
			if !reflect.DeepEqual(spec2, plain2) {
				t.Fatalf("next turn differs:\n auto %+v\n off  %+v", spec2, plain2)
			}
		})
	}
	if kept == 0 {
		t.Error("no guess was kept in any specAnswer: the test checks nothing")
	}
	if _, err := b.Generate(t.Context(), withScope(greedy("x"), "", "always"), func(backend.Token) error { return nil }); err == nil ||
		!strings.Contains(err.Error(), "auto or off") {
		t.Errorf("speculative \"always\": %v", err)
	}
}

func withScope(r *backend.Request, scope, mode string) *backend.Request {
	r.CacheScope, r.Speculative = scope, mode
	return r
}

// TestSpeculativeSetting: the backend's setting decodes requests that
// do not say; a request's own choice wins; DraftCounts sums the
// results' counts.
func TestSpeculativeSetting(t *testing.T) {
	path := models(t)["gguf"]
	text := strings.Repeat("one two three four five six seven ", 6)
	for _, tc := range []struct {
		set   engine.Speculative
		req   string
		guess bool
	}{{"", "", false}, {engine.SpeculativeAuto, "", true}, {engine.SpeculativeAuto, "off", false}, {engine.SpeculativeOff, "auto", true}} {
		t.Run(fmt.Sprintf("%s-%s", tc.set, tc.req), func(t *testing.T) {
			b := load(t, Options{Path: path, Speculative: tc.set})
			var sum specAnswer
			for _, scope := range []string{"a", "b"} {
				r := greedy(text)
				r.MaxTokens = 64
				a := answerOf(t, b, withScope(r, scope, tc.req))
				if (a.Drafted > 0) != tc.guess {
					t.Errorf("setting %q, request %q: %d tokens guessed", tc.set, tc.req, a.Drafted)
				}
				sum.Drafted, sum.Accepted = sum.Drafted+a.Drafted, sum.Accepted+a.Accepted
			}
			if d, a := b.DraftCounts(); d != int64(sum.Drafted) || a != int64(sum.Accepted) {
				t.Errorf("DraftCounts %d, %d; the results say %d, %d", d, a, sum.Drafted, sum.Accepted)
			}
		})
	}
}

// TestSpeculativeBesideOthers: requests answered at once, each guessing
// on its own (speculative auto), get the answers they get alone and
// plain: greedy, with a stop string, sampled within a JSON schema, with
// logprobs.
func TestSpeculativeBesideOthers(t *testing.T) {
	b := toolModel(t)
	text := "red green blue, red green blue, red green blue, red green"
	schema := `{"type":"object","properties":{"city":{"type":"string","maxLength":6},"days":{"type":"integer"}},"required":["city","days"],"additionalProperties":false}`
	g := greedy(text)
	g.MaxTokens = 48
	st := greedy(text)
	st.MaxTokens = 48
	js := sampled(4, "as JSON: "+text)
	js.MaxTokens = 60
	js.Format = &backend.Format{Type: backend.FormatSchema, Schema: json.RawMessage(schema)}
	lp := sampled(8, text)
	lp.MaxTokens, lp.Logprobs, lp.TopLogprobs = 40, true, 2
	reqs := []*backend.Request{g, st, js, lp}
	want := make([]answer, len(reqs))
	for i, r := range reqs {
		r.Speculative = "off"
		if want[i] = generate(t.Context(), b, r, nil); want[i].err != nil {
			t.Fatalf("request %d alone: %v", i, want[i].err)
		}
		if i == 0 {
			st.Stop = []string{want[0].text[len(want[0].text)/2:][:3]}
		}
	}
	if want[1].stop == "" {
		t.Fatalf("the stop string did not stop the answer alone: %+v", want[1])
	}
	b.kv.Clear()
	got := make([]answer, len(reqs))
	drafted := make([]int, len(reqs))
	var wg sync.WaitGroup
	for i, r := range reqs {
		wg.Go(func() {
			rr := *r
			rr.Speculative = "auto"
			var res backend.Result
			got[i] = generate(t.Context(), b, &rr, nil, &res)
			drafted[i] = res.DraftTokens
		})
	}
	wg.Wait()
	var total int
	for i := range reqs {
		g, w := got[i], want[i]
		if g.err != nil || g.text != w.text || g.finish != w.finish || g.stop != w.stop || g.lps != w.lps || fmt.Sprint(g.ids) != fmt.Sprint(w.ids) {
			t.Errorf("request %d guessing beside others: %q (%s %q, %v)\nalone, plain: %q (%s %q)", i, g.text, g.finish, g.stop, g.err, w.text, w.finish, w.stop)
		}
		total += drafted[i]
	}
	if total == 0 {
		t.Error("no request guessed: the test checks nothing")
	}
	if st := b.SchedulerStats(); st.MostSequences < 2 {
		t.Errorf("the requests never ran in one step: %+v", st)
	}
}
