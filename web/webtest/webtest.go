// Package webtest starts the real NPU Chat HTTP server on a loopback
// port over a scripted backend, for tests outside package web: the
// third-party client tests, and end-to-end tests of other packages.
package webtest

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/npuchat/npuchat/enginekind"
	"github.com/npuchat/npuchat/service"
	"github.com/npuchat/npuchat/service/backend"
	"github.com/npuchat/npuchat/service/backend/fake"
	"github.com/npuchat/npuchat/service/servicetest"
	"github.com/npuchat/npuchat/web"
)

// Server is a running test server.
type Server struct {
	URL     string // e.g. http://127.0.0.1:40123
	Manager *service.Manager
	// Web is the server, for OpenLink.
	Web *web.Server
	// Cookie is a "Cookie" header value with a session for the page's
	// own routes (history, settings, log), as the tray's link gives a
	// browser.
	Cookie string

	mu    sync.Mutex
	fakes []*fake.Backend
}

// Config chooses the backend and the server options. NewBackend, when
// set, replaces the fake backend (e.g. with the in-process engine over a
// small generated model).
type Config struct {
	Fake       fake.Options
	NewBackend func(ctx context.Context, model string, kind enginekind.Kind) (backend.Backend, error)
	Web        web.Options
	Service    service.Options
	// Models are the served models; default one, "minicpm5:2b", with
	// the alias "MiniCPM5-2B-NPU2".
	Models []servicetest.Entry
}

// Start starts a server; it stops when the test ends.
func Start(t testing.TB, cfg Config) *Server {
	t.Helper()
	reg := &servicetest.Registry{}
	if len(cfg.Models) == 0 {
		cfg.Models = []servicetest.Entry{{
			Desc: service.ModelDesc{Name: "minicpm5:2b", Installed: true, Family: "llama", ParameterSize: "2B", Quantization: "Q4_1",
				Format: "q4nx", Size: 2023518368, ContextLength: 4096},
			Aliases: []string{"MiniCPM5-2B-NPU2"},
		}}
	}
	for _, e := range cfg.Models {
		reg.Add(e)
	}
	s := &Server{}
	mo := cfg.Service
	mo.Resolve, mo.Models = reg.Resolve, reg.Models
	if mo.Engines == nil {
		mo.Engines = func(string) []enginekind.Kind { return []enginekind.Kind{enginekind.CPU} }
	}
	mo.NewBackend = cfg.NewBackend
	if mo.NewBackend == nil {
		mo.NewBackend = func(_ context.Context, model string, kind enginekind.Kind) (backend.Backend, error) {
			fo := cfg.Fake
			fo.Name, fo.Kind = model, kind
			b := fake.New(fo)
			s.mu.Lock()
			s.fakes = append(s.fakes, b)
			s.mu.Unlock()
			return b, nil
		}
	}
	if mo.KeepAlive == 0 {
		mo.KeepAlive = -1
	}
	s.Manager = service.New(mo)
	wo := cfg.Web
	wo.Addr = "127.0.0.1:0"
	if wo.Version == "" {
		wo.Version = "test"
	}
	srv, err := web.NewServer(s.Manager, wo)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", wo.Addr)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		srv.Serve(ctx, ln, nil)
		close(done)
	}()
	s.URL = "http://" + ln.Addr().String()
	s.Web = srv
	t.Cleanup(func() {
		cancel()
		<-done
		s.Manager.Close(context.Background())
	})
	c, err := Login(s.URL, srv.OpenLink(0))
	if err != nil {
		t.Fatal(err)
	}
	s.Cookie = c
	return s
}

// Login opens a one-time link (a path from web.Server.OpenLink) on the
// server at base as a browser would and returns the session it sets, as
// a "Cookie" header value.
func Login(base, link string) (string, error) {
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Get(base + link)
	if err != nil {
		return "", fmt.Errorf("open the link: %w", err)
	}
	resp.Body.Close()
	for _, c := range resp.Cookies() {
		if strings.HasPrefix(c.Name, web.SessionCookiePrefix) {
			return c.Name + "=" + c.Value, nil
		}
	}
	return "", fmt.Errorf("the link %s set no session (status %d)", link, resp.StatusCode)
}

// Fakes returns the fake backends the server has made, in order.
func (s *Server) Fakes() []*fake.Backend {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*fake.Backend(nil), s.fakes...)
}
