package web

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/npuchat/npuchat/enginekind"
	"github.com/npuchat/npuchat/service"
	"github.com/npuchat/npuchat/service/backend"
	"github.com/npuchat/npuchat/service/backend/fake"
)

// newDriverServer is a Server over a fake backend for tests of the driver
// itself (no listener: handlers are called with httptest recorders).
func newDriverServer(t *testing.T, fo fake.Options, engines ...string) *Server {
	t.Helper()
	if len(engines) == 0 {
		engines = []string{"cpu"}
	}
	mgr := service.New(service.Options{
		Engines: func(string) []enginekind.Kind {
			ks := make([]enginekind.Kind, len(engines))
			for i, e := range engines {
				ks[i] = enginekind.Kind(e)
			}
			return ks
		},
		NewBackend: func(_ context.Context, model string, kind enginekind.Kind) (backend.Backend, error) {
			o := fo
			o.Name, o.Kind = model, kind
			if string(kind) != engines[len(engines)-1] {
				// Every engine but the last fails, to exercise fallback.
				o.LoadErr = fmt.Errorf("no %s here", kind)
			}
			return fake.New(o), nil
		},
		KeepAlive: -1,
	})
	t.Cleanup(func() { mgr.Close(context.Background()) })
	s, err := NewServer(mgr, Options{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// recordingWriter is an answerWriter that records what the driver asked
// of it.
type recordingWriter struct {
	calls []string
}

func (w *recordingWriter) piece(a *answer, t backend.Token) error {
	w.calls = append(w.calls, "piece:"+t.Text)
	return nil
}
func (w *recordingWriter) finish(a *answer) error {
	w.calls = append(w.calls, "finish:"+a.Result.FinishReason)
	return nil
}
func (w *recordingWriter) fail(a *answer, ae *apiError) {
	w.calls = append(w.calls, fmt.Sprintf("fail:%d", ae.status))
}

// TestDriverObserverSeesEveryPieceAndTheEnd: the hook the conversation
// API stores answers through sees each piece before the writer does, and
// the end with the result, timings, engine and fallback reason.
func TestDriverObserverSeesEveryPieceAndTheEnd(t *testing.T) {
	s := newDriverServer(t, fake.Options{TokenDelay: time.Millisecond}, "npu", "cpu")
	out := &recordingWriter{}
	var seen []string
	var end *answer
	obs := &observer{
		piece: func(a *answer, tok backend.Token) error {
			seen = append(seen, tok.Text)
			if len(out.calls) != len(seen)-1 {
				return errors.New("the writer saw the piece before the observer")
			}
			return nil
		},
		end: func(a *answer) { end = a },
	}
	r := httptest.NewRequest("POST", "/x", nil)
	req := &backend.Request{Model: "m", Messages: []backend.Message{{Role: "user", Content: "a b c"}}}
	a := newAnswer("t-", "m", time.Now())
	s.drive(httptest.NewRecorder(), r, a, &call{req: req, out: out, observe: obs})
	if got := strings.Join(seen, ""); got != "echo: a b c" {
		t.Fatalf("observer saw %q", got)
	}
	if end == nil || end.Err != nil || end.Result.FinishReason != "stop" || end.Result.CompletionTokens != 4 {
		t.Fatalf("end %+v", end)
	}
	if end.Backend != "cpu" || !strings.Contains(end.Fallback, "no npu here") {
		t.Fatalf("backend %q fallback %q", end.Backend, end.Fallback)
	}
	if end.FirstToken <= 0 || end.Total < end.FirstToken || end.TokensPerSecond() <= 0 {
		t.Fatalf("timings: first %v total %v tok/s %v", end.FirstToken, end.Total, end.TokensPerSecond())
	}
	if want := "piece:echo: ,piece:a ,piece:b ,piece:c,finish:stop"; strings.Join(out.calls, ",") != want {
		t.Fatalf("writer calls %v", out.calls)
	}
}

// TestDriverObserverErrorEndsTheAnswer: a store that fails (a full disk)
// stops the generation and the answer ends with an error, not silently.
func TestDriverObserverErrorEndsTheAnswer(t *testing.T) {
	s := newDriverServer(t, fake.Options{})
	out := &recordingWriter{}
	var end *answer
	stored := 0
	obs := &observer{
		piece: func(a *answer, tok backend.Token) error {
			if stored == 1 {
				return errors.New("disk full")
			}
			stored++
			return nil
		},
		end: func(a *answer) { end = a },
	}
	req := &backend.Request{Model: "m", Messages: []backend.Message{{Role: "user", Content: "a b c"}}}
	s.drive(httptest.NewRecorder(), httptest.NewRequest("POST", "/x", nil), newAnswer("t-", "m", time.Now()), &call{req: req, out: out, observe: obs})
	if end == nil || end.Err == nil || !strings.Contains(end.Err.Error(), "disk full") {
		t.Fatalf("end %+v", end)
	}
	// The piece the store refused is not part of the answer: only what
	// was stored (and shown) is counted.
	if end.Pieces != 1 || end.Text.String() != "echo: " {
		t.Fatalf("the answer counts %d pieces, %q, after the store refused the second", end.Pieces, end.Text.String())
	}
	if got := strings.Join(out.calls, ","); got != "piece:echo: ,fail:500" {
		t.Fatalf("writer calls %s", got)
	}
}

// TestSmallErrorMessages: a bad request's message is the reason, not the
// reason followed by ": bad request".
func TestSmallErrorMessages(t *testing.T) {
	s := newDriverServer(t, fake.Options{})
	ae := s.classify(fmt.Errorf("the prompt is empty: %w", backend.ErrBadRequest))
	if ae.msg != "the prompt is empty" || ae.status != 400 {
		t.Errorf("classify: %d %q", ae.status, ae.msg)
	}
}
