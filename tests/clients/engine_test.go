package clients

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ollama/ollama/api"
	"github.com/openai/openai-go/v3"

	"github.com/npuchat/npuchat/engine/testmodel"
	"github.com/npuchat/npuchat/enginekind"
	"github.com/npuchat/npuchat/service"
	"github.com/npuchat/npuchat/service/backend"
	"github.com/npuchat/npuchat/service/cpu"
	"github.com/npuchat/npuchat/web/webtest"
)

// startEngineServer serves a small generated MiniCPM5-shaped model (FLM
// folder, q4nx with the port's replicated KV heads and unit q/k norms)
// with the in-process engine, as minicpm5:2b.
func startEngineServer(t *testing.T) *webtest.Server {
	t.Helper()
	w, err := testmodel.Random(11, testmodel.MiniCPM5Small())
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "MiniCPM5-2B-NPU2")
	if err := testmodel.WriteFLM(dir, w, testmodel.FLMOptions{ReplicateKV: 4, InjectUnitQKNorm: true}); err != nil {
		t.Fatal(err)
	}
	return webtest.Start(t, webtest.Config{
		NewBackend: func(_ context.Context, model string, kind enginekind.Kind) (backend.Backend, error) {
			return cpu.New(cpu.Options{Path: dir, Name: model, Threads: 2, SkipQKNorm: true}), nil
		},
		Service: service.Options{KeepAlive: -1},
	})
}

// TestClientsAgainstTheEngine: the third-party clients against the real
// engine. Greedy decoding is deterministic, so the streamed answer, the
// whole answer and Ollama's answer must be the same text.
func TestClientsAgainstTheEngine(t *testing.T) {
	srv := startEngineServer(t)
	ctx := context.Background()
	c := openaiClient(srv.URL)
	params := openai.ChatCompletionNewParams{
		Model: "minicpm5:2b",
		Messages: []openai.ChatCompletionMessageParamUnion{
			openai.SystemMessage("You are a helpful and concise assistant."),
			openai.UserMessage("What are the three laws of robotics?"),
		},
		MaxTokens:   openai.Int(12),
		Temperature: openai.Float(0),
	}
	whole, err := c.Chat.Completions.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	text := whole.Choices[0].Message.Content
	if whole.Usage.CompletionTokens == 0 || whole.Usage.PromptTokens < 20 || text == "" {
		t.Fatalf("answer %+v", whole)
	}
	stream := c.Chat.Completions.NewStreaming(ctx, params)
	acc := openai.ChatCompletionAccumulator{}
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if got := acc.Choices[0].Message.Content; got != text {
		t.Fatalf("streamed %q, whole %q", got, text)
	}
	var ollamaText strings.Builder
	err = ollamaClient(t, srv.URL).Chat(ctx, &api.ChatRequest{
		Model: "minicpm5:2b",
		Messages: []api.Message{
			{Role: "system", Content: "You are a helpful and concise assistant."},
			{Role: "user", Content: "What are the three laws of robotics?"},
		},
		Options: map[string]any{"temperature": 0, "num_predict": 12},
	}, func(r api.ChatResponse) error {
		ollamaText.WriteString(r.Message.Content)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if ollamaText.String() != text {
		t.Fatalf("ollama %q, openai %q", ollamaText.String(), text)
	}
	if st := srv.Manager.Status(); st.Backend != "cpu" || st.Stats.DecodeTokPerSec <= 0 {
		t.Fatalf("status %+v", st)
	}
}
