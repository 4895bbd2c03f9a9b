package service

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/npuchat/npuchat/enginekind"
	"github.com/npuchat/npuchat/service/backend"
	"github.com/npuchat/npuchat/service/backend/fake"
)

// embedFake answers n generations at once and computes embeddings, as
// the CPU engine does.
type embedFake struct {
	parallelFake
	embeds *atomic.Int32
}

func (e embedFake) Embed(ctx context.Context, inputs []string) ([][]float32, int, error) {
	e.embeds.Add(1)
	out := make([][]float32, len(inputs))
	for i := range out {
		out[i] = []float32{1, 0}
	}
	return out, len(inputs), nil
}

// TestEmbedJoinsTheRunningGroup: embeddings asked while answers stream
// on a backend that answers several at once take a place beside them:
// they are computed before the answers end (the group does not drain
// for them), and a generation can join while they run.
func TestEmbedJoinsTheRunningGroup(t *testing.T) {
	var embeds atomic.Int32
	var mu sync.Mutex
	var made []embedFake
	// The answer holds before each token until the gate opens: it is
	// still streaming for as long as the embeddings take.
	gate := make(chan struct{})
	hold := func(ctx context.Context) error {
		select {
		case <-gate:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	m := New(Options{QueueSize: 4, KeepAlive: -1, NewBackend: func(_ context.Context, model string, kind enginekind.Kind) (backend.Backend, error) {
		b := embedFake{parallelFake{fake.New(fake.Options{Name: model, Kind: kind, BeforeToken: hold,
			Reply: func(*backend.Request) string { return "one two three four five six seven eight" }}), 3, new(atomic.Int32)}, &embeds}
		mu.Lock()
		made = append(made, b)
		mu.Unlock()
		return b, nil
	}})
	t.Cleanup(func() { m.Close(context.Background()) })
	if _, _, err := m.Embed(t.Context(), "m", []string{"x"}, GenerateOptions{}); err != nil { // loads it
		t.Fatal(err)
	}
	var ended atomic.Bool
	errs := make(chan error, 1)
	go func() { _, err := gen(m, t.Context(), "m"); ended.Store(true); errs <- err }()
	waitFor(t, "an answer streaming", func() bool { return m.Status().Running == 1 })
	var vecs [][]float32
	var n int
	var err error
	returns(t, "embeddings beside a held answer", func() { vecs, n, err = m.Embed(t.Context(), "m", []string{"a", "b"}, GenerateOptions{}) })
	close(gate)
	if err != nil || len(vecs) != 2 || n != 2 {
		t.Fatalf("embeddings beside a stream: %v, %d vectors", err, len(vecs))
	}
	if ended.Load() {
		t.Errorf("the embeddings waited for the answer streaming beside them to end")
	}
	if err := <-errs; err != nil {
		t.Error(err)
	}
	if got := embeds.Load(); got != 2 {
		t.Errorf("%d embedding calls, want 2", got)
	}
	if len(made) != 1 {
		t.Errorf("%d backends made, want 1 (no reload for the embeddings)", len(made))
	}
}
