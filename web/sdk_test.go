package web_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/npuchat/npuchat/service"
	"github.com/npuchat/npuchat/service/backend/fake"
	"github.com/npuchat/npuchat/web"
)

// The points official SDKs tripped on (issue 26), each through its route.

// TestAnthropicStopSequenceIsNamed: text cut at a stop sequence says
// stop_reason "stop_sequence" and names it, whole and in the stream's
// message_delta (it said end_turn and null).
func TestAnthropicStopSequenceIsNamed(t *testing.T) {
	ts := startServer(t, fake.Options{}, web.Options{}, service.Options{})
	body := `"model":"minicpm5:2b","max_tokens":50,"stop_sequences":["nope","<two>"],"messages":[{"role":"user","content":"one <two> three"}]`
	_, out := do(t, "POST", ts.URL+"/v1/messages", `{`+body+`}`)
	var whole struct {
		Content []struct{ Text string }
		Reason  string  `json:"stop_reason"`
		Seq     *string `json:"stop_sequence"`
	}
	if err := json.Unmarshal([]byte(out), &whole); err != nil || whole.Reason != "stop_sequence" || whole.Seq == nil || *whole.Seq != "<two>" ||
		len(whole.Content) != 1 || strings.Contains(whole.Content[0].Text, "two") {
		t.Errorf("whole answer: %s", out)
	}
	_, out = do(t, "POST", ts.URL+"/v1/messages", `{"stream":true,`+body+`}`)
	if !strings.Contains(out, `"delta":{"stop_reason":"stop_sequence","stop_sequence":"<two>"}`) {
		t.Errorf("stream's message_delta does not name the stop sequence:\n%s", out)
	}
	// Without a stop sequence hit, end_turn and null.
	_, out = do(t, "POST", ts.URL+"/v1/messages", `{"model":"minicpm5:2b","max_tokens":50,"stop_sequences":["nope"],"messages":[{"role":"user","content":"hi"}]}`)
	if !strings.Contains(out, `"stop_reason":"end_turn","stop_sequence":null`) {
		t.Errorf("no stop sequence hit: %s", out)
	}
}

// TestResponsesStreamItemsHaveContent: output_item.added carries the
// message with "content": [] (the SDK's responses.stream() threw
// "output.content is not iterable" in finalResponse()), and every event
// has the fields the SDK's types require.
func TestResponsesStreamItemsHaveContent(t *testing.T) {
	ts := startServer(t, fake.Options{}, web.Options{}, service.Options{})
	_, out := do(t, "POST", ts.URL+"/v1/responses", `{"model":"minicpm5:2b","stream":true,"input":"one two"}`)
	seen := 0
	for _, ev := range readSSE(t, strings.NewReader(out)) {
		var e map[string]json.RawMessage
		if err := json.Unmarshal([]byte(ev), &e); err != nil {
			t.Fatalf("event %s: %v", ev, err)
		}
		if _, ok := e["sequence_number"]; !ok {
			t.Errorf("event without sequence_number: %s", ev)
		}
		switch string(e["type"]) {
		case `"response.output_item.added"`:
			var it struct {
				Type    string
				Content *[]any
			}
			json.Unmarshal(e["item"], &it)
			if it.Type == "message" && it.Content == nil {
				t.Errorf("message item without content: %s", ev)
			}
			seen++
		case `"response.output_text.delta"`, `"response.output_text.done"`:
			if string(e["logprobs"]) != "[]" {
				t.Errorf("text event without logprobs: %s", ev)
			}
		}
	}
	if seen != 1 {
		t.Errorf("%d output_item.added events, want 1:\n%s", seen, out)
	}
}
