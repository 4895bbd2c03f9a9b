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
