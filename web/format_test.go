package web_test

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/npuchat/npuchat/internal/golden"
	"github.com/npuchat/npuchat/service"
	"github.com/npuchat/npuchat/service/backend"
	"github.com/npuchat/npuchat/service/backend/fake"
	"github.com/npuchat/npuchat/web"
)

// normalize blanks what differs from run to run: ids, times, durations.
var normalizers = []struct {
	re   *regexp.Regexp
	with string
}{
	{regexp.MustCompile(`"id":"(chatcmpl|cmpl)-[0-9a-f]+"`), `"id":"$1-ID"`},
	{regexp.MustCompile(`"(id|item_id)":"(msg|resp)_[0-9a-f]+"`), `"$1":"${2}_ID"`},
	{regexp.MustCompile(`"created_at":\d+`), `"created_at":0`},
	{regexp.MustCompile(`"created":\d+`), `"created":0`},
	{regexp.MustCompile(`"created_at":"[^"]+"`), `"created_at":"TIME"`},
	{regexp.MustCompile(`"(total|load|prompt_eval|eval)_duration":\d+`), `"${1}_duration":0`},
}

func normalize(s string) string {
	for _, n := range normalizers {
		s = n.re.ReplaceAllString(s, n.with)
	}
	return s
}

// responsesTools is a Responses API function tool (flat: name beside type).
const responsesTools = `[{"type":"function","name":"get_weather","description":"Weather in a city","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}]`

// TestAnswerFormats pins every answer format byte for byte (after
// blanking ids and times): OpenAI chat and completions, Ollama chat and
// generate, Anthropic Messages and OpenAI Responses, whole and streamed,
// complete, stopped by a stop sequence or the token limit, calling a
// tool, and cut by a failing backend.
func TestAnswerFormats(t *testing.T) {
	msgs := `"messages":[{"role":"user","content":"one <two> three"}]`
	cases := []struct {
		name, path, body string
		fail             bool // the backend fails after two tokens
		tools            bool // the backend calls a tool
	}{
		{"openai-chat.json", "/v1/chat/completions", `{"model":"minicpm5:2b",` + msgs + `}`, false, false},
		{"openai-chat-stream.sse", "/v1/chat/completions", `{"model":"minicpm5:2b","stream":true,"stream_options":{"include_usage":true},` + msgs + `}`, false, false},
		{"openai-chat-stream-cut.sse", "/v1/chat/completions", `{"model":"minicpm5:2b","stream":true,` + msgs + `}`, true, false},
		{"openai-chat-cut.json", "/v1/chat/completions", `{"model":"minicpm5:2b",` + msgs + `}`, true, false},
		{"openai-completion.json", "/v1/completions", `{"model":"minicpm5:2b","prompt":"one two","echo":true}`, false, false},
		{"openai-completion-stream.sse", "/v1/completions", `{"model":"minicpm5:2b","prompt":"one two","stream":true,"echo":true,"stream_options":{"include_usage":true}}`, false, false},
		{"openai-completion-stream-cut.sse", "/v1/completions", `{"model":"minicpm5:2b","prompt":"one two three","stream":true}`, true, false},
		{"ollama-chat.json", "/api/chat", `{"model":"minicpm5:2b","stream":false,` + msgs + `}`, false, false},
		{"ollama-chat-stream.ndjson", "/api/chat", `{"model":"minicpm5:2b",` + msgs + `}`, false, false},
		{"ollama-chat-stream-cut.ndjson", "/api/chat", `{"model":"minicpm5:2b",` + msgs + `}`, true, false},
		{"ollama-generate.json", "/api/generate", `{"model":"minicpm5:2b","prompt":"one two","stream":false}`, false, false},
		{"ollama-generate-stream.ndjson", "/api/generate", `{"model":"minicpm5:2b","prompt":"one two"}`, false, false},
		{"ollama-generate-cut.json", "/api/generate", `{"model":"minicpm5:2b","prompt":"one two three","stream":false}`, true, false},
		{"anthropic.json", "/v1/messages", `{"model":"minicpm5:2b","max_tokens":50,` + msgs + `}`, false, false},
		{"anthropic-stream.sse", "/v1/messages", `{"model":"minicpm5:2b","max_tokens":50,"stream":true,` + msgs + `}`, false, false},
		{"anthropic-stop-sequence.json", "/v1/messages", `{"model":"minicpm5:2b","max_tokens":50,"stop_sequences":["x","three"],` + msgs + `}`, false, false},
		{"anthropic-stop-sequence-stream.sse", "/v1/messages", `{"model":"minicpm5:2b","max_tokens":50,"stream":true,"stop_sequences":["three"],` + msgs + `}`, false, false},
		{"anthropic-max-tokens.json", "/v1/messages", `{"model":"minicpm5:2b","max_tokens":1,` + msgs + `}`, false, false},
		{"anthropic-cut.json", "/v1/messages", `{"model":"minicpm5:2b","max_tokens":50,` + msgs + `}`, true, false},
		{"anthropic-stream-cut.sse", "/v1/messages", `{"model":"minicpm5:2b","max_tokens":50,"stream":true,` + msgs + `}`, true, false},
		{"anthropic-tools-stream.sse", "/v1/messages", `{"model":"minicpm5:2b","max_tokens":50,"stream":true,"tools":` + anthropicTools + `,` + msgs + `}`, false, true},
		{"anthropic-tools.json", "/v1/messages", `{"model":"minicpm5:2b","max_tokens":50,"tools":` + anthropicTools + `,` + msgs + `}`, false, true},
		{"responses.json", "/v1/responses", `{"model":"minicpm5:2b","input":"one <two> three"}`, false, false},
		{"responses-stream.sse", "/v1/responses", `{"model":"minicpm5:2b","stream":true,"input":"one <two> three"}`, false, false},
		{"responses-incomplete-stream.sse", "/v1/responses", `{"model":"minicpm5:2b","stream":true,"max_output_tokens":1,"input":"one <two> three"}`, false, false},
		{"responses-cut.json", "/v1/responses", `{"model":"minicpm5:2b","input":"one <two> three"}`, true, false},
		{"responses-stream-cut.sse", "/v1/responses", `{"model":"minicpm5:2b","stream":true,"input":"one <two> three"}`, true, false},
		{"responses-tools-stream.sse", "/v1/responses", `{"model":"minicpm5:2b","stream":true,"tools":` + responsesTools + `,"input":"weather?"}`, false, true},
		{"responses-tools.json", "/v1/responses", `{"model":"minicpm5:2b","tools":` + responsesTools + `,"input":"weather?"}`, false, true},
	}
	ok := startServer(t, fake.Options{}, web.Options{}, service.Options{})
	failing := startServer(t, fake.Options{FailAfter: 2, FailErr: fmt.Errorf("fake NPU: %w", backend.ErrDeviceFailed)}, web.Options{}, service.Options{})
	tools := startServer(t, toolFake(), web.Options{}, service.Options{})
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ts := ok
			if c.fail {
				ts = failing
			}
			if c.tools {
				ts = tools
			}
			resp, body := do(t, "POST", ts.URL+c.path, c.body)
			got := fmt.Sprintf("%d %s\n%s", resp.StatusCode, resp.Header.Get("Content-Type"), normalize(body))
			golden.AssertString(t, filepath.Join("testdata", "formats", c.name), got)
		})
	}
}

// TestFingerprintIsTheSameStreamedAndWhole: system_fingerprint names the
// engine that answered in every chunk and in whole answers (they drifted
// when each handler built its own maps).
func TestFingerprintIsTheSameStreamedAndWhole(t *testing.T) {
	ts := startServer(t, fake.Options{}, web.Options{}, service.Options{})
	for _, path := range []string{"/v1/chat/completions", "/v1/completions"} {
		for _, stream := range []string{"false", "true"} {
			body := `{"model":"minicpm5:2b","stream":` + stream + `,"prompt":"a b","messages":[{"role":"user","content":"a b"}]}`
			_, out := do(t, "POST", ts.URL+path, body)
			n := strings.Count(out, `"system_fingerprint":"npuchat-cpu"`)
			if n == 0 || n != strings.Count(out, `"system_fingerprint"`) {
				t.Fatalf("%s stream=%s: fingerprints differ or are missing:\n%s", path, stream, out)
			}
		}
	}
}
