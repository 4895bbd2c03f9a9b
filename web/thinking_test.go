package web_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/npuchat/npuchat/service"
	"github.com/npuchat/npuchat/service/backend"
	"github.com/npuchat/npuchat/service/backend/fake"
	"github.com/npuchat/npuchat/web"
)

// thinker answers as a reasoning model does, and says what think it
// was asked with.
func thinker(r *backend.Request) string {
	think := "default"
	if r.Think != nil {
		think = fmt.Sprint(*r.Think)
	}
	return "<think>\nI was asked with " + think + ".\n</think>\n\nThe answer."
}

// TestAPIsReturnThinkingApart: a <think> block is the answer's
// reasoning in each API's own field (OpenAI-compatible reasoning_content
// in the message and the deltas, Ollama's thinking), never in its
// content; a raw completion is left as the model wrote it.
func TestAPIsReturnThinkingApart(t *testing.T) {
	s := startServer(t, fake.Options{Reply: thinker}, web.Options{}, service.Options{})
	const thought, answer = "I was asked with default.\n", "The answer."
	msgs := `"messages": [{"role": "user", "content": "hi"}]`

	// OpenAI chat, whole and streamed.
	_, body := do(t, "POST", s.URL+"/v1/chat/completions", `{"model": "minicpm5:2b", `+msgs+`}`)
	var whole struct {
		Choices []struct {
			Message struct {
				Content          string `json:"content"`
				ReasoningContent string `json:"reasoning_content"`
			} `json:"message"`
		} `json:"choices"`
	}
	if err := json.Unmarshal([]byte(body), &whole); err != nil || len(whole.Choices) != 1 {
		t.Fatalf("%v: %s", err, body)
	}
	if m := whole.Choices[0].Message; m.Content != answer || m.ReasoningContent != thought {
		t.Errorf("OpenAI chat: content %q, reasoning_content %q", m.Content, m.ReasoningContent)
	}
	_, body = do(t, "POST", s.URL+"/v1/chat/completions", `{"model": "minicpm5:2b", "stream": true, `+msgs+`}`)
	var content, reasoning strings.Builder
	for _, line := range strings.Split(body, "\n") {
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		var c struct {
			Choices []struct {
				Delta struct {
					Content          *string `json:"content"`
					ReasoningContent *string `json:"reasoning_content"`
				} `json:"delta"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(data), &c); err != nil {
			t.Fatalf("%v: %s", err, data)
		}
		for _, ch := range c.Choices {
			if ch.Delta.Content != nil {
				content.WriteString(*ch.Delta.Content)
			}
			if ch.Delta.ReasoningContent != nil {
				reasoning.WriteString(*ch.Delta.ReasoningContent)
			}
		}
	}
	if content.String() != answer || reasoning.String() != thought {
		t.Errorf("OpenAI chat stream: content %q, reasoning_content %q", content.String(), reasoning.String())
	}

	// Ollama chat, whole and streamed, with think.
	_, body = do(t, "POST", s.URL+"/api/chat", `{"model": "minicpm5:2b", "stream": false, "think": false, `+msgs+`}`)
	var oc struct {
		Message struct{ Content, Thinking string }
	}
	json.Unmarshal([]byte(body), &oc)
	if oc.Message.Content != answer || oc.Message.Thinking != "I was asked with false.\n" {
		t.Errorf("Ollama chat: %s", body)
	}
	_, body = do(t, "POST", s.URL+"/api/chat", `{"model": "minicpm5:2b", "think": "high", `+msgs+`}`)
	content.Reset()
	reasoning.Reset()
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		var c struct {
			Message struct{ Content, Thinking string }
		}
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			t.Fatalf("%v: %s", err, sc.Text())
		}
		content.WriteString(c.Message.Content)
		reasoning.WriteString(c.Message.Thinking)
	}
	if content.String() != answer || reasoning.String() != "I was asked with true.\n" {
		t.Errorf("Ollama chat stream: content %q, thinking %q", content.String(), reasoning.String())
	}
	if resp, body := do(t, "POST", s.URL+"/api/chat", `{"model": "minicpm5:2b", "think": "very", `+msgs+`}`); resp.StatusCode != 400 || !strings.Contains(body, "think") {
		t.Errorf("think \"very\": %d %s", resp.StatusCode, body)
	}
	// Ollama generate: the top-level thinking; raw: as written.
	_, body = do(t, "POST", s.URL+"/api/generate", `{"model": "minicpm5:2b", "stream": false, "prompt": "hi"}`)
	var og struct{ Response, Thinking string }
	json.Unmarshal([]byte(body), &og)
	if og.Response != answer || og.Thinking != thought {
		t.Errorf("Ollama generate: %s", body)
	}
	_, body = do(t, "POST", s.URL+"/v1/completions", `{"model": "minicpm5:2b", "prompt": "hi"}`)
	if !strings.Contains(body, `\u003cthink\u003e`) && !strings.Contains(body, "<think>") {
		t.Errorf("a raw completion lost its <think> text: %s", body)
	}
}

// TestAnthropicThinkingBlocks: the Messages API returns the reasoning as
// a thinking block before the text block, whole and streamed
// (content_block_start of type thinking, thinking_delta events, a
// signature_delta, content_block_stop, then the text block), and
// thinking.type switches it.
func TestAnthropicThinkingBlocks(t *testing.T) {
	s := startServer(t, fake.Options{Reply: thinker}, web.Options{}, service.Options{})
	req := `{"model": "minicpm5:2b", "max_tokens": 64, "thinking": {"type": "disabled"}, "messages": [{"role": "user", "content": "hi"}]`
	_, body := do(t, "POST", s.URL+"/v1/messages", req+`}`)
	var whole struct {
		Content []struct{ Type, Thinking, Text string }
	}
	json.Unmarshal([]byte(body), &whole)
	if len(whole.Content) != 2 || whole.Content[0].Type != "thinking" || whole.Content[0].Thinking != "I was asked with false.\n" ||
		whole.Content[1].Type != "text" || whole.Content[1].Text != "The answer." || !strings.Contains(body, `"signature":""`) {
		t.Errorf("whole answer: %s", body)
	}
	_, body = do(t, "POST", s.URL+"/v1/messages", req+`, "stream": true}`)
	var seq []string
	var thinking, text strings.Builder
	for _, line := range strings.Split(body, "\n") {
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			continue
		}
		var ev struct {
			Type         string
			Index        int
			ContentBlock struct{ Type string } `json:"content_block"`
			Delta        struct{ Type, Thinking, Text string }
		}
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			t.Fatalf("%v: %s", err, data)
		}
		switch ev.Type {
		case "content_block_start":
			seq = append(seq, fmt.Sprintf("start %d %s", ev.Index, ev.ContentBlock.Type))
		case "content_block_delta":
			if n := len(seq); n == 0 || seq[n-1] != fmt.Sprintf("%s %d", ev.Delta.Type, ev.Index) {
				seq = append(seq, fmt.Sprintf("%s %d", ev.Delta.Type, ev.Index))
			}
			thinking.WriteString(ev.Delta.Thinking)
			text.WriteString(ev.Delta.Text)
		case "content_block_stop":
			seq = append(seq, fmt.Sprintf("stop %d", ev.Index))
		}
	}
	want := "[start 0 thinking thinking_delta 0 signature_delta 0 stop 0 start 1 text text_delta 1 stop 1]"
	if got := fmt.Sprint(seq); got != want || thinking.String() != "I was asked with false.\n" || text.String() != "The answer." {
		t.Errorf("stream: %s, thinking %q, text %q; want %s", got, thinking.String(), text.String(), want)
	}
	if resp, body := do(t, "POST", s.URL+"/v1/messages", `{"model": "minicpm5:2b", "max_tokens": 8, "thinking": {"type": "maybe"}, "messages": [{"role": "user", "content": "hi"}]}`); resp.StatusCode != 400 {
		t.Errorf("thinking.type maybe: %d %s", resp.StatusCode, body)
	}
}
