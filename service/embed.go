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
// queue (opts.Ticket), loading the model if needed. On a backend that
// answers several requests at once (the CPU engine) it takes a place
// among the generations, as one more of them: it neither waits for the
// running answers to end nor stops them. A backend that is not a
// backend.Embedder gives ErrNoEmbeddings, saying which it is.
func (m *Manager) Embed(ctx context.Context, model string, inputs []string, opts GenerateOptions) ([][]float32, int, error) {
	name, err := m.opts.Resolve(model)
	if err != nil {
		return nil, 0, err
	}
	joined, err := m.acquireRun(ctx, opts.Ticket, name)
	if err != nil {
		return nil, 0, err
	}
	grouped := joined != nil // a place in the group running on the model
	defer func() {
		if grouped {
			m.leaveGroup(opts.KeepAlive)
		} else {
			m.release(opts.KeepAlive)
		}
	}()
	be := joined
	if be == nil {
		if be, err = m.ensureLoaded(ctx, name, false); err != nil {
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
		} else {
			// the first of a group: generations may join it meanwhile
			grouped = m.openGroup(be, name)
		}
	}
	e, ok := be.(backend.Embedder)
	if !ok {
		return nil, 0, fmt.Errorf("%w: %s runs on the %s backend, which computes no embeddings (the in-process CPU engine does: choose it in the settings)", ErrNoEmbeddings, name, be.Kind())
	}
	return e.Embed(ctx, inputs)
}
