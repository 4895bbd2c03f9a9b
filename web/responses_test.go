package web_test

import (
	"strings"
	"testing"

	"github.com/npuchat/npuchat/service"
	"github.com/npuchat/npuchat/service/backend"
	"github.com/npuchat/npuchat/service/backend/fake"
	"github.com/npuchat/npuchat/web"
)

func TestResponsesRequests(t *testing.T) {
	ts := startServer(t, toolFake(), web.Options{}, service.Options{})
	resp, out := do(t, "POST", ts.URL+"/v1/responses", `{"model":"minicpm5:2b","input":[{"role":"developer","content":"Be brief."},{"type":"message","role":"user","content":[{"type":"input_text","text":"hi"}]}],"text":{"format":{"type":"json_schema","name":"n","schema":{"type":"object"}}},"max_output_tokens":1}`)
	if resp.StatusCode != 200 || !strings.Contains(out, `"status":"completed"`) || !strings.Contains(out, `"output_text","text":"Checking."`) {
		t.Errorf("%d %s", resp.StatusCode, out)
	}
	req := lastRequest(t, ts)
	if f := req.Format; f == nil || f.Type != backend.FormatSchema || f.Name != "n" || req.Messages[0].Role != "system" || req.Messages[1].Content != "hi" || req.MaxTokens != 1 {
		t.Errorf("backend saw %+v, format %+v", req, req.Format)
	}
	// Cut by max_output_tokens: incomplete, and says why.
	plain := startServer(t, fake.Options{}, web.Options{}, service.Options{})
	if _, out := do(t, "POST", plain.URL+"/v1/responses", `{"model":"minicpm5:2b","input":"one two three","max_output_tokens":1}`); !strings.Contains(out, `"status":"incomplete"`) || !strings.Contains(out, `"incomplete_details":{"reason":"max_output_tokens"}`) {
		t.Errorf("cut answer: %s", out)
	}
	for body, want := range map[string]string{
		`{"model":"minicpm5:2b","input":"x","previous_response_id":"resp_1"}`:                  "previous_response_id is not supported",
		`{"model":"minicpm5:2b","input":[]}`:                                                   "non-empty list",
		`{"model":"minicpm5:2b","input":[{"type":"image_generation_call"}]}`:                   `image_generation_call\" is not supported`,
		`{"model":"minicpm5:2b","input":"x","tools":[{"type":"web_search"}]}`:                  `web_search\" is not supported`,
		`{"model":"minicpm5:2b","input":"x","text":{"format":{"type":"json_schema"}}}`:         "json_schema.schema is required",
		`{"model":"minicpm5:2b","input":[{"role":"user","content":[{"type":"input_image"}]}]}`: "reads text only",
	} {
		resp, out := do(t, "POST", ts.URL+"/v1/responses", body)
		if resp.StatusCode != 400 || !strings.Contains(out, want) {
			t.Errorf("%s: %d %s, want 400 saying %q", body, resp.StatusCode, out, want)
		}
	}
}
