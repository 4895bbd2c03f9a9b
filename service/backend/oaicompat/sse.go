package oaicompat

import (
	"bufio"
	"bytes"
	"io"
	"strings"
)

// event is one dispatched server-sent event.
type event struct {
	// Name is the "event:" field; empty for the default "message" event.
	Name string
	// Data is the event's data lines joined with "\n".
	Data string
	// Error is the value of llama.cpp's non-standard "error:" field, which
	// some of its builds send instead of a data line when a request fails
	// inside the stream.
	Error string
}

// sseReader reads server-sent events as the WHATWG HTML standard defines
// them: lines end in CRLF, LF or CR; a blank line dispatches the event;
// lines starting with ':' are comments (keep-alives); several data lines
// are joined with "\n"; a single space after the colon is dropped.
type sseReader struct {
	sc        *bufio.Scanner
	firstLine bool
	onLine    func() // called for every line read, comments included; may be nil
}

// maxLine bounds one SSE line (a JSON chunk); a server sending more is
// broken, and the reader reports bufio.ErrTooLong.
const maxLine = 8 << 20

func newSSEReader(r io.Reader) *sseReader {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxLine)
	sc.Split(splitLines)
	return &sseReader{sc: sc, firstLine: true}
}

// Next returns the next event. At the end of the stream it returns
// io.EOF; an event whose blank line never came is still returned first
// (some servers end the stream with "data: [DONE]\n" and no blank line).
// A read error is returned as is.
func (r *sseReader) Next() (event, error) {
	var (
		ev      event
		data    []string
		pending bool
	)
	for r.sc.Scan() {
		if r.onLine != nil {
			r.onLine()
		}
		line := r.sc.Text()
		if r.firstLine {
			line = strings.TrimPrefix(line, "\uFEFF")
			r.firstLine = false
		}
		if line == "" {
			if !pending {
				continue
			}
			ev.Data = strings.Join(data, "\n")
			return ev, nil
		}
		if line[0] == ':' {
			continue // a comment: keep-alive or padding
		}
		field, value, found := strings.Cut(line, ":")
		if found {
			value = strings.TrimPrefix(value, " ")
		}
		switch field {
		case "data":
			data = append(data, value)
			pending = true
		case "event":
			ev.Name = value
			pending = true
		case "error":
			ev.Error = value
			pending = true
		}
		// "id", "retry" and unknown fields are ignored, as the standard says.
	}
	if err := r.sc.Err(); err != nil {
		return event{}, err
	}
	if pending {
		ev.Data = strings.Join(data, "\n")
		return ev, nil
	}
	return event{}, io.EOF
}

// splitLines is a bufio.SplitFunc for SSE lines: it accepts "\r\n", "\n"
// and a lone "\r" as line ends.
func splitLines(data []byte, atEOF bool) (advance int, token []byte, err error) {
	i := bytes.IndexAny(data, "\r\n")
	if i < 0 {
		if atEOF && len(data) > 0 {
			return len(data), data, nil
		}
		return 0, nil, nil
	}
	if data[i] == '\n' {
		return i + 1, data[:i], nil
	}
	// data[i] == '\r': a CRLF pair or a lone CR.
	if i+1 < len(data) {
		if data[i+1] == '\n' {
			return i + 2, data[:i], nil
		}
		return i + 1, data[:i], nil
	}
	if atEOF {
		return i + 1, data[:i], nil
	}
	return 0, nil, nil // need one more byte to tell CR from CRLF
}
