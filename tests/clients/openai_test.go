package clients

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/npuchat/npuchat/web"
	"github.com/npuchat/npuchat/web/webtest"
)

func openaiClient(url string, opts ...option.RequestOption) openai.Client {
	return openai.NewClient(append([]option.RequestOption{option.WithBaseURL(url + "/v1"), option.WithAPIKey("none"), option.WithMaxRetries(0)}, opts...)...)
}

func TestOpenAIGoChat(t *testing.T) {
	srv := webtest.Start(t, webtest.Config{})
	c := openaiClient(srv.URL)
	resp, err := c.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model: "minicpm5:2b",
		Messages: []openai.ChatCompletionMessageParamUnion{
			openai.SystemMessage("You are a helpful and concise assistant."),
			openai.UserMessage("What are the three laws of robotics?"),
		},
		MaxTokens:   openai.Int(200),
		Temperature: openai.Float(0.3),
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.Choices[0].Message.Content; got != "echo: What are the three laws of robotics?" {
		t.Fatalf("content %q", got)
	}
	if resp.Choices[0].FinishReason != "stop" || resp.Usage.CompletionTokens != 8 || resp.Usage.TotalTokens != resp.Usage.PromptTokens+8 {
		t.Fatalf("response %+v", resp)
	}
	req := srv.Fakes()[0].Requests()[0]
	if req.MaxTokens != 200 || req.Sampling.Temperature != 0.3 || len(req.Messages) != 2 {
		t.Fatalf("backend saw %+v", req)
	}
}

func TestOpenAIGoStream(t *testing.T) {
	srv := webtest.Start(t, webtest.Config{})
	c := openaiClient(srv.URL)
	stream := c.Chat.Completions.NewStreaming(context.Background(), openai.ChatCompletionNewParams{
		Model:         "minicpm5:2b",
		Messages:      []openai.ChatCompletionMessageParamUnion{openai.UserMessage("stream me please")},
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
		Stop:          openai.ChatCompletionNewParamsStopUnion{OfStringArray: []string{"please"}},
	})
	acc := openai.ChatCompletionAccumulator{}
	chunks := 0
	for stream.Next() {
		acc.AddChunk(stream.Current())
		chunks++
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if got := acc.Choices[0].Message.Content; got != "echo: stream me " {
		t.Fatalf("accumulated %q", got)
	}
	if chunks < 4 || acc.Usage.CompletionTokens == 0 || acc.Choices[0].FinishReason != "stop" {
		t.Fatalf("%d chunks, usage %+v, finish %q", chunks, acc.Usage, acc.Choices[0].FinishReason)
	}
}

func TestOpenAIGoCompletionsAndModels(t *testing.T) {
	srv := webtest.Start(t, webtest.Config{})
	c := openaiClient(srv.URL)
	comp, err := c.Completions.New(context.Background(), openai.CompletionNewParams{
		Model:     "minicpm5:2b",
		Prompt:    openai.CompletionNewParamsPromptUnion{OfString: openai.String("Once upon a time")},
		MaxTokens: openai.Int(3),
	})
	if err != nil {
		t.Fatal(err)
	}
	if comp.Choices[0].Text != "echo: Once upon " || comp.Choices[0].FinishReason != "length" {
		t.Fatalf("completion %+v", comp.Choices[0])
	}
	page, err := c.Models.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Data) != 1 || page.Data[0].ID != "minicpm5:2b" {
		t.Fatalf("models %+v", page.Data)
	}
	m, err := c.Models.Get(context.Background(), "minicpm5:2b")
	if err != nil || m.ID != "minicpm5:2b" {
		t.Fatalf("model %+v %v", m, err)
	}
}

func TestOpenAIGoErrors(t *testing.T) {
	srv := webtest.Start(t, webtest.Config{Web: web.Options{APIKey: "k1"}})
	noKey := openaiClient(srv.URL)
	_, err := noKey.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model: "minicpm5:2b", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("x")},
	})
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusUnauthorized {
		t.Fatalf("wrong key: %v", err)
	}
	c := openaiClient(srv.URL, option.WithAPIKey("k1"))
	_, err = c.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model: "gpt-4o", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("x")},
	})
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusNotFound || apiErr.Code != "model_not_found" {
		t.Fatalf("unknown model: %v", err)
	}
	_, err = c.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model: "minicpm5:2b", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("x")}, Temperature: openai.Float(7),
	})
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadRequest || apiErr.Param != "temperature" {
		t.Fatalf("bad temperature: %v", err)
	}
}
