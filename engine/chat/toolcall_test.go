package chat

import (
	"bytes"
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/npuchat/npuchat/internal/golden"
)

type toolCase struct {
	Name   string `json:"name"`
	Family string `json:"family"`
	Answer string `json:"answer"`
}

type toolResult struct {
	Name  string       `json:"name"`
	Text  string       `json:"text"`
	Calls []ParsedCall `json:"calls"`
}

func formatOf(t *testing.T, family string) ToolFormat {
	for _, f := range []ToolFormat{HermesTools, MistralTools, Llama3Tools} {
		if f.Family == family {
			return f
		}
	}
	t.Fatalf("unknown family %q", family)
	return ToolFormat{}
}

// parseInPieces feeds answer in pieces of n bytes (0: whole).
func parseInPieces(f ToolFormat, answer string, n int) toolResult {
	p := NewToolCallParser(f)
	var r toolResult
	add := func(text string, calls []ParsedCall) {
		r.Text += text
		r.Calls = append(r.Calls, calls...)
	}
	if n == 0 {
		add(p.Feed(answer))
	} else {
		for i := 0; i < len(answer); i += n {
			add(p.Feed(answer[i:min(i+n, len(answer))]))
		}
	}
	add(p.Flush())
	return r
}

// Each family's markup, well-formed and broken, parses to the golden
// calls and text, whether the answer arrives whole or in pieces of 1 to
// 7 bytes. Broken markup comes back as text, never as an error. Run
// with -update to rewrite testdata/toolcall/golden.json.
func TestToolCallGolden(t *testing.T) {
	data, err := os.ReadFile("testdata/toolcall/cases.json")
	if err != nil {
		t.Fatal(err)
	}
	var cases []toolCase
	if err := json.Unmarshal(data, &cases); err != nil {
		t.Fatal(err)
	}
	var got []toolResult
	for _, c := range cases {
		f := formatOf(t, c.Family)
		whole := parseInPieces(f, c.Answer, 0)
		whole.Name = c.Name
		for n := 1; n <= 7; n++ {
			r := parseInPieces(f, c.Answer, n)
			r.Name = c.Name
			if !reflect.DeepEqual(r, whole) {
				t.Errorf("%s in pieces of %d: %+v, whole: %+v", c.Name, n, r, whole)
			}
		}
		got = append(got, whole)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(got); err != nil {
		t.Fatal(err)
	}
	out := buf.Bytes()
	golden.Assert(t, "testdata/toolcall/golden.json", out)
}

// Broken markup loses nothing: the text is the answer byte for byte.
func TestToolCallBrokenIsText(t *testing.T) {
	for _, answer := range []string{
		"<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": }</tool_call>",
		"<tool_call>not json</tool_call>",
		"<tool_call>",
		"<tool_cal",
	} {
		if r := parseInPieces(HermesTools, answer, 3); r.Text != answer || len(r.Calls) != 0 {
			t.Errorf("%q: got %+v", answer, r)
		}
	}
}

func TestTemplateToolFormat(t *testing.T) {
	for _, tc := range []struct {
		src  string
		want string
		ok   bool
	}{
		{ChatMLSource, "", false},
		{"{% if tools %}<tools>{{ tools }}</tools>{% endif %}<tool_call>", "hermes", true},
		{"{% if tools %}[AVAILABLE_TOOLS]{% endif %}[TOOL_CALLS]", "mistral", true},
		{"{% if tools %}{% endif %}<|python_tag|>", "llama3", true},
	} {
		tmpl, err := New(tc.src, "test")
		if err != nil {
			t.Fatal(err)
		}
		f, ok := tmpl.ToolFormat()
		if ok != tc.ok || f.Family != tc.want {
			t.Errorf("%.40q: got %q %v, want %q %v", tc.src, f.Family, ok, tc.want, tc.ok)
		}
	}
	if !strings.Contains(qwen3Template(t).Source(), "<tool_call>") {
		t.Fatal("the Qwen3 template has no <tool_call>")
	}
	if f, ok := qwen3Template(t).ToolFormat(); !ok || f.Family != "hermes" {
		t.Errorf("Qwen3: %q %v", f.Family, ok)
	}
}
