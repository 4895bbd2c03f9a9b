package chat

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestMessageJSON(t *testing.T) {
	tests := []struct {
		in      string
		want    Message
		wantErr string
	}{
		{in: `{"role":"user","content":"hi"}`, want: Message{Role: "user", Content: "hi"}},
		{in: `{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{\"a\":1}"}}]}`,
			want: Message{Role: "assistant", ToolCalls: []ToolCall{{ID: "c1", Type: "function", Function: FunctionCall{Name: "f", Arguments: json.RawMessage(`"{\"a\":1}"`)}}}}},
		{in: `{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}`, want: Message{Role: "user", Content: "ab"}},
		{in: `{"role":"tool","content":"42","tool_call_id":"c1"}`, want: Message{Role: "tool", Content: "42", ToolCallID: "c1"}},
		{in: `{"role":"assistant","content":"x","reasoning_content":"think"}`, want: Message{Role: "assistant", Content: "x", Reasoning: "think"}},
		{in: `{"role":"user","content":[{"type":"image_url","image_url":{"url":"x"}}]}`, wantErr: `type "image_url"; only text is supported`},
		{in: `{"role":"user","content":5}`, wantErr: "neither a string nor a list"},
	}
	for _, tc := range tests {
		var m Message
		err := json.Unmarshal([]byte(tc.in), &m)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%s: err = %v, want %q", tc.in, err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.in, err)
			continue
		}
		got, _ := json.Marshal(m)
		want, _ := json.Marshal(tc.want)
		if string(got) != string(want) {
			t.Errorf("%s:\n got %s\nwant %s", tc.in, got, want)
		}
	}
}
