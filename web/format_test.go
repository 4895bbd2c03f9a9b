package web_test

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/npuchat/npuchat/service"
	"github.com/npuchat/npuchat/service/backend"
	"github.com/npuchat/npuchat/service/backend/fake"
	"github.com/npuchat/npuchat/web"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/formats")

// normalize blanks what differs from run to run: ids, times, durations.
var normalizers = []struct {
	re   *regexp.Regexp
	with string
}{
	{regexp.MustCompile(`"id":"(chatcmpl|cmpl)-[0-9a-f]+"`), `"id":"$1-ID"`},
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

// golden compares got with testdata/formats/name, or rewrites it with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", "formats", name)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./web -run TestAnswerFormats -update to create it)", err)
	}
	if got != string(want) {
		t.Fatalf("%s differs from the golden file (go test ./web -run TestAnswerFormats -update rewrites it)\ngot:\n%s\nwant:\n%s", name, got, want)
	}
}

// TestAnswerFormats pins every answer format byte for byte (after
// blanking ids and times): OpenAI chat and completions and Ollama chat
// and generate, whole and streamed, complete and cut by a failing
// backend.
func TestAnswerFormats(t *testing.T) {
	msgs := `"messages":[{"role":"user","content":"one <two> three"}]`
	cases := []struct {
		name, path, body string
		fail             bool // the backend fails after two tokens
	}{
		{"openai-chat.json", "/v1/chat/completions", `{"model":"minicpm5:2b",` + msgs + `}`, false},
		{"openai-chat-stream.sse", "/v1/chat/completions", `{"model":"minicpm5:2b","stream":true,"stream_options":{"include_usage":true},` + msgs + `}`, false},
		{"openai-chat-stream-cut.sse", "/v1/chat/completions", `{"model":"minicpm5:2b","stream":true,` + msgs + `}`, true},
		{"openai-chat-cut.json", "/v1/chat/completions", `{"model":"minicpm5:2b",` + msgs + `}`, true},
		{"openai-completion.json", "/v1/completions", `{"model":"minicpm5:2b","prompt":"one two","echo":true}`, false},
		{"openai-completion-stream.sse", "/v1/completions", `{"model":"minicpm5:2b","prompt":"one two","stream":true,"echo":true,"stream_options":{"include_usage":true}}`, false},
		{"openai-completion-stream-cut.sse", "/v1/completions", `{"model":"minicpm5:2b","prompt":"one two three","stream":true}`, true},
		{"ollama-chat.json", "/api/chat", `{"model":"minicpm5:2b","stream":false,` + msgs + `}`, false},
		{"ollama-chat-stream.ndjson", "/api/chat", `{"model":"minicpm5:2b",` + msgs + `}`, false},
		{"ollama-chat-stream-cut.ndjson", "/api/chat", `{"model":"minicpm5:2b",` + msgs + `}`, true},
		{"ollama-generate.json", "/api/generate", `{"model":"minicpm5:2b","prompt":"one two","stream":false}`, false},
		{"ollama-generate-stream.ndjson", "/api/generate", `{"model":"minicpm5:2b","prompt":"one two"}`, false},
		{"ollama-generate-cut.json", "/api/generate", `{"model":"minicpm5:2b","prompt":"one two three","stream":false}`, true},
	}
	ok := startServer(t, fake.Options{}, web.Options{}, service.Options{})
	failing := startServer(t, fake.Options{FailAfter: 2, FailErr: fmt.Errorf("fake NPU: %w", backend.ErrDeviceFailed)}, web.Options{}, service.Options{})
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ts := ok
			if c.fail {
				ts = failing
			}
			resp, body := do(t, "POST", ts.URL+c.path, c.body)
			got := fmt.Sprintf("%d %s\n%s", resp.StatusCode, resp.Header.Get("Content-Type"), normalize(body))
			golden(t, c.name, got)
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
