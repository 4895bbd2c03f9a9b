package web_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/npuchat/npuchat/service"
	"github.com/npuchat/npuchat/service/backend/fake"
	"github.com/npuchat/npuchat/web"
)

// TestUnsupportedFeaturesAreRefused (issue 13, item 8): a client that
// asks for tools, JSON output or logprobs from a backend that cannot do
// them (here the scripted backend, which says it can only complete) gets
// a 400 naming the parameter, not a normal-looking answer that ignored
// it; the defaults that ask for nothing still pass.
func TestUnsupportedFeaturesAreRefused(t *testing.T) {
	ts := startServer(t, fake.Options{}, web.Options{}, service.Options{})
	msgs := `"model":"minicpm5:2b","messages":[{"role":"user","content":"hi"}]`
	tool := `[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}]`
	cases := []struct {
		path, body, param string // param "" means accepted
	}{
		{"/v1/chat/completions", `{` + msgs + `,"tools":` + tool + `}`, "tools"},
		{"/v1/chat/completions", `{` + msgs + `,"tools":` + tool + `,"tool_choice":"required"}`, "tools"},
		{"/v1/chat/completions", `{` + msgs + `,"response_format":{"type":"json_object"}}`, "response_format"},
		{"/v1/chat/completions", `{` + msgs + `,"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{}}}}`, "response_format"},
		{"/v1/chat/completions", `{` + msgs + `,"logprobs":true}`, "logprobs"},
		{"/v1/chat/completions", `{` + msgs + `,"logprobs":true,"top_logprobs":3}`, "logprobs"},
		{"/v1/completions", `{"model":"minicpm5:2b","prompt":"x","logprobs":2}`, "logprobs"},
		{"/api/chat", `{` + msgs + `,"stream":false,"format":"json"}`, "format"},
		{"/api/chat", `{` + msgs + `,"stream":false,"format":{"type":"object"}}`, "format"},
		{"/api/chat", `{` + msgs + `,"stream":false,"tools":` + tool + `}`, "tools"},
		{"/api/generate", `{"model":"minicpm5:2b","prompt":"x","stream":false,"format":"json"}`, "format"},
		// Asking for nothing is fine.
		{"/v1/chat/completions", `{` + msgs + `,"tools":[],"tool_choice":"none","response_format":{"type":"text"},"logprobs":false,"top_logprobs":null}`, ""},
		{"/api/chat", `{` + msgs + `,"stream":false,"format":"","tools":[]}`, ""},
	}
	for _, c := range cases {
		resp, body := do(t, "POST", ts.URL+c.path, c.body)
		if c.param == "" {
			if resp.StatusCode != 200 {
				t.Errorf("%s %s: %d %s", c.path, c.body, resp.StatusCode, body)
			}
			continue
		}
		if resp.StatusCode != 400 || !strings.Contains(body, "not supported") || !strings.Contains(body, c.param) {
			t.Errorf("%s %s: %d %s", c.path, c.body, resp.StatusCode, body)
			continue
		}
		if strings.HasPrefix(c.path, "/v1/") {
			var e struct {
				Error struct{ Param, Code string }
			}
			if json.Unmarshal([]byte(body), &e) != nil || e.Error.Param != c.param || e.Error.Code != "unsupported_parameter" {
				t.Errorf("%s: error object %s", c.body, body)
			}
		}
	}
}
