package web_test

import (
	"bufio"
	"encoding/json"
	"strings"
	"testing"

	"github.com/npuchat/npuchat/service"
	"github.com/npuchat/npuchat/service/backend"
	"github.com/npuchat/npuchat/service/backend/fake"
	"github.com/npuchat/npuchat/web"
	"github.com/npuchat/npuchat/web/webtest"
)

// toolFake scripts a backend that can call tools, write JSON and report
// log-probabilities: it answers "Checking." and then calls get_weather.
func toolFake() fake.Options {
	return fake.Options{
		Capabilities: []string{backend.CapCompletion, backend.CapTools, backend.CapJSON, backend.CapLogprobs},
		Reply:        func(*backend.Request) string { return "Checking." },
		Calls: func(*backend.Request) []backend.ToolCall {
			return []backend.ToolCall{{ID: "call_abc", Name: "get_weather", Arguments: json.RawMessage(`{"city": "Paris"}`)}}
		},
	}
}

const weatherTools = `[{"type":"function","function":{"name":"get_weather","description":"Weather in a city","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}]`

func lastRequest(t *testing.T, ts *webtest.Server) backend.Request {
	t.Helper()
	for _, f := range ts.Fakes() {
		if r := f.Requests(); len(r) > 0 {
			return r[len(r)-1]
		}
	}
	t.Fatal("no request reached the backend")
	return backend.Request{}
}

func TestOpenAIToolCalls(t *testing.T) {
	ts := startServer(t, toolFake(), web.Options{}, service.Options{})
	body := `{"model":"minicpm5:2b","tools":` + weatherTools + `,"tool_choice":"auto","parallel_tool_calls":false,"messages":[` +
		`{"role":"user","content":"weather?"},` +
		`{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Oslo\"}"}}]},` +
		`{"role":"tool","tool_call_id":"call_1","content":"5 C"},` +
		`{"role":"user","content":"and Paris?"}]}`
	resp, out := do(t, "POST", ts.URL+"/v1/chat/completions", body)
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, out)
	}
	var got struct {
		Choices []struct {
			Message struct {
				Content   *string `json:"content"`
				ToolCalls []struct {
					ID       string `json:"id"`
					Type     string `json:"type"`
					Function struct{ Name, Arguments string }
				} `json:"tool_calls"`
			} `json:"message"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	c := got.Choices[0]
	if c.FinishReason != "tool_calls" || len(c.Message.ToolCalls) != 1 {
		t.Fatalf("answer %s", out)
	}
	tc := c.Message.ToolCalls[0]
	if tc.ID != "call_abc" || tc.Type != "function" || tc.Function.Name != "get_weather" || tc.Function.Arguments != `{"city":"Paris"}` {
		t.Errorf("tool call %+v", tc)
	}
	// The backend got the tools, the choice, and the history's call and result.
	req := lastRequest(t, ts)
	if len(req.Tools) != 1 || req.Tools[0].Name != "get_weather" || !strings.Contains(string(req.Tools[0].Parameters), `"city"`) ||
		req.ToolChoice.Mode != "auto" || req.ParallelToolCalls {
		t.Errorf("backend request tools %+v choice %+v parallel %v", req.Tools, req.ToolChoice, req.ParallelToolCalls)
	}
	m := req.Messages
	if len(m) != 4 || len(m[1].ToolCalls) != 1 || m[1].ToolCalls[0].ID != "call_1" || string(m[1].ToolCalls[0].Arguments) != `{"city":"Oslo"}` ||
		m[2].Role != "tool" || m[2].ToolCallID != "call_1" || m[2].Content != "5 C" {
		t.Errorf("backend messages %+v", m)
	}
}

func TestOpenAIToolCallsStreamed(t *testing.T) {
	ts := startServer(t, toolFake(), web.Options{}, service.Options{})
	resp, out := do(t, "POST", ts.URL+"/v1/chat/completions", `{"model":"minicpm5:2b","stream":true,"tools":`+weatherTools+`,"messages":[{"role":"user","content":"weather?"}]}`)
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, out)
	}
	var text, finish string
	var calls []map[string]any
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok || line == "[DONE]" {
			continue
		}
		var ch struct {
			Choices []struct {
				Delta struct {
					Content   string           `json:"content"`
					ToolCalls []map[string]any `json:"tool_calls"`
				} `json:"delta"`
				FinishReason *string `json:"finish_reason"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(line), &ch); err != nil {
			t.Fatal(err)
		}
		for _, c := range ch.Choices {
			text += c.Delta.Content
			calls = append(calls, c.Delta.ToolCalls...)
			if c.FinishReason != nil {
				finish = *c.FinishReason
			}
		}
	}
	if text != "Checking." || finish != "tool_calls" || len(calls) != 1 {
		t.Fatalf("text %q finish %q calls %v\n%s", text, finish, calls, out)
	}
	fn := calls[0]["function"].(map[string]any)
	if calls[0]["index"] != 0.0 || calls[0]["id"] != "call_abc" || fn["name"] != "get_weather" || fn["arguments"] != `{"city":"Paris"}` {
		t.Errorf("delta %v", calls[0])
	}
	if !strings.HasSuffix(out, "data: [DONE]\n\n") {
		t.Error("no [DONE]")
	}
}

func TestOllamaToolCallsAndFormat(t *testing.T) {
	ts := startServer(t, toolFake(), web.Options{}, service.Options{})
	resp, out := do(t, "POST", ts.URL+"/api/chat", `{"model":"minicpm5:2b","stream":false,"tools":`+weatherTools+`,"messages":[{"role":"user","content":"weather?"},{"role":"tool","tool_name":"get_weather","content":"5 C"}]}`)
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, out)
	}
	var got struct {
		Message struct {
			ToolCalls []struct {
				Function struct {
					Name      string         `json:"name"`
					Arguments map[string]any `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"message"`
		DoneReason string `json:"done_reason"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Message.ToolCalls) != 1 || got.Message.ToolCalls[0].Function.Name != "get_weather" || got.Message.ToolCalls[0].Function.Arguments["city"] != "Paris" || got.DoneReason != "stop" {
		t.Errorf("answer %s", out)
	}
	if m := lastRequest(t, ts).Messages; m[1].Role != "tool" || m[1].Name != "get_weather" {
		t.Errorf("tool message %+v", m[1])
	}
	// Streamed: the call comes in a line of its own.
	_, out = do(t, "POST", ts.URL+"/api/chat", `{"model":"minicpm5:2b","tools":`+weatherTools+`,"messages":[{"role":"user","content":"weather?"}]}`)
	if !strings.Contains(out, `"tool_calls":[{"function":{"index":0,"name":"get_weather","arguments":{"city":"Paris"}}}]`) {
		t.Errorf("stream %s", out)
	}
	// format: "json" and a schema reach the backend.
	do(t, "POST", ts.URL+"/api/generate", `{"model":"minicpm5:2b","prompt":"x","stream":false,"format":"json"}`)
	if f := lastRequest(t, ts).Format; f == nil || f.Type != backend.FormatJSON {
		t.Errorf("format json: %+v", f)
	}
	do(t, "POST", ts.URL+"/api/chat", `{"model":"minicpm5:2b","stream":false,"format":{"type":"object","properties":{"a":{"type":"integer"}}},"messages":[{"role":"user","content":"x"}]}`)
	if f := lastRequest(t, ts).Format; f == nil || f.Type != backend.FormatSchema || !strings.Contains(string(f.Schema), `"a"`) {
		t.Errorf("format schema: %+v", f)
	}
	// /api/show lists what the loaded backend can do.
	_, out = do(t, "POST", ts.URL+"/api/show", `{"model":"minicpm5:2b"}`)
	if !strings.Contains(out, `"capabilities":["completion","tools","json","logprobs"]`) {
		t.Errorf("show %s", out)
	}
}

func TestResponseFormatParsing(t *testing.T) {
	ts := startServer(t, toolFake(), web.Options{}, service.Options{})
	msgs := `"model":"minicpm5:2b","messages":[{"role":"user","content":"hi"}]`
	do(t, "POST", ts.URL+"/v1/chat/completions", `{`+msgs+`,"response_format":{"type":"json_schema","json_schema":{"name":"n","strict":true,"schema":{"type":"object"}}}}`)
	if f := lastRequest(t, ts).Format; f == nil || f.Type != backend.FormatSchema || f.Name != "n" || string(f.Schema) != `{"type":"object"}` {
		t.Errorf("json_schema: %+v", f)
	}
	for body, param := range map[string]string{
		`{` + msgs + `,"response_format":{"type":"yaml"}}`:                                                            "response_format.type",
		`{` + msgs + `,"response_format":{"type":"json_schema"}}`:                                                     "response_format.json_schema.schema",
		`{` + msgs + `,"tool_choice":"sometimes","tools":` + weatherTools + `}`:                                       "tool_choice",
		`{` + msgs + `,"tool_choice":{"type":"function","function":{"name":"nope"}},"tools":` + weatherTools + `}`:    "tool_choice",
		`{` + msgs + `,"tools":[{"type":"retrieval"}]}`:                                                               "tools[0]",
		`{` + msgs + `,"logprobs":true,"top_logprobs":21}`:                                                            "top_logprobs",
		`{` + msgs + `,"messages":[{"role":"assistant","tool_calls":[{"function":{"name":"f","arguments":"[1]"}}]}]}`: "messages[0].tool_calls[0].function.arguments",
	} {
		resp, out := do(t, "POST", ts.URL+"/v1/chat/completions", body)
		var e struct{ Error struct{ Param string } }
		json.Unmarshal([]byte(out), &e)
		if resp.StatusCode != 400 || e.Error.Param != param {
			t.Errorf("%s: %d %s, want 400 naming %s", body, resp.StatusCode, out, param)
		}
	}
}

func TestLogprobsInAnswers(t *testing.T) {
	ts := startServer(t, toolFake(), web.Options{}, service.Options{})
	msgs := `"model":"minicpm5:2b","messages":[{"role":"user","content":"hi"}]`
	_, out := do(t, "POST", ts.URL+"/v1/chat/completions", `{`+msgs+`,"logprobs":true,"top_logprobs":2}`)
	if !strings.Contains(out, `"logprobs":{"content":[{"token":"Checking.","logprob":-0.5,"bytes":[67,104,101,99,107,105,110,103,46],"top_logprobs":[{"token":"Checking.","logprob":-0.5,"bytes":[67,104,101,99,107,105,110,103,46]},{"token":"x","logprob":-1.5,"bytes":[120]}]}]}`) {
		t.Errorf("chat logprobs: %s", out)
	}
	_, out = do(t, "POST", ts.URL+"/v1/chat/completions", `{`+msgs+`,"stream":true,"logprobs":true}`)
	if !strings.Contains(out, `"delta":{"content":"Checking."},"logprobs":{"content":[{"token":"Checking.","logprob":-0.5`) {
		t.Errorf("streamed chat logprobs: %s", out)
	}
	_, out = do(t, "POST", ts.URL+"/v1/completions", `{"model":"minicpm5:2b","prompt":"x","logprobs":1}`)
	if !strings.Contains(out, `"logprobs":{"tokens":["Checking."],"token_logprobs":[-0.5],"top_logprobs":[{"Checking.":-0.5}],"text_offset":[0]}`) {
		t.Errorf("completion logprobs: %s", out)
	}
	_, out = do(t, "POST", ts.URL+"/api/generate", `{"model":"minicpm5:2b","prompt":"x","stream":false,"logprobs":true}`)
	if !strings.Contains(out, `"logprobs":[{"token":"Checking.","logprob":-0.5`) {
		t.Errorf("ollama logprobs: %s", out)
	}
	// Not asked: null, as OpenAI sends it.
	_, out = do(t, "POST", ts.URL+"/v1/chat/completions", `{`+msgs+`}`)
	if !strings.Contains(out, `"logprobs":null`) {
		t.Errorf("no logprobs asked: %s", out)
	}
}
