package childproc

import (
	"io"
	"strings"
	"sync"
)

// LogRing copies the child's output to a log writer and keeps its last
// lines, so that an error can quote what the child said before it failed.
// It is safe for concurrent writes (stdout and stderr share it).
type LogRing struct {
	mu      sync.Mutex
	w       io.Writer // may be nil
	lines   []string  // ring of the last cap(lines) lines
	total   uint64    // lines ever added
	partial []byte    // the line being written
}

const (
	maxLogLine    = 2000 // bytes kept of one line
	maxLogPartial = 8192 // a "line" longer than this is cut into pieces
)

// NewLogRing makes a LogRing that copies to w (nil: nowhere) and keeps
// the last keep lines (default 200).
func NewLogRing(w io.Writer, keep int) *LogRing {
	if keep <= 0 {
		keep = 200
	}
	return &LogRing{w: w, lines: make([]string, 0, keep)}
}

// Write copies p to the log writer and records its lines. It never fails:
// a broken log must not break the child's pipe.
func (r *LogRing) Write(p []byte) (int, error) {
	n := len(p)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.w != nil {
		r.w.Write(p)
	}
	for len(p) > 0 {
		i := indexByte(p, '\n')
		if i < 0 {
			r.partial = append(r.partial, p...)
			if len(r.partial) > maxLogPartial {
				r.add(string(r.partial))
				r.partial = r.partial[:0]
			}
			break
		}
		r.partial = append(r.partial, p[:i]...)
		r.add(string(r.partial))
		r.partial = r.partial[:0]
		p = p[i+1:]
	}
	return n, nil
}

// Note records a line of NPU Chat's own (e.g. "starting flm serve ...") in
// the log and the ring.
func (r *LogRing) Note(line string) {
	r.Write([]byte("npuchat: " + line + "\n"))
}

func indexByte(p []byte, b byte) int {
	for i, c := range p {
		if c == b {
			return i
		}
	}
	return -1
}

// add records one line; r.mu is held.
func (r *LogRing) add(line string) {
	line = strings.TrimRight(line, "\r")
	if len(line) > maxLogLine {
		line = line[:maxLogLine] + "…"
	}
	if len(r.lines) < cap(r.lines) {
		r.lines = append(r.lines, line)
	} else {
		r.lines[r.total%uint64(cap(r.lines))] = line
	}
	r.total++
}

// Seq is the count of lines recorded so far.
func (r *LogRing) Seq() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.total
}

// Since returns at most max of the lines recorded after Seq returned seq,
// the newest last, plus the unfinished line if any.
func (r *LogRing) Since(seq uint64, max int) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := r.total - min(seq, r.total)
	n = min(n, uint64(len(r.lines)), uint64(max))
	out := make([]string, 0, n+1)
	for i := r.total - n; i < r.total; i++ {
		out = append(out, r.lines[i%uint64(cap(r.lines))])
	}
	if len(r.partial) > 0 && len(out) < max {
		out = append(out, strings.TrimRight(string(r.partial), "\r"))
	}
	return out
}
