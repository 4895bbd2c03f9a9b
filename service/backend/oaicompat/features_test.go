package oaicompat

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/npuchat/npuchat/service/backend"
)

// Tools, the tool choice, the response format and logprobs go to a
// remote server in OpenAI's wire format, with the history's calls and
// results; streamed tool-call deltas (split over chunks, two calls) come
// back as whole calls, and logprobs with the text they belong to.
func TestFeaturesPassThrough(t *testing.T) {
	srv := newFakeServer(t, serveFile(t, "vllm_tool_calls.sse"), "m")
	c := loaded(t, srv, Options{})
	if caps := strings.Join(c.Info().Capabilities, ","); caps != "completion,tools,json,logprobs" {
		t.Errorf("remote capabilities %s", caps)
	}
	req := &backend.Request{
		Messages: []backend.Message{
			{Role: "user", Content: "weather?"},
			{Role: "assistant", ToolCalls: []backend.ToolCall{{ID: "call_0", Name: "get_weather", Arguments: json.RawMessage(`{"city":"Oslo"}`)}}},
			{Role: "tool", ToolCallID: "call_0", Content: "5 C"},
		},
		Tools:      []backend.Tool{{Name: "get_weather", Raw: json.RawMessage(`{"type":"function","function":{"name":"get_weather","parameters":{"type":"object"}}}`)}},
		ToolChoice: backend.ToolChoice{Mode: backend.ToolFunction, Name: "get_weather"},
		Format:     &backend.Format{Type: backend.FormatSchema, Schema: json.RawMessage(`{"type":"object"}`), Name: "w"},
		Logprobs:   true, TopLogprobs: 1,
	}
	var text strings.Builder
	var calls []backend.ToolCall
	var lps []backend.Logprob
	res, err := c.Generate(context.Background(), req, func(tok backend.Token) error {
		text.WriteString(tok.Text)
		calls = append(calls, tok.ToolCalls...)
		lps = append(lps, tok.Logprobs...)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(srv.lastBody())
	for _, want := range []string{
		`"tools":[{"function":{"name":"get_weather","parameters":{"type":"object"}},"type":"function"}]`,
		`"tool_choice":{"function":{"name":"get_weather"},"type":"function"}`,
		`"response_format":{"json_schema":{"name":"w","schema":{"type":"object"}},"type":"json_schema"}`,
		`"logprobs":true`, `"top_logprobs":1`,
		`{"content":null,"role":"assistant","tool_calls":[{"function":{"arguments":"{\"city\":\"Oslo\"}","name":"get_weather"},"id":"call_0","type":"function"}]}`,
		`{"content":"5 C","role":"tool","tool_call_id":"call_0"}`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("request lacks %s:\n%s", want, body)
		}
	}
	if text.String() != "Let me " || res.FinishReason != backend.FinishToolCalls || res.CompletionTokens != 9 {
		t.Errorf("text %q, result %+v", text.String(), res)
	}
	if len(calls) != 2 || calls[0].ID != "call_x" || calls[0].Name != "get_weather" || string(calls[0].Arguments) != `{"city": "Paris"}` || calls[1].Name != "get_time" {
		t.Errorf("calls %+v", calls)
	}
	if len(lps) != 2 || lps[0].Token != "Let" || string(lps[1].Bytes) != " me " || len(lps[0].Top) != 1 {
		t.Errorf("logprobs %+v", lps)
	}
}

// A backend built on the client that says it cannot do something (as
// FastFlowLM's does) refuses it before sending anything.
func TestUnsupportedRefusedBeforeSending(t *testing.T) {
	srv := newFakeServer(t, serveFile(t, "vllm_tool_calls.sse"), "m")
	c := loaded(t, srv, Options{Kind: "npu", Info: backend.ModelInfo{Capabilities: []string{backend.CapCompletion}}})
	req := chat("hi")
	req.Format = &backend.Format{Type: backend.FormatJSON}
	_, _, _, err := collect(c, context.Background(), req)
	var ue *backend.UnsupportedError
	if !errors.As(err, &ue) || ue.Param != "response_format" || !errors.Is(err, backend.ErrBadRequest) {
		t.Errorf("err = %v", err)
	}
	if srv.lastBody() != nil {
		t.Error("the request was sent")
	}
}
