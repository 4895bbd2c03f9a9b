package web_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/npuchat/npuchat/service"
	"github.com/npuchat/npuchat/service/backend/fake"
	"github.com/npuchat/npuchat/web"
)

const anthropicTools = `[{"name":"get_weather","description":"Weather in a city","input_schema":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}]`

func TestAnthropicMessages(t *testing.T) {
	ts := startServer(t, toolFake(), web.Options{}, service.Options{})
	body := `{"model":"minicpm5:2b","max_tokens":100,"system":[{"type":"text","text":"Be brief."}],"tools":` + anthropicTools + `,"messages":[` +
		`{"role":"user","content":"weather?"},` +
		`{"role":"assistant","content":[{"type":"text","text":"Let me look."},{"type":"tool_use","id":"toolu_1","name":"get_weather","input":{"city":"Oslo"}}]},` +
		`{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"5 C"},{"type":"text","text":"and Paris?"}]}]}`
	resp, out := do(t, "POST", ts.URL+"/v1/messages", body)
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, out)
	}
	var got struct {
		ID, Type, Role string
		Content        []struct {
			Type, Text, ID, Name string
			Input                map[string]any
		}
		StopReason string `json:"stop_reason"`
		Usage      struct {
			InputTokens  int `json:"input_tokens"`
			OutputTokens int `json:"output_tokens"`
		}
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(got.ID, "msg_") || got.Type != "message" || got.Role != "assistant" || got.StopReason != "tool_use" || got.Usage.OutputTokens == 0 {
		t.Errorf("answer %s", out)
	}
	if len(got.Content) != 2 || got.Content[0].Text != "Checking." || got.Content[1].Type != "tool_use" || got.Content[1].ID != "toolu_abc" ||
		got.Content[1].Name != "get_weather" || got.Content[1].Input["city"] != "Paris" {
		t.Errorf("content %+v", got.Content)
	}
	m := lastRequest(t, ts).Messages
	if len(m) != 5 || m[0].Role != "system" || m[0].Content != "Be brief." || m[2].Content != "Let me look." || len(m[2].ToolCalls) != 1 ||
		m[2].ToolCalls[0].ID != "toolu_1" || m[3].Role != "tool" || m[3].ToolCallID != "toolu_1" || m[3].Content != "5 C" || m[4].Content != "and Paris?" {
		t.Errorf("backend messages %+v", m)
	}
}

func TestAnthropicStream(t *testing.T) {
	ts := startServer(t, toolFake(), web.Options{}, service.Options{})
	resp, out := do(t, "POST", ts.URL+"/v1/messages", `{"model":"minicpm5:2b","max_tokens":50,"stream":true,"tools":`+anthropicTools+`,"messages":[{"role":"user","content":"weather?"}]}`)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("%d %s", resp.StatusCode, out)
	}
	var events []string
	for _, line := range strings.Split(out, "\n") {
		if name, ok := strings.CutPrefix(line, "event: "); ok {
			events = append(events, name)
		}
	}
	want := "message_start ping content_block_start content_block_delta content_block_stop content_block_start content_block_delta content_block_stop message_delta message_stop"
	if strings.Join(events, " ") != want {
		t.Errorf("events %v\nwant %s\n%s", events, want, out)
	}
	for _, s := range []string{`"delta":{"type":"text_delta","text":"Checking."}`, `"content_block":{"type":"tool_use","id":"toolu_abc","name":"get_weather","input":{}}`,
		`"delta":{"type":"input_json_delta","partial_json":"{\"city\":\"Paris\"}"}`, `"stop_reason":"tool_use"`} {
		if !strings.Contains(out, s) {
			t.Errorf("stream lacks %s:\n%s", s, out)
		}
	}
}

func TestAnthropicErrorsAndKey(t *testing.T) {
	ts := startServer(t, toolFake(), web.Options{APIKey: "sekret"}, service.Options{})
	body := `{"model":"minicpm5:2b","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`
	if resp, out := do(t, "POST", ts.URL+"/v1/messages", body, "x-api-key", "sekret"); resp.StatusCode != 200 {
		t.Errorf("x-api-key: %d %s", resp.StatusCode, out)
	}
	if resp, _ := do(t, "POST", ts.URL+"/v1/messages", body, "Authorization", "Bearer sekret"); resp.StatusCode != 200 {
		t.Errorf("Bearer: %d", resp.StatusCode)
	}
	if resp, _ := do(t, "POST", ts.URL+"/v1/messages", body, "x-api-key", "wrong"); resp.StatusCode != 401 {
		t.Errorf("wrong key: %d", resp.StatusCode)
	}
	for b, want := range map[string]string{
		`{"model":"minicpm5:2b","messages":[{"role":"user","content":"hi"}]}`:                                                                             "max_tokens is required",
		`{"model":"minicpm5:2b","max_tokens":5,"messages":[{"role":"system","content":"hi"}]}`:                                                            "must be user or assistant",
		`{"model":"minicpm5:2b","max_tokens":5,"messages":[{"role":"user","content":[{"type":"image","source":{}}]}]}`:                                    "only text, tool_use and tool_result",
		`{"model":"minicpm5:2b","max_tokens":5,"tool_choice":{"type":"any"},"messages":[{"role":"user","content":"hi"}]}`:                                 "needs \"tools\"",
		`{"model":"minicpm5:2b","max_tokens":5,"tools":[{"type":"web_search_20250305","name":"web_search"}],"messages":[{"role":"user","content":"hi"}]}`: "server tool",
	} {
		resp, out := do(t, "POST", ts.URL+"/v1/messages", b, "x-api-key", "sekret")
		var e struct {
			Type  string
			Error struct{ Type, Message string }
		}
		json.Unmarshal([]byte(out), &e)
		if resp.StatusCode != 400 || e.Type != "error" || e.Error.Type != "invalid_request_error" || !strings.Contains(e.Error.Message, want) {
			t.Errorf("%s: %d %s, want 400 saying %q", b, resp.StatusCode, out, want)
		}
	}
}

// An Anthropic stream's message_start says how many tokens the prompt
// has, as Anthropic's API does (it said 0: the count came only with the
// result), the same count the final message_delta gives.
func TestAnthropicStreamStartCountsThePrompt(t *testing.T) {
	ts := startServer(t, toolFake(), web.Options{}, service.Options{})
	resp, out := do(t, "POST", ts.URL+"/v1/messages", `{"model":"minicpm5:2b","max_tokens":50,"stream":true,"system":"Be brief.","messages":[{"role":"user","content":"what is the weather like in Paris today?"}]}`)
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, out)
	}
	type usage struct {
		InputTokens  *int `json:"input_tokens"`
		OutputTokens int  `json:"output_tokens"`
	}
	var start, end *usage
	for _, line := range strings.Split(out, "\n") {
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			continue
		}
		var ev struct {
			Type    string
			Message struct{ Usage usage }
			Usage   usage
		}
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			t.Fatal(err)
		}
		switch ev.Type {
		case "message_start":
			start = &ev.Message.Usage
		case "message_delta":
			end = &ev.Usage
		}
	}
	req := lastRequest(t, ts)
	want := fake.PromptTokens(&req)
	if start == nil || end == nil || start.InputTokens == nil || end.InputTokens == nil {
		t.Fatalf("no usage in message_start or message_delta:\n%s", out)
	}
	if *start.InputTokens != want || *end.InputTokens != want || want == 0 {
		t.Errorf("input_tokens: message_start %d, message_delta %d; the prompt has %d tokens", *start.InputTokens, *end.InputTokens, want)
	}
}
