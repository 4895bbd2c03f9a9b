package history

import (
	"context"
	"sync"
	"time"
)

// Handle opens the store on first use and, while it cannot be opened (a
// lock held by another program, a full disk), tries again on later uses,
// at most every RetryEvery, so that a server keeps serving everything
// else and picks the history up once it is free.
type Handle struct {
	path string
	opts Options
	// RetryEvery is how long a failed open is remembered (default 2s).
	RetryEvery time.Duration

	mu     sync.Mutex // guards the fields below
	st     *Store
	err    error
	next   time.Time
	closed bool
}

// NewHandle returns a handle for the database at path; nothing is opened
// yet, but a folder and database files that exist are made private at
// once (folder 0700, files 0600), so that a history an older NPU Chat
// left readable is not readable until its first use. (Open does it
// again, and says when it cannot.)
func NewHandle(path string, opts Options) *Handle {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	_ = tighten(path) // best effort: Open does it again and says what fails
	return &Handle{path: path, opts: opts, RetryEvery: 2 * time.Second}
}

// Path is the database file.
func (h *Handle) Path() string { return h.path }

// Store returns the open store, opening it if needed.
func (h *Handle) Store(ctx context.Context) (*Store, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.st != nil {
		return h.st, nil
	}
	if h.closed {
		return nil, ErrClosed
	}
	if h.err != nil && h.opts.Now().Before(h.next) {
		return nil, h.err
	}
	st, err := Open(ctx, h.path, h.opts)
	if err != nil {
		h.err, h.next = err, h.opts.Now().Add(h.RetryEvery)
		return nil, err
	}
	h.st, h.err = st, nil
	return st, nil
}

// Problem is what the page should tell the user about the history: the
// last reason it could not be opened, or what Open had to do (a database
// moved aside); "" when all is well.
func (h *Handle) Problem() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.st != nil {
		return h.st.Notice()
	}
	if h.err != nil {
		return h.err.Error()
	}
	return ""
}

// Close closes the store if it is open; later uses fail with ErrClosed.
func (h *Handle) Close() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	if h.st == nil {
		return nil
	}
	err := h.st.Close()
	h.st = nil
	return err
}
