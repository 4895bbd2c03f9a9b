package chat

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/ardanlabs/jinja"

	"github.com/npuchat/npuchat/engine/tokenizer"
)

// Message is one turn of a conversation, in the shape of the OpenAI chat
// API (so a request body decodes into it directly).
type Message struct {
	Role    string `json:"role"` // system, user, assistant or tool
	Content string `json:"content"`
	// Reasoning is the assistant's thinking, when the client sends it
	// apart from Content (reasoning_content); templates that support it
	// put it in <think> tags.
	Reasoning  string     `json:"reasoning_content,omitempty"`
	ToolCalls  []ToolCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
	Name       string     `json:"name,omitempty"`
}

// ToolCall is a function call the assistant made.
type ToolCall struct {
	ID       string       `json:"id,omitempty"`
	Type     string       `json:"type,omitempty"` // "function"
	Function FunctionCall `json:"function"`
}

// FunctionCall names the function and its arguments: a JSON object, or a
// JSON string that holds one (as the OpenAI API sends them).
type FunctionCall struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
}

// RenderOptions are the template variables besides the messages.
type RenderOptions struct {
	// AddGenerationPrompt ends the prompt with the start of an assistant
	// turn, for the model to complete.
	AddGenerationPrompt bool
	// EnableThinking, when set, is passed as enable_thinking (Qwen3 and
	// MiniCPM5 templates: false adds an empty <think></think>); nil leaves
	// it undefined, which templates read as their default.
	EnableThinking *bool
	// Tools are the tool definitions, as JSON objects.
	Tools []json.RawMessage
	// BOSToken and EOSToken are the bos_token and eos_token variables.
	BOSToken, EOSToken string
}

// Template is a compiled chat template.
type Template struct {
	src    string
	origin string
	t      *jinja.Template
}

// ChatMLSource is the template used when a model has none: ChatML, the
// format of Qwen and MiniCPM (<|im_start|>role\ncontent<|im_end|>\n).
const ChatMLSource = "{%- for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}{%- endfor %}{%- if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{%- endif %}"

// New compiles a template; origin says where it came from, for messages.
func New(src, origin string) (*Template, error) {
	t, err := jinja.Compile(src)
	if err != nil {
		return nil, fmt.Errorf("chat template %s: %w", origin, err)
	}
	return &Template{src: src, origin: origin, t: t}, nil
}

// ChatML returns the fallback ChatML template.
func ChatML() *Template {
	t, err := New(ChatMLSource, "built-in ChatML")
	if err != nil {
		panic(err) // a constant that compiles: checked by the tests
	}
	return t
}

// LoadTemplate reads the chat template of the model folder dir
// (chat_template.jinja, else tokenizer_config.json's chat_template) and
// returns ChatML when it has none.
func LoadTemplate(dir string) (*Template, error) {
	src, err := tokenizer.ChatTemplateSource(dir)
	if err != nil {
		return nil, err
	}
	if strings.TrimSpace(src) == "" {
		return ChatML(), nil
	}
	return New(src, dir)
}

// Source is the template text.
func (t *Template) Source() string { return t.src }

// Origin says where the template came from (a folder, or built-in ChatML).
func (t *Template) Origin() string { return t.origin }

// Render returns the prompt text for messages.
func (t *Template) Render(messages []Message, opts RenderOptions) (string, error) {
	msgs := make([]jinja.Value, len(messages))
	for i, m := range messages {
		v, err := messageValue(m)
		if err != nil {
			return "", fmt.Errorf("render chat template: message %d: %w", i, err)
		}
		msgs[i] = v
	}
	vars := map[string]jinja.Value{
		"messages":              jinja.NewList(msgs),
		"add_generation_prompt": jinja.NewBool(opts.AddGenerationPrompt),
		"bos_token":             jinja.NewString(opts.BOSToken),
		"eos_token":             jinja.NewString(opts.EOSToken),
	}
	if opts.EnableThinking != nil {
		vars["enable_thinking"] = jinja.NewBool(*opts.EnableThinking)
	}
	if len(opts.Tools) > 0 {
		tools := make([]jinja.Value, len(opts.Tools))
		for i, raw := range opts.Tools {
			v, err := jsonValue(raw)
			if err != nil {
				return "", fmt.Errorf("render chat template: tool %d: %w", i, err)
			}
			tools[i] = v
		}
		vars["tools"] = jinja.NewList(tools)
	}
	out, err := t.t.RenderValues(vars)
	if err != nil {
		return "", fmt.Errorf("render chat template %s: %w", t.origin, err)
	}
	return out, nil
}

// Encode returns the token ids of a rendered prompt: special tokens in it
// are recognised (the template's <|im_start|> is one id), and BOS is put
// in front when the model asks for it and the prompt does not already
// begin with it. Note that special-token text inside a message is
// recognised too, as with Hugging Face's apply_chat_template.
func Encode(tok *tokenizer.Tokenizer, cfg tokenizer.Config, prompt string) []int {
	ids := tok.Encode(prompt)
	if cfg.AddBOS && cfg.BOS >= 0 && (len(ids) == 0 || ids[0] != cfg.BOS) {
		ids = append([]int{cfg.BOS}, ids...)
	}
	return ids
}

// messageValue turns a message into the dict templates see. Optional
// fields are left out when empty, so that "is defined" tests work.
func messageValue(m Message) (jinja.Value, error) {
	d := jinja.NewDict()
	dict := d.AsDict()
	dict.Set("role", jinja.NewString(m.Role))
	dict.Set("content", jinja.NewString(m.Content))
	if m.Reasoning != "" {
		dict.Set("reasoning_content", jinja.NewString(m.Reasoning))
	}
	if len(m.ToolCalls) > 0 {
		calls := make([]jinja.Value, len(m.ToolCalls))
		for i, c := range m.ToolCalls {
			cv := jinja.NewDict()
			cd := cv.AsDict()
			if c.ID != "" {
				cd.Set("id", jinja.NewString(c.ID))
			}
			typ := c.Type
			if typ == "" {
				typ = "function"
			}
			cd.Set("type", jinja.NewString(typ))
			fv := jinja.NewDict()
			fd := fv.AsDict()
			fd.Set("name", jinja.NewString(c.Function.Name))
			args := jinja.NewDict()
			if len(bytes.TrimSpace(c.Function.Arguments)) > 0 {
				var err error
				if args, err = jsonValue(c.Function.Arguments); err != nil {
					return jinja.Undefined(), fmt.Errorf("tool call %d (%s) arguments: %w", i, c.Function.Name, err)
				}
			}
			fd.Set("arguments", args)
			cd.Set("function", fv)
			calls[i] = cv
		}
		dict.Set("tool_calls", jinja.NewList(calls))
	}
	if m.ToolCallID != "" {
		dict.Set("tool_call_id", jinja.NewString(m.ToolCallID))
	}
	if m.Name != "" {
		dict.Set("name", jinja.NewString(m.Name))
	}
	return d, nil
}

// jsonValue converts JSON to a template value, keeping the order of
// object keys (tojson then writes them in the order the client sent, as
// Python's json.dumps does with the dicts transformers passes).
func jsonValue(raw json.RawMessage) (jinja.Value, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	v, err := decodeValue(dec)
	if err != nil {
		return jinja.Undefined(), fmt.Errorf("invalid JSON: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return jinja.Undefined(), errors.New("invalid JSON: data after the value")
	}
	return v, nil
}

func decodeValue(dec *json.Decoder) (jinja.Value, error) {
	tok, err := dec.Token()
	if err != nil {
		return jinja.Undefined(), err
	}
	switch x := tok.(type) {
	case json.Delim:
		switch x {
		case '{':
			d := jinja.NewDict()
			for dec.More() {
				k, err := dec.Token()
				if err != nil {
					return jinja.Undefined(), err
				}
				key, ok := k.(string)
				if !ok {
					return jinja.Undefined(), fmt.Errorf("object key %v is not a string", k)
				}
				v, err := decodeValue(dec)
				if err != nil {
					return jinja.Undefined(), err
				}
				d.AsDict().Set(key, v)
			}
			if _, err := dec.Token(); err != nil { // '}'
				return jinja.Undefined(), err
			}
			return d, nil
		case '[':
			var items []jinja.Value
			for dec.More() {
				v, err := decodeValue(dec)
				if err != nil {
					return jinja.Undefined(), err
				}
				items = append(items, v)
			}
			if _, err := dec.Token(); err != nil { // ']'
				return jinja.Undefined(), err
			}
			return jinja.NewList(items), nil
		}
		return jinja.Undefined(), fmt.Errorf("unexpected %v", x)
	default:
		return jinja.FromGoValue(x), nil // nil, bool, string, json.Number
	}
}
