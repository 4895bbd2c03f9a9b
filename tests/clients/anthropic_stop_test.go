package clients

import (
	"context"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	anthropicoption "github.com/anthropics/anthropic-sdk-go/option"

	"github.com/npuchat/npuchat/service/backend/fake"
	"github.com/npuchat/npuchat/web/webtest"
)

// Through Anthropic's Go SDK: an answer cut at a stop sequence says
// stop_reason "stop_sequence" and names it, whole and streamed (it said
// end_turn and null).
func TestAnthropicGoStopSequence(t *testing.T) {
	srv := webtest.Start(t, webtest.Config{Fake: fake.Options{}})
	c := anthropic.NewClient(anthropicoption.WithBaseURL(srv.URL), anthropicoption.WithAPIKey("none"), anthropicoption.WithMaxRetries(0))
	params := anthropic.MessageNewParams{
		Model: anthropic.Model("minicpm5:2b"), MaxTokens: 50, StopSequences: []string{"never", "three"},
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("one two three four"))},
	}
	whole, err := c.Messages.New(context.Background(), params)
	if err != nil {
		t.Fatal(err)
	}
	stream := c.Messages.NewStreaming(context.Background(), params)
	streamed := anthropic.Message{}
	for stream.Next() {
		if err := streamed.Accumulate(stream.Current()); err != nil {
			t.Fatal(err)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	for name, m := range map[string]*anthropic.Message{"whole": whole, "streamed": &streamed} {
		if m.StopReason != anthropic.StopReasonStopSequence || m.StopSequence != "three" {
			t.Errorf("%s: stop_reason %q, stop_sequence %q; want stop_sequence, three", name, m.StopReason, m.StopSequence)
		}
		if len(m.Content) != 1 || m.Content[0].Text != "echo: one two " {
			t.Errorf("%s: content %+v", name, m.Content)
		}
	}
}

// On the engine, through Anthropic's Go SDK: message_start carries the
// prompt's real size (it said input_tokens 0), counted as the final
// message_delta counts it: the second time the same prompt is sent, the
// part read from the KV cache is cache_read_input_tokens, in both.
func TestAnthropicGoMessageStartUsage(t *testing.T) {
	srv := startToolEngine(t)
	c := anthropic.NewClient(anthropicoption.WithBaseURL(srv.URL), anthropicoption.WithAPIKey("none"), anthropicoption.WithMaxRetries(0))
	params := anthropic.MessageNewParams{
		Model: anthropic.Model("minicpm5:2b"), MaxTokens: 4,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("count the tokens of this prompt, please"))},
	}
	for round := range 2 {
		stream := c.Messages.NewStreaming(context.Background(), params)
		var start anthropic.Usage
		var end anthropic.MessageDeltaUsage
		for stream.Next() {
			switch ev := stream.Current(); ev.Type {
			case "message_start":
				start = ev.Message.Usage
			case "message_delta":
				end = ev.Usage
			}
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		if start.InputTokens+start.CacheReadInputTokens < 5 || start.InputTokens != end.InputTokens || start.CacheReadInputTokens != end.CacheReadInputTokens {
			t.Errorf("round %d: message_start input %d, cache read %d; message_delta input %d, cache read %d", round,
				start.InputTokens, start.CacheReadInputTokens, end.InputTokens, end.CacheReadInputTokens)
		}
		if round == 1 && start.CacheReadInputTokens == 0 {
			t.Errorf("round 1: nothing read from the cache (input %d)", start.InputTokens)
		}
		t.Logf("round %d: input_tokens %d, cache_read_input_tokens %d", round, start.InputTokens, start.CacheReadInputTokens)
	}
}
