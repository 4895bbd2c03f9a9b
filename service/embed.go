package service

import (
	"context"
	"errors"
	"fmt"

	"github.com/npuchat/npuchat/service/backend"
)

// ErrNoEmbeddings is an embeddings request for a model whose backend
// computes none (FastFlowLM, a remote server): the client's request
// cannot be served (400), not a failure.
var ErrNoEmbeddings = errors.New("embeddings are not available")

// Embed computes the embeddings of inputs with model, in its turn in the
// queue (opts.Ticket), loading the model if needed. A backend that is
// not a backend.Embedder gives ErrNoEmbeddings, saying which it is.
func (m *Manager) Embed(ctx context.Context, model string, inputs []string, opts GenerateOptions) ([][]float32, int, error) {
	name, err := m.opts.Resolve(model)
	if err != nil {
		return nil, 0, err
	}
	if err := m.acquire(ctx, opts.Ticket); err != nil {
		return nil, 0, err
	}
	defer m.release(opts.KeepAlive)
	be, err := m.ensureLoaded(ctx, name, false)
	if err != nil {
		return nil, 0, err
	}
	// A serving backend without embeddings (FastFlowLM) sends them to
	// the engine beside it, as it does tools or JSON (route).
	side, _, err := m.route(ctx, name, be, &backend.Request{Model: name, Embed: true})
	if err != nil {
		return nil, 0, err
	}
	if side != nil {
		be = side
	}
	e, ok := be.(backend.Embedder)
	if !ok {
		return nil, 0, fmt.Errorf("%w: %s runs on the %s backend, which computes no embeddings (the in-process CPU engine does: choose it in the settings)", ErrNoEmbeddings, name, be.Kind())
	}
	return e.Embed(ctx, inputs)
}
