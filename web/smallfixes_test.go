package web_test

import (
	"io"
	"net"
	"strings"
	"testing"

	"github.com/npuchat/npuchat/service"
	"github.com/npuchat/npuchat/service/backend/fake"
	"github.com/npuchat/npuchat/web"
)

// TestSmallFixes: a request with no Host is told so (it read "Host  is
// not allowed", two spaces); an Ollama top_k beyond the engine's range is
// refused with the number the client sent, not one clamped first.
func TestSmallFixes(t *testing.T) {
	ts := startServer(t, fake.Options{}, web.Options{}, service.Options{})
	// HTTP/1.0 may leave the Host out (HTTP/1.1 gets net/http's 400).
	c, err := net.Dial("tcp", strings.TrimPrefix(ts.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, "GET /v1/models HTTP/1.0\r\n\r\n")
	raw, _ := io.ReadAll(c)
	if strings.Contains(string(raw), "Host  ") || !strings.Contains(string(raw), "without a Host header") {
		t.Errorf("no Host: %s", raw)
	}
	resp, body := do(t, "POST", ts.URL+"/api/chat", `{"model": "minicpm5:2b", "stream": false, "messages": [{"role": "user", "content": "hi"}], "options": {"top_k": 5000000000}}`)
	if resp.StatusCode != 400 || !strings.Contains(body, "got 5000000000") {
		t.Errorf("top_k 5e9: %d %s", resp.StatusCode, body)
	}
}
