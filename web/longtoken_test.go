package web_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/npuchat/npuchat/engine/testmodel"
	"github.com/npuchat/npuchat/enginekind"
	"github.com/npuchat/npuchat/service"
	"github.com/npuchat/npuchat/service/backend"
	"github.com/npuchat/npuchat/service/cpu"
	"github.com/npuchat/npuchat/web"
	"github.com/npuchat/npuchat/web/webtest"
)

// longTokenModel writes a small random GGUF model whose last 128 tokens
// are 256 KiB of text each (their merges dropped, so the tokenizer never
// produces them from a prompt, but the model samples them): a few
// hundred generated tokens fill any socket buffer.
func longTokenModel(t *testing.T) string {
	t.Helper()
	w, err := testmodel.Random(5, testmodel.MiniCPM5Small())
	if err != nil {
		t.Fatal(err)
	}
	v := w.Vocab
	const k = 128
	n := len(v.Merges)
	for i := 0; i < k; i++ {
		v.Tokens[256+n-k+i] = fmt.Sprintf("%05d", i) + strings.Repeat("x", 256<<10)
	}
	v.Merges = v.Merges[:n-k]
	path := filepath.Join(t.TempDir(), "long.gguf")
	if err := testmodel.WriteGGUF(path, w, testmodel.F32); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestNonReadingClientOfTheEngineIsDropped (issue 13, item 1, with the
// in-process engine): a client that stops reading an answer of long
// tokens is dropped after the write timeout and the next client is
// answered.
func TestNonReadingClientOfTheEngineIsDropped(t *testing.T) {
	path := longTokenModel(t)
	ts := webtest.Start(t, webtest.Config{
		NewBackend: func(_ context.Context, model string, kind enginekind.Kind) (backend.Backend, error) {
			return cpu.New(cpu.Options{Path: path, Name: model, Threads: 1}), nil
		},
		Web:     web.Options{WriteTimeout: 300 * time.Millisecond},
		Service: service.Options{KeepAlive: -1},
	})
	body := `{"model":"minicpm5:2b","stream":true,"max_tokens":3000,"temperature":1,"seed":1,"messages":[{"role":"user","content":"go"}]}`
	rawRequest(t, ts.URL, fmt.Sprintf("POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body))
	waitUntil(t, "the answer to start", func() bool { return ts.Manager.Status().Running == 1 })
	waitUntil(t, "the stuck answer to be dropped", func() bool { st := ts.Manager.Status(); return st.Running == 0 && st.Waiting == 0 })
	resp, out := do(t, "POST", ts.URL+"/v1/chat/completions", `{"model":"minicpm5:2b","max_tokens":3,"messages":[{"role":"user","content":"next"}]}`)
	if resp.StatusCode != 200 {
		t.Fatalf("the next client: %d %s", resp.StatusCode, out)
	}
}
