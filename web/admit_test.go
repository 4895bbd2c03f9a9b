package web_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"runtime"
	"runtime/metrics"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/npuchat/npuchat/enginekind"
	"github.com/npuchat/npuchat/service"
	"github.com/npuchat/npuchat/service/backend"
	"github.com/npuchat/npuchat/service/backend/fake"
	"github.com/npuchat/npuchat/service/servicetest"
	"github.com/npuchat/npuchat/web"
)

// pipeListener is a net.Listener over net.Pipe, so that a server runs
// inside a synctest bubble: its reads block durably, and deadlines run
// on the bubble's clock.
type pipeListener struct {
	conns  chan net.Conn
	closed chan struct{}
	once   sync.Once
}

func newPipeListener() *pipeListener {
	return &pipeListener{conns: make(chan net.Conn), closed: make(chan struct{})}
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error {
	l.once.Do(func() { close(l.closed) })
	return nil
}

// Addr is a loopback address on port 8001: the Host check wants it.
func (l *pipeListener) Addr() net.Addr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8001} }

// dial connects a client to the server.
func (l *pipeListener) dial(ctx context.Context, _, _ string) (net.Conn, error) {
	client, server := net.Pipe()
	select {
	case l.conns <- server:
		return client, nil
	case <-l.closed:
		return nil, net.ErrClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// pipeServer starts a server over a fake backend on a pipeListener in
// the calling synctest bubble; it stops, and every connection it was
// given closes, when the test ends.
func pipeServer(t *testing.T, wo web.Options, queue int) (*service.Manager, *pipeListener, *[]net.Conn) {
	reg := &servicetest.Registry{}
	reg.Add(servicetest.Entry{Desc: service.ModelDesc{Name: "minicpm5:2b", Installed: true, ContextLength: 4096}})
	mgr := service.New(service.Options{
		Resolve: reg.Resolve, Models: reg.Models, KeepAlive: -1, QueueSize: queue,
		Engines: func(string) []enginekind.Kind { return []enginekind.Kind{enginekind.CPU} },
		NewBackend: func(_ context.Context, model string, kind enginekind.Kind) (backend.Backend, error) {
			return fake.New(fake.Options{Name: model, Kind: kind}), nil
		},
	})
	wo.Addr = "127.0.0.1:8001"
	srv, err := web.NewServer(mgr, wo)
	if err != nil {
		t.Fatal(err)
	}
	ln := newPipeListener()
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, ln, nil) }()
	conns := &[]net.Conn{}
	t.Cleanup(func() { // also after a failure: the bubble must end with nothing blocked
		for _, c := range *conns {
			c.Close()
		}
		cancel()
		if err := <-served; err != nil {
			t.Errorf("serve: %v", err)
		}
		mgr.Close(context.Background())
	})
	return mgr, ln, conns
}

// TestBodilessConnectionsCannotRefuseAChat (issue 38, item 5): nine
// connections that sent headers and part of a body held every place in
// the queue until the admit timeout, and reconnecting at once kept
// generation closed (19 of 19 chats got 429). A place is taken only
// once the whole body is here: with many more holders than places, and
// holders of large half-sent bodies using up the memory set aside for
// bodies arriving, a complete request is answered; the holders' bodies
// still end with 408 at the body timeout, having held no place.
func TestBodilessConnectionsCannotRefuseAChat(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mgr, ln, conns := pipeServer(t, web.Options{BodyTimeout: time.Minute, QueuedBodyBytes: 1 << 20}, 2)
		ctx := context.Background()
		const holders, bigHolders = 9, 3
		head := "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:8001\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"model\": "
		answers := make(chan string, holders+bigHolders)
		for range holders {
			conn, err := ln.dial(ctx, "", "")
			if err != nil {
				t.Fatal(err)
			}
			*conns = append(*conns, conn)
			go func() {
				if _, err := io.WriteString(conn, head); err != nil {
					answers <- "write: " + err.Error()
					return
				}
				b, _ := io.ReadAll(conn) // the answer, when the body timeout ends the wait
				answers <- string(b)
			}()
		}
		// Holders of large bodies, half sent, use up the memory set
		// aside for bodies arriving (QueuedBodyBytes).
		bigHead := "POST /api/chat HTTP/1.1\r\nHost: 127.0.0.1:8001\r\nContent-Type: application/json\r\nContent-Length: 8000000\r\n\r\n{\"model\": \"" + strings.Repeat("m", 600<<10)
		for range bigHolders {
			conn, err := ln.dial(ctx, "", "")
			if err != nil {
				t.Fatal(err)
			}
			*conns = append(*conns, conn)
			go func() {
				if _, err := io.WriteString(conn, bigHead); err != nil {
					answers <- "write: " + err.Error()
					return
				}
				b, _ := io.ReadAll(conn)
				answers <- string(b)
			}()
		}
		synctest.Wait() // every holder's handler waits for the rest of its body

		client := &http.Client{Transport: &http.Transport{DialContext: ln.dial}}
		t.Cleanup(client.CloseIdleConnections)
		body := `{"model": "minicpm5:2b", "messages": [{"role": "user", "content": "hi"}]}`
		for i := range 3 {
			resp, err := client.Post("http://127.0.0.1:8001/v1/chat/completions", "application/json", strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			out, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || !strings.Contains(string(out), "echo: hi") {
				t.Fatalf("chat %d beside %d connections holding their bodies: %d %s", i, holders, resp.StatusCode, out)
			}
		}
		// The half-sent large bodies hold the memory set aside: a large
		// complete body is refused (and read to its end, so the answer
		// is a clean 429), which shows they do.
		big := `{"model": "minicpm5:2b", "messages": [{"role": "user", "content": "` + strings.Repeat("w", 600<<10) + `"}]}`
		resp, err := client.Post("http://127.0.0.1:8001/v1/chat/completions", "application/json", strings.NewReader(big))
		if err != nil {
			t.Fatal(err)
		}
		out, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 429 || !strings.Contains(string(out), "large requests arriving at once") {
			t.Errorf("a large body while the memory for bodies is used up: %d %s", resp.StatusCode, out)
		}
		if st := mgr.Status(); st.Waiting != 0 {
			t.Errorf("%d places taken by bodies that never came", st.Waiting)
		}

		time.Sleep(time.Minute) // the bubble's clock: the holders' body timeout
		for range holders + bigHolders {
			if got := <-answers; !strings.Contains(got, " 408 ") {
				t.Errorf("a holder's answer at the body timeout: %q", got)
			}
		}
	})
}

// TestBodilessConnectionsHoldLittleMemory: a place in the queue no longer
// bounds how many bodies are being read, so what one costs is bounded
// instead: a connection that declares an 8 MB body and sends none holds
// a few KiB (its buffer grows with what comes), not its Content-Length
// nor the 256 KiB a body may hold without the budget.
func TestBodilessConnectionsHoldLittleMemory(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, ln, conns := pipeServer(t, web.Options{BodyTimeout: time.Minute}, 2)
		heap := func() uint64 {
			runtime.GC()
			s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
			metrics.Read(s)
			return s[0].Value.Uint64()
		}
		synctest.Wait()
		before := heap()
		const holders = 200
		head := "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:8001\r\nContent-Type: application/json\r\nContent-Length: 8000000\r\n\r\n{"
		for range holders {
			conn, err := ln.dial(context.Background(), "", "")
			if err != nil {
				t.Fatal(err)
			}
			*conns = append(*conns, conn)
			go io.WriteString(conn, head)
		}
		synctest.Wait() // every holder's handler waits for the rest of its body
		grew := heap() - min(before, heap())
		if per := grew / holders; per > 64<<10 {
			t.Errorf("each connection holding a declared 8 MB body holds %d KiB (%d MiB for %d)", per>>10, grew>>20, holders)
		}
	})
}
