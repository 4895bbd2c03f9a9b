package hub

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// writeError marks a failure to write the local file (disk full,
// permissions): not a network problem, so not retried.
type writeError struct{ err error }

func (e *writeError) Error() string { return e.err.Error() }
func (e *writeError) Unwrap() error { return e.err }

// PartialName is the name of the file a download of name is written to
// until it is complete and verified.
func PartialName(name string) string { return name + ".partial" }

// Download fetches f from repo at revision into dir/f.Path. It writes
// dir/f.Path.partial, resuming one left by an earlier run with a Range
// request (starting over when the server answers 200), verifies the
// hash, and only then renames the file into place. A file already in
// place is kept when its hash matches. Network errors and 5xx answers are
// retried with backoff; a hash mismatch discards the bytes and fetches
// again, once (pass a commit id as revision, from Commit, so that a
// change to the repository cannot cause it). progress may be nil.
func (c *Client) Download(ctx context.Context, repo, revision string, f File, dir string, progress func(Progress)) error {
	what := fmt.Sprintf("download %s from %s", f.Path, repo)
	final, err := Join(dir, f.Path)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if _, err := os.Stat(final); err == nil {
		if err := Verify(ctx, final, f); err == nil {
			if progress != nil {
				progress(Progress{File: f.Path, Bytes: f.Size, Total: f.Size, Done: true})
			}
			return nil
		} else if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	src, err := c.ResolveURL(repo, revision, f.Path)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if err := os.MkdirAll(filepath.Dir(final), 0o755); err != nil {
		return fmt.Errorf("%s: %w", what, &writeError{err})
	}
	partial := PartialName(final)
	failures, mismatches := 0, 0
	for {
		before := fileSize(partial)
		err := c.fetch(ctx, src, f, partial, what, progress)
		if err == nil {
			err = Verify(ctx, partial, f)
			if err != nil {
				// Never keep or install bytes that fail their hash.
				os.Remove(partial)
				if ctx.Err() == nil && errors.Is(err, ErrHashMismatch) {
					// Once may be a damaged transfer; twice means the
					// server sends other bytes than it listed: another
					// 2 GB attempt would not help.
					mismatches++
					if mismatches >= 2 {
						return fmt.Errorf("%s: %w, twice; the repository may have changed during the download, or the server or a proxy alters the file; try again later", what, err)
					}
					err = fmt.Errorf("%s: %w", what, err)
				}
			}
		}
		if err == nil {
			if err := os.Rename(partial, final); err != nil {
				return fmt.Errorf("%s: %w", what, err)
			}
			if progress != nil {
				progress(Progress{File: f.Path, Bytes: f.Size, Total: f.Size, Done: true})
			}
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("%s: %w", what, ctx.Err())
		}
		if !retryable(ctx, err) {
			return err
		}
		// An attempt that made progress does not count against the limit:
		// a long file on a flaky line still finishes.
		if fileSize(partial) > before {
			failures = 0
		}
		failures++
		if failures >= c.attempts() {
			return err
		}
		if err := c.sleep(ctx, c.backoff(failures)); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
	}
}

func fileSize(name string) int64 {
	st, err := os.Stat(name)
	if err != nil {
		return 0
	}
	return st.Size()
}

// fetch makes one attempt to complete partial from src.
func (c *Client) fetch(ctx context.Context, src string, f File, partial, what string, progress func(Progress)) error {
	have := fileSize(partial)
	if have > f.Size {
		os.Remove(partial)
		have = 0
	}
	if have == f.Size && f.Size > 0 {
		return nil // complete; the caller verifies it
	}
	// Cancel the request when no byte arrives for IdleTimeout.
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	idle := c.IdleTimeout
	if idle <= 0 {
		idle = 60 * time.Second
	}
	var (
		mu      sync.Mutex
		stalled bool
	)
	timer := time.AfterFunc(idle, func() { mu.Lock(); stalled = true; mu.Unlock(); cancel() })
	defer timer.Stop()

	req, err := c.newRequest(rctx, src)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if have > 0 {
		req.Header.Set("Range", "bytes="+strconv.FormatInt(have, 10)+"-")
	}
	resp, err := c.http().Do(req)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	defer resp.Body.Close()
	flag := os.O_WRONLY | os.O_CREATE | os.O_APPEND
	switch {
	case resp.StatusCode == http.StatusPartialContent && have > 0 && rangeStart(resp.Header.Get("Content-Range")) == have:
		// resume
	case resp.StatusCode == http.StatusOK || resp.StatusCode == http.StatusPartialContent:
		// The server ignored Range (or answered another range): start over.
		if resp.StatusCode == http.StatusPartialContent {
			os.Remove(partial)
			return fmt.Errorf("%s: the server answered range %q to a request from byte %d; starting over", what, resp.Header.Get("Content-Range"), have)
		}
		flag = os.O_WRONLY | os.O_CREATE | os.O_TRUNC
		have = 0
	case resp.StatusCode == http.StatusRequestedRangeNotSatisfiable:
		os.Remove(partial)
		return fmt.Errorf("%s: the server refused to resume from byte %d; starting over", what, have)
	default:
		err, _ := statusError(resp, what)
		return err
	}
	out, err := c.fs().OpenFile(partial, flag, 0o644)
	if err != nil {
		return fmt.Errorf("%s: %w", what, &writeError{err})
	}
	pw := &progressWriter{c: c, file: f.Path, have: have, total: f.Size, start: c.now(), startHave: have, fn: progress, reset: func() { timer.Reset(idle) }}
	// Never take more than the listing announced (plus one byte, to
	// notice): a server that streams forever cannot fill the disk.
	_, cerr := io.Copy(io.MultiWriter(&tagWriter{out}, pw), io.LimitReader(resp.Body, f.Size-have+1))
	if cerr == nil {
		if err := out.Sync(); err != nil {
			cerr = &writeError{err}
		}
	}
	if err := out.Close(); err != nil && cerr == nil {
		cerr = &writeError{err}
	}
	if cerr != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		mu.Lock()
		s := stalled
		mu.Unlock()
		if s {
			return fmt.Errorf("%s: no data for %s", what, idle)
		}
		return fmt.Errorf("%s: %w", what, cerr)
	}
	if got := fileSize(partial); got > f.Size {
		os.Remove(partial)
		return fmt.Errorf("%s: the server sent more than the %d bytes the listing announced (did the repository change during the download?)", what, f.Size)
	} else if got < f.Size {
		return fmt.Errorf("%s: the connection ended at byte %d of %d", what, got, f.Size)
	}
	return nil
}

// rangeStart parses the first byte of "bytes 100-199/200"; -1 if absent.
func rangeStart(h string) int64 {
	h = strings.TrimSpace(h)
	if !strings.HasPrefix(h, "bytes ") {
		return -1
	}
	h = strings.TrimPrefix(h, "bytes ")
	i := strings.IndexByte(h, '-')
	if i < 0 {
		return -1
	}
	n, err := strconv.ParseInt(h[:i], 10, 64)
	if err != nil {
		return -1
	}
	return n
}

// tagWriter marks write errors so that they are not retried.
type tagWriter struct{ w io.Writer }

func (t *tagWriter) Write(p []byte) (int, error) {
	n, err := t.w.Write(p)
	if err != nil {
		err = &writeError{err}
	}
	return n, err
}

// progressWriter counts bytes and sends throttled progress events.
type progressWriter struct {
	c           *Client
	file        string
	have, total int64
	startHave   int64
	start, last time.Time
	fn          func(Progress)
	reset       func()
}

func (p *progressWriter) Write(b []byte) (int, error) {
	p.reset()
	p.have += int64(len(b))
	if p.fn == nil {
		return len(b), nil
	}
	every := p.c.ProgressEvery
	if every <= 0 {
		every = 200 * time.Millisecond
	}
	now := p.c.now()
	if now.Sub(p.last) < every && p.have < p.total {
		return len(b), nil
	}
	p.last = now
	ev := Progress{File: p.file, Bytes: p.have, Total: p.total}
	if el := now.Sub(p.start).Seconds(); el > 0 {
		ev.Rate = float64(p.have-p.startHave) / el
		if ev.Rate > 0 && p.total > p.have {
			ev.ETA = time.Duration(float64(p.total-p.have) / ev.Rate * float64(time.Second))
		}
	}
	p.fn(ev)
	return len(b), nil
}
