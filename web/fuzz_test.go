package web

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/npuchat/npuchat/enginekind"
	"github.com/npuchat/npuchat/service"
	"github.com/npuchat/npuchat/service/backend"
	"github.com/npuchat/npuchat/service/backend/fake"
	"github.com/npuchat/npuchat/service/servicetest"
)

var fuzzSeeds = []string{
	`{"model":"minicpm5:2b","messages":[{"role":"user","content":"hi"}]}`,
	`{"model":"minicpm5:2b","stream":true,"stop":["a","b"],"max_tokens":3,"temperature":0.5,"seed":1}`,
	`{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"x"}]}],"top_k":3}`,
	`{"model":"m","prompt":["x"],"options":{"num_predict":-1,"stop":"x","top_k":1e300,"seed":-5}}`,
	`{"model":"m","keep_alive":"5m","messages":null}`,
	`{"model":"m","keep_alive":-1,"options":{"temperature":null}}`,
	`[]`, `null`, `"x"`, `{"model":1}`, `{`, ``,
}

// FuzzDecoders feeds arbitrary bodies to every request decoder: each must
// return a request or an error, never panic, and a request it returns
// must be within the documented limits.
func FuzzDecoders(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		check := func(req *backend.Request, err error) {
			if err != nil {
				if _, ok := err.(*apiError); !ok {
					t.Fatalf("error of type %T: %v", err, err)
				}
				return
			}
			s := req.Sampling
			if req.Model == "" || req.MaxTokens < 0 || s.Temperature < 0 || s.Temperature > 2 || s.TopP < 0 || s.TopP > 1 || s.TopK < 0 || len(req.Stop) > maxStops {
				t.Fatalf("decoded an out-of-range request: %+v", req)
			}
		}
		r1, _, err := parseOpenAIChat(body)
		check(r1, err)
		r2, _, err := parseOpenAICompletion(body)
		check(r2, err)
		r3, _, err := parseOllamaChat(body)
		check(r3, err)
		r4, _, err := parseOllamaGenerate(body)
		check(r4, err)
	})
}

// FuzzHandlers runs arbitrary bodies through the real handlers: the
// server answers every one with a status, never a panic (a panic would
// be a 500 "internal_error").
func FuzzHandlers(f *testing.F) {
	routes := []string{"/v1/chat/completions", "/api/chat", "/api/generate", "/v1/completions", "/api/show", "/api/model/start"}
	for _, s := range fuzzSeeds {
		for i := range routes {
			f.Add(uint8(i), s)
		}
	}
	reg := &servicetest.Registry{}
	reg.Add(servicetest.Entry{Desc: service.ModelDesc{Name: "minicpm5:2b", Installed: true}})
	mgr := service.New(service.Options{
		Resolve: reg.Resolve, Models: reg.Models, KeepAlive: -1, QueueSize: 100,
		NewBackend: func(_ context.Context, model string, kind enginekind.Kind) (backend.Backend, error) {
			return fake.New(fake.Options{Name: model}), nil
		},
	})
	srv, err := NewServer(mgr, Options{MaxBodyBytes: 1 << 16})
	if err != nil {
		f.Fatal(err)
	}
	h := srv.Handler()
	f.Fuzz(func(t *testing.T, route uint8, body string) {
		path := routes[int(route)%len(routes)]
		req := httptest.NewRequest(http.MethodPost, "http://127.0.0.1:8001"+path, strings.NewReader(body))
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code >= 500 { // the fake backend never fails: a 500 is a panic or a bug
			t.Fatalf("%s %q: %d %s", path, body, rec.Code, rec.Body.String())
		}
	})
}
