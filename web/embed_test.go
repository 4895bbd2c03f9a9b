package web_test

import (
	"strings"
	"testing"

	"github.com/npuchat/npuchat/service"
	"github.com/npuchat/npuchat/service/backend/fake"
	"github.com/npuchat/npuchat/web"
)

// A backend without embeddings (the fake here, as FastFlowLM and a
// remote server) makes /v1/embeddings and /api/embed a 400 in each API's
// shape that says so (POST /api/embed answered OpenAI's 404 shape, which
// the Ollama client showed as "[object Object]"); bad inputs are 400s
// naming the parameter. Real vectors come from the engine
// (tests/clients TestEmbeddingsOnTheEngine).
func TestEmbeddingsWithoutAnEmbedder(t *testing.T) {
	ts := startServer(t, fake.Options{}, web.Options{}, service.Options{})
	for _, c := range []struct{ path, body, shape, want string }{
		{"/v1/embeddings", `{"model":"minicpm5:2b","input":"hello"}`, `{"error":{"message":`, "computes no embeddings"},
		{"/api/embed", `{"model":"minicpm5:2b","input":["a","b"]}`, `{"error":"`, "computes no embeddings"},
		{"/api/embeddings", `{"model":"minicpm5:2b","prompt":"a"}`, `{"error":"`, "computes no embeddings"},
		{"/v1/embeddings", `{"model":"minicpm5:2b","input":[1,2,3]}`, `"param":"input"`, "token-id inputs are not supported"},
		{"/v1/embeddings", `{"model":"minicpm5:2b","input":"x","encoding_format":"int8"}`, `"param":"encoding_format"`, "float"},
		{"/v1/embeddings", `{"model":"minicpm5:2b","input":"x","dimensions":64}`, `"param":"dimensions"`, "not supported"},
		{"/api/embed", `{"model":"minicpm5:2b","input":[]}`, `{"error":"`, "1 to 256"},
		{"/api/embed", `{"model":"minicpm5:2b"}`, `{"error":"`, "input is required"},
	} {
		resp, body := do(t, "POST", ts.URL+c.path, c.body)
		if resp.StatusCode != 400 || !strings.HasPrefix(body, c.shape) && !strings.Contains(body, c.shape) || !strings.Contains(body, c.want) {
			t.Errorf("%s %s: %d %s, want a 400 in %s saying %q", c.path, c.body, resp.StatusCode, body, c.shape, c.want)
		}
	}
}
