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

	"github.com/ledongthuc/pdf"
)

// Limits bound one extraction.
type Limits struct {
	Pages int           // pages read at most (the rest are left out, Truncated set)
	Chars int           // characters of text kept at most
	Time  time.Duration // how long the extraction may take
}

// DefaultLimits fit a chat attachment: a model reads far less than this.
var DefaultLimits = Limits{Pages: 500, Chars: 1 << 20, Time: 15 * time.Second}

// Result is a PDF's text.
type Result struct {
	Text      string `json:"text"`
	Pages     int    `json:"pages"`     // pages in the file
	Read      int    `json:"read"`      // pages read
	Truncated bool   `json:"truncated"` // a limit left text out
}

// ErrNoText says the PDF has pages but no text to take (a scan).
var ErrNoText = errors.New("this PDF has no text to read (it may be scanned images): copy the text out of it another way, or describe it in the message")

// Extract returns the text of the PDF in data, page by page, a line per
// row of text.
func Extract(ctx context.Context, data []byte, lim Limits) (Result, error) {
	if lim.Time <= 0 {
		lim.Time = DefaultLimits.Time
	}
	if lim.Pages <= 0 {
		lim.Pages = DefaultLimits.Pages
	}
	if lim.Chars <= 0 {
		lim.Chars = DefaultLimits.Chars
	}
	if !bytes.HasPrefix(bytes.TrimLeft(data[:min(len(data), 1024)], "\x00\t\n\r "), []byte("%PDF-")) {
		return Result{}, errors.New("this file is not a PDF (it does not start with %PDF-)")
	}
	ctx, cancel := context.WithTimeout(ctx, lim.Time)
	defer cancel()
	type answer struct {
		res Result
		err error
	}
	done := make(chan answer, 1)
	go func() {
		res, err := extract(ctx, data, lim)
		done <- answer{res, err}
	}()
	select {
	case a := <-done:
		return a.res, a.err
	case <-ctx.Done():
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return Result{}, fmt.Errorf("reading the PDF's text took longer than %s: attach a smaller PDF, or the pages that matter", lim.Time)
		}
		return Result{}, ctx.Err()
	}
}

func extract(ctx context.Context, data []byte, lim Limits) (res Result, err error) {
	defer func() {
		if v := recover(); v != nil {
			res, err = Result{}, fmt.Errorf("this PDF could not be read (%v): it may be damaged; try saving it again or printing it to a new PDF", v)
		}
	}()
	r, err := pdf.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		if strings.Contains(err.Error(), "encrypt") || strings.Contains(err.Error(), "password") {
			return Result{}, errors.New("this PDF is protected with a password: save a copy without one and attach that")
		}
		return Result{}, fmt.Errorf("this PDF could not be read (%v): it may be damaged; try saving it again or printing it to a new PDF", err)
	}
	res.Pages = r.NumPage()
	var b strings.Builder
	chars := 0
	for i := 1; i <= res.Pages; i++ {
		if ctx.Err() != nil {
			return Result{}, ctx.Err()
		}
		if i > lim.Pages {
			res.Truncated = true
			break
		}
		text, err := pageText(r.Page(i))
		if err != nil {
			return Result{}, fmt.Errorf("page %d of this PDF could not be read (%v): it may be damaged", i, err)
		}
		res.Read = i
		if b.Len() > 0 && text != "" {
			b.WriteString("\n\n")
		}
		if n := utf8.RuneCountInString(text); chars+n > lim.Chars {
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
		return Result{}, ErrNoText
	}
	return res, nil
}

// pageText is a page's text, a line per row (pieces of text at the same
// height, within a third of the font size), top to bottom, with a space
// where the gap between two pieces on a row is wider than a fifth of the
// font. (The library's GetTextByRow follows only Tm, not Td or T*; its
// Content follows the whole text state.)
func pageText(p pdf.Page) (string, error) {
	if p.V.IsNull() {
		return "", nil
	}
	texts := p.Content().Text
	sort.SliceStable(texts, func(i, j int) bool { return texts[i].Y > texts[j].Y })
	var rows [][]pdf.Text
	for _, t := range texts {
		if n := len(rows); n > 0 && math.Abs(rows[n-1][0].Y-t.Y) <= math.Max(1, t.FontSize/3) {
			rows[n-1] = append(rows[n-1], t)
			continue
		}
		rows = append(rows, []pdf.Text{t})
	}
	var lines []string
	for _, row := range rows {
		sort.SliceStable(row, func(i, j int) bool { return row[i].X < row[j].X })
		var line strings.Builder
		end := math.Inf(-1)
		for _, w := range row {
			if line.Len() > 0 && w.X-end > w.FontSize*0.2 && !strings.HasSuffix(line.String(), " ") && !strings.HasPrefix(w.S, " ") {
				line.WriteByte(' ')
			}
			line.WriteString(w.S)
			end = w.X + w.W
		}
		if s := strings.TrimRight(line.String(), " "); s != "" {
			lines = append(lines, s)
		}
	}
	return strings.Join(lines, "\n"), nil
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
