package pdftext

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/npuchat/npuchat/pdftext/internal/pdf"
)

// Limits bound one extraction.
type Limits struct {
	Pages int           // pages read at most (the rest are left out, Truncated set)
	Chars int           // characters of text kept at most; decoding stops soon after
	Time  time.Duration // how long the extraction may take; it stops there

	// StreamBytes and FileBytes cap the bytes decoded from the file's
	// compressed streams, one stream and all together: a few megabytes of
	// FlateDecode can hold gigabytes.
	StreamBytes int64
	FileBytes   int64
}

// DefaultLimits fit a chat attachment: a model reads far less than this.
// A page's text rarely takes 100 KiB of content stream, and a 500-page
// book's streams together a few tens of MiB; the caps are well above.
// Decoding streams (4 KiB at a time), not holding them: what an
// extraction holds is the objects it has parsed, the decoded object
// streams, and a page's characters (40 bytes each, at most Chars).
var DefaultLimits = Limits{Pages: 500, Chars: 1 << 20, Time: 15 * time.Second, StreamBytes: 16 << 20, FileBytes: 64 << 20}

// maxObjects bounds the cross-reference table: a PDF the page may send
// (8 MiB) holds far fewer objects, and each entry costs memory.
const maxObjects = 1 << 20

// maxTreeDepth bounds the page tree's levels (a balanced tree of a
// million pages is under ten deep).
const maxTreeDepth = 64

// Result is a PDF's text.
type Result struct {
	Text      string `json:"text"`
	Pages     int    `json:"pages"`     // pages in the file
	Read      int    `json:"read"`      // pages read
	Truncated bool   `json:"truncated"` // a limit left text out
}

// ErrNoText says the PDF has pages but no text to take (a scan).
var ErrNoText = errors.New("this PDF has no text to read (it may be scanned images): copy the text out of it another way, or describe it in the message")

// stats are what one extraction cost: tests read them to see that a
// hostile file was stopped early.
type stats struct {
	decoded int64 // bytes decoded from the file's streams
}

// Extract returns the text of the PDF in data, page by page, a line per
// row of text. It runs in the caller's goroutine and returns by
// lim.Time or when ctx ends: the parser checks both in every loop, so
// nothing goes on after it returns.
func Extract(ctx context.Context, data []byte, lim Limits) (Result, error) {
	res, _, err := extract(ctx, data, lim)
	return res, err
}

func extract(ctx context.Context, data []byte, lim Limits) (res Result, st stats, err error) {
	d := DefaultLimits
	if lim.Time <= 0 {
		lim.Time = d.Time
	}
	if lim.Pages <= 0 {
		lim.Pages = d.Pages
	}
	if lim.Chars <= 0 {
		lim.Chars = d.Chars
	}
	if lim.StreamBytes <= 0 {
		lim.StreamBytes = d.StreamBytes
	}
	if lim.FileBytes <= 0 {
		lim.FileBytes = d.FileBytes
	}
	if !bytes.HasPrefix(bytes.TrimLeft(data[:min(len(data), 1024)], "\x00\t\n\r "), []byte("%PDF-")) {
		return Result{}, st, errors.New("this file is not a PDF (it does not start with %PDF-)")
	}
	var r *pdf.Reader
	defer func() {
		if r != nil {
			st.decoded = r.Decoded()
		}
		if err != nil {
			res, err = Result{}, explain(lim, err)
		}
	}()
	r, err = pdf.NewReader(ctx, bytes.NewReader(data), int64(len(data)), pdf.Limits{
		StreamBytes: lim.StreamBytes, TotalBytes: lim.FileBytes, Objects: maxObjects, Depth: maxTreeDepth,
		Deadline: time.Now().Add(lim.Time),
	})
	if err != nil {
		return Result{}, st, err
	}
	pages, total, err := r.Pages(lim.Pages)
	if err != nil {
		return Result{}, st, err
	}
	res.Pages = total
	res.Truncated = total > len(pages)
	var b strings.Builder
	chars := 0
	for i, p := range pages {
		// Pieces of text are about one character each; the slack covers
		// the line breaks TJ adds, so a page that fits is not cut.
		pieces, full, err := p.Text(lim.Chars - chars + 256)
		if err != nil {
			return Result{}, st, pageError{i + 1, err}
		}
		text := pageText(pieces)
		res.Read = i + 1
		if b.Len() > 0 && text != "" {
			b.WriteString("\n\n")
		}
		if n := utf8.RuneCountInString(text); chars+n > lim.Chars || !full {
			text = cutRunes(text, lim.Chars-chars)
			b.WriteString(text)
			res.Truncated = true
			break
		} else {
			chars += n
		}
		b.WriteString(text)
	}
	res.Text = b.String()
	if strings.TrimSpace(res.Text) == "" && res.Pages > 0 {
		return Result{}, st, ErrNoText
	}
	return res, st, nil
}

// pageError says which page could not be read.
type pageError struct {
	page int
	err  error
}

func (e pageError) Error() string { return fmt.Sprintf("page %d: %v", e.page, e.err) }
func (e pageError) Unwrap() error { return e.err }

// explain turns an error of the parser into a sentence a person can act
// on.
func explain(lim Limits, err error) error {
	var limit *pdf.LimitError
	var page pageError
	switch {
	case errors.Is(err, ErrNoText):
		return err
	case errors.Is(err, pdf.ErrTimeUp):
		return fmt.Errorf("reading the PDF's text took longer than %s: attach a smaller PDF, or the pages that matter", lim.Time)
	case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		return err
	case errors.As(err, &limit):
		return fmt.Errorf("%s, more than a chat attachment may hold: attach a smaller PDF, or the pages that matter", limit.Error())
	case errors.Is(err, pdf.ErrLoop):
		return fmt.Errorf("%w: it is damaged or made to hang a reader; try saving it again or printing it to a new PDF", pdf.ErrLoop)
	case errors.Is(err, pdf.ErrInvalidPassword), strings.Contains(err.Error(), "encrypt"), strings.Contains(err.Error(), "password"):
		return errors.New("this PDF is protected with a password: save a copy without one and attach that")
	case errors.As(err, &page):
		return fmt.Errorf("page %d of this PDF could not be read (%v): it may be damaged", page.page, page.err)
	}
	return fmt.Errorf("this PDF could not be read (%v): it may be damaged; try saving it again or printing it to a new PDF", err)
}

// pageText is a page's text, a line per row (pieces of text at the same
// height, within a third of the font size), top to bottom, with a space
// where the gap between two pieces on a row is wider than a fifth of the
// font. (Page.Text follows the whole text state: Tm, Td, T*.)
func pageText(texts []pdf.Text) string {
	sort.SliceStable(texts, func(i, j int) bool { return texts[i].Y > texts[j].Y })
	var lines []string
	var line strings.Builder
	for start := 0; start < len(texts); {
		// A row is the run of pieces within tolerance of its first.
		end := start + 1
		for end < len(texts) && math.Abs(texts[start].Y-texts[end].Y) <= math.Max(1, texts[end].FontSize/3) {
			end++
		}
		row := texts[start:end]
		start = end
		sort.SliceStable(row, func(i, j int) bool { return row[i].X < row[j].X })
		line.Reset()
		right, last := math.Inf(-1), rune(-1)
		for _, w := range row {
			if line.Len() > 0 && w.X-right > w.FontSize*0.2 && last != ' ' && w.R != ' ' {
				line.WriteByte(' ')
			}
			line.WriteRune(w.R)
			right, last = w.X+w.W, w.R
		}
		if s := strings.TrimRight(line.String(), " "); s != "" {
			lines = append(lines, s)
		}
	}
	return strings.Join(lines, "\n")
}

func cutRunes(s string, n int) string {
	if n <= 0 {
		return ""
	}
	for i := range s {
		if n == 0 {
			return s[:i]
		}
		n--
	}
	return s
}
