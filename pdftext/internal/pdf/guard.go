package pdf

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"
)

// Limits bound what reading one file may cost.
type Limits struct {
	StreamBytes int64 // decoded bytes of one stream at most
	TotalBytes  int64 // decoded bytes of all the file's streams together at most
	Objects     int   // entries of the cross-reference table at most
	Depth       int   // levels of the page tree at most

	// Deadline, when set, ends the read with ErrTimeUp: checked where
	// the context is, without a timer.
	Deadline time.Time
}

// ErrTimeUp says Limits.Deadline has passed.
var ErrTimeUp = errors.New("the time to read this PDF is up")

// LimitError says which limit a file broke.
type LimitError struct {
	What  string // "stream", "file", "objects", "depth"
	Limit int64
}

func (e *LimitError) Error() string {
	switch e.What {
	case "stream":
		return fmt.Sprintf("a stream of this PDF decodes to more than %d MiB", e.Limit>>20)
	case "file":
		return fmt.Sprintf("this PDF's streams decode to more than %d MiB together", e.Limit>>20)
	case "objects":
		return fmt.Sprintf("this PDF claims more than %d objects", e.Limit)
	case "depth":
		return fmt.Sprintf("this PDF's page tree is more than %d levels deep", e.Limit)
	}
	return "this PDF breaks a limit: " + e.What
}

// ErrLoop says a chain of references in the file comes back to itself.
var ErrLoop = errors.New("this PDF refers to itself in a loop (its page tree or another chain of references)")

// stop carries an error that must end the whole read (a limit, a loop, the
// context) through the package's panic-based parsing: every recover in the
// package re-panics it, and the exported entry points turn it into their
// error.
type stop struct{ err error }

// guard is one file's budget: the context, the limits and what has been
// spent.
type guard struct {
	ctx     context.Context
	lim     Limits
	decoded int64 // decoded stream bytes so far
	spent   int64 // decoded plus what stream opens cost: held to lim.TotalBytes
	ticks   uint
}

// check ends the read if the context is done or the deadline passed.
func (g *guard) check() {
	if err := g.ctx.Err(); err != nil {
		panic(stop{err})
	}
	if !g.lim.Deadline.IsZero() && !time.Now().Before(g.lim.Deadline) {
		panic(stop{ErrTimeUp})
	}
}

// tick is check for tight loops: it asks the context every 256 calls.
func (g *guard) tick() {
	g.ticks++
	if g.ticks&255 == 0 {
		g.check()
	}
}

// streamOpenCost is what opening a stream costs of Limits.TotalBytes
// before any byte is decoded (so 64 MiB allows 32,768 opens).
const streamOpenCost = 2 << 10

// spend counts n bytes against the file's cap.
func (g *guard) spend(n int64) {
	g.spent += n
	if g.spent > g.lim.TotalBytes {
		panic(stop{&LimitError{What: "file", Limit: g.lim.TotalBytes}})
	}
}

// fail ends the read with err.
func (g *guard) fail(err error) {
	panic(stop{err})
}

// countingReader counts a stream's decoded bytes against the stream's and
// the file's caps, and checks the context on every read. Its error is
// sticky.
type countingReader struct {
	r   io.Reader
	g   *guard
	n   int64
	err error
}

func (c *countingReader) Read(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	c.g.check()
	// Never ask for more than the caps leave plus one byte, so a bomb is
	// never decoded past them.
	room := min(c.g.lim.StreamBytes-c.n, c.g.lim.TotalBytes-c.g.spent) + 1
	if int64(len(p)) > room {
		p = p[:room]
	}
	n, err := c.r.Read(p)
	c.n += int64(n)
	c.g.decoded += int64(n)
	c.g.spent += int64(n)
	switch {
	case c.n > c.g.lim.StreamBytes:
		c.err = stop{&LimitError{What: "stream", Limit: c.g.lim.StreamBytes}}
		panic(c.err)
	case c.g.spent > c.g.lim.TotalBytes:
		c.err = stop{&LimitError{What: "file", Limit: c.g.lim.TotalBytes}}
		panic(c.err)
	}
	return n, err
}

func (s stop) Error() string { return s.err.Error() }
func (s stop) Unwrap() error { return s.err }

// catch turns a panic into *err: a stop into its error, anything else
// into a "damaged" error. Deferred by the exported entry points.
func catch(err *error) {
	v := recover()
	if v == nil {
		return
	}
	if s, ok := v.(stop); ok {
		*err = s.err
		return
	}
	if e, ok := v.(error); ok {
		*err = fmt.Errorf("malformed PDF: %w", e)
		return
	}
	*err = fmt.Errorf("malformed PDF: %v", v)
}

// passStop re-panics v if it is a stop; recovers that mean "skip this
// malformed piece and go on" call it first.
func passStop(v any) {
	if s, ok := v.(stop); ok {
		panic(s)
	}
}
