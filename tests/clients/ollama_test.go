package clients

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/ollama/ollama/api"

	"github.com/npuchat/npuchat/web/webtest"
)

func ollamaClient(t *testing.T, base string) *api.Client {
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	return api.NewClient(u, http.DefaultClient)
}

func TestOllamaGoChatAndGenerate(t *testing.T) {
	srv := webtest.Start(t, webtest.Config{})
	c := ollamaClient(t, srv.URL)
	var text strings.Builder
	var last api.ChatResponse
	err := c.Chat(context.Background(), &api.ChatRequest{
		Model:    "minicpm5:2b",
		Messages: []api.Message{{Role: "system", Content: "be brief"}, {Role: "user", Content: "why is the sky blue"}},
		Options:  map[string]any{"temperature": 0.1, "num_predict": 50},
	}, func(r api.ChatResponse) error {
		text.WriteString(r.Message.Content)
		last = r
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if text.String() != "echo: why is the sky blue" || !last.Done || last.DoneReason != "stop" || last.EvalCount != 6 {
		t.Fatalf("text %q last %+v", text.String(), last)
	}
	stream := false
	var gen api.GenerateResponse
	err = c.Generate(context.Background(), &api.GenerateRequest{Model: "minicpm5", Prompt: "hello", Stream: &stream}, func(r api.GenerateResponse) error {
		gen = r
		return nil
	})
	if err != nil || gen.Response != "echo: hello" || !gen.Done {
		t.Fatalf("generate %+v %v", gen, err)
	}
}

func TestOllamaGoModelEndpoints(t *testing.T) {
	srv := webtest.Start(t, webtest.Config{})
	c := ollamaClient(t, srv.URL)
	ctx := context.Background()
	list, err := c.List(ctx)
	if err != nil || len(list.Models) != 1 || list.Models[0].Name != "minicpm5:2b" || list.Models[0].Details.QuantizationLevel != "Q4_1" {
		t.Fatalf("list %+v %v", list, err)
	}
	show, err := c.Show(ctx, &api.ShowRequest{Model: "minicpm5:2b"})
	if err != nil || show.Details.ParameterSize != "2B" {
		t.Fatalf("show %+v %v", show, err)
	}
	v, err := c.Version(ctx)
	if err != nil || v == "" {
		t.Fatalf("version %q %v", v, err)
	}
	// Loading with an empty generate shows the model in ps.
	if err := c.Generate(ctx, &api.GenerateRequest{Model: "minicpm5:2b"}, func(api.GenerateResponse) error { return nil }); err != nil {
		t.Fatal(err)
	}
	ps, err := c.ListRunning(ctx)
	if err != nil || len(ps.Models) != 1 || ps.Models[0].Name != "minicpm5:2b" {
		t.Fatalf("ps %+v %v", ps, err)
	}
	err = c.Chat(ctx, &api.ChatRequest{Model: "nope", Messages: []api.Message{{Role: "user", Content: "x"}}}, func(api.ChatResponse) error { return nil })
	if err == nil || !strings.Contains(err.Error(), "not found") {
		t.Fatalf("unknown model: %v", err)
	}
}
