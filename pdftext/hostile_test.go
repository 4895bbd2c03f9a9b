package pdftext

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/npuchat/npuchat/pdftext/pdftexttest"
)

// TestHostilePDFs reads files made to cost memory or time without
// bound: each must end with an error that says what is wrong, before its
// time limit, having decoded no more than the caps allow (opening a
// stream counts 2 KiB).
func TestHostilePDFs(t *testing.T) {
	const mib = 1 << 20
	spaces := bytes.Repeat([]byte(" "), 64*mib) // a zip bomb: 64 MiB in about 64 KiB
	bomb := pdftexttest.File(pdftexttest.Pages(pdftexttest.Stream(spaces, true)), "")
	four := pdftexttest.Stream(bytes.Repeat([]byte(" "), 4*mib), true)
	eight := pdftexttest.File(pdftexttest.Pages(four, four, four, four, four, four, four, four), "")

	// A page whose Contents lists one stream 100,000 times.
	refs := strings.Repeat("5 0 R ", 100000)
	manyOpens := pdftexttest.File([]string{
		"<< /Type /Catalog /Pages 2 0 R >>",
		"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
		"<< /Type /Page /Parent 2 0 R /Contents 4 0 R >>",
		"[" + refs + "]",
		pdftexttest.Stream([]byte("BT ET "), true),
	}, "")

	// A page tree whose Pages node names itself as its kid, and one whose
	// child names its parent.
	self := pdftexttest.File([]string{
		"<< /Type /Catalog /Pages 2 0 R >>",
		"<< /Type /Pages /Kids [2 0 R] /Count 1 >>",
	}, "")
	cycle := pdftexttest.File([]string{
		"<< /Type /Catalog /Pages 2 0 R >>",
		"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
		"<< /Type /Pages /Kids [2 0 R] /Count 1 >>",
	}, "")
	// The same page twice: a tree that is not a tree.
	twice := pdftexttest.File([]string{
		"<< /Type /Catalog /Pages 2 0 R >>",
		"<< /Type /Pages /Kids [3 0 R 3 0 R] /Count 2 >>",
		"<< /Type /Page /Parent 2 0 R >>",
	}, "")

	// A page tree 200 levels deep.
	deep := []string{"<< /Type /Catalog /Pages 2 0 R >>"}
	for i := 2; i < 202; i++ {
		deep = append(deep, fmt.Sprintf("<< /Type /Pages /Kids [%d 0 R] /Count 1 >>", i+1))
	}
	deep = append(deep, "<< /Type /Page >>")

	// Arrays nested 100,000 deep in a content stream.
	nested := pdftexttest.File(pdftexttest.Pages(pdftexttest.Stream([]byte(strings.Repeat("[", 100000)+" Tj"), true)), "")

	// A cross-reference table that claims a billion entries, and an
	// xref stream that claims 64 million.
	two := pdftexttest.PDF([][]string{{"Hello"}})
	hugeTable := bytes.Replace(two, []byte("xref\n0 6\n"), []byte("xref\n0 1000000000\n"), 1)
	hugeStream := []byte("%PDF-1.5\n1 0 obj\n<< /Type /XRef /Size 67108864 /W [1 1 1] /Length 0 >>\nstream\n\nendstream\nendobj\nstartxref\n9\n%%EOF\n")

	// A trailer whose /Prev is its own table.
	prevLoop := pdftexttest.File(pdftexttest.Pages(pdftexttest.Stream([]byte("BT /F1 12 Tf (x) Tj ET"), false)), "/Prev XREF")

	// An object stream that Extends itself and holds no object 3, and
	// one whose Length is an object inside itself.
	extends := objStmFile("<< /Type /ObjStm /N 0 /First 1 /Extends 4 0 R /Length 1 >>\nstream\n \nendstream")
	selfLength := objStmFile("<< /Type /ObjStm /N 1 /First 4 /Length 3 0 R >>\nstream\n3 0 9\nendstream")

	for _, tc := range []struct {
		name    string
		data    []byte
		lim     Limits
		err     string
		decoded int64 // decoded bytes at most
	}{
		{name: "zip bomb, default caps", data: bomb, err: "decodes to more than 16 MiB", decoded: 16*mib + 1},
		{name: "zip bomb, 1 MiB cap", data: bomb, lim: Limits{StreamBytes: mib}, err: "decodes to more than 1 MiB", decoded: mib + 1},
		{name: "eight 4 MiB streams, 16 MiB per file", data: eight, lim: Limits{FileBytes: 16 * mib}, err: "more than 16 MiB together", decoded: 16*mib + 1},
		{name: "one stream opened 100000 times", data: manyOpens, err: "more than 64 MiB together", decoded: 64*mib + 1},
		{name: "page tree names itself", data: self, err: "loop"},
		{name: "page tree child names its parent", data: cycle, err: "loop"},
		{name: "one page twice", data: twice, err: "loop"},
		{name: "page tree 200 deep", data: pdftexttest.File(deep, ""), err: "more than 64 levels deep"},
		{name: "arrays nested 100000 deep", data: nested, err: "could not be read"},
		{name: "xref table of a billion", data: hugeTable, err: "more than 1048576 objects"},
		{name: "xref stream of 64 million", data: hugeStream, err: "more than 1048576 objects"},
		{name: "xref Prev loop", data: prevLoop, err: "loop"},
		{name: "object stream Extends itself", data: extends, err: "loop"},
		{name: "object stream's Length inside itself", data: selfLength, err: "loop"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.lim.Time == 0 {
				// Long enough never to be what stops the read here; the
				// code before these limits ran into it on the loops.
				tc.lim.Time = 10 * time.Second
			}
			res, st, err := extract(context.Background(), tc.data, tc.lim)
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("err = %v, want one saying %q (text %.40q)", err, tc.err, res.Text)
			}
			if strings.Contains(err.Error(), "took longer") {
				t.Fatalf("stopped by the time limit, not refused: %v", err)
			}
			if tc.decoded > 0 && st.decoded > tc.decoded {
				t.Errorf("decoded %d bytes, want at most %d", st.decoded, tc.decoded)
			}
		})
	}
}

// objStmFile is a PDF whose catalog's page tree, object 3, is in the
// object stream objstm (object 4), listed by a cross-reference stream
// (object 5).
func objStmFile(objstm string) []byte {
	b := []byte("%PDF-1.5\n")
	var offs [6]int
	for i, o := range []string{"<< /Type /Catalog /Pages 3 0 R >>", "<< >>", "", objstm} {
		if o == "" {
			continue
		}
		offs[i+1] = len(b)
		b = fmt.Appendf(b, "%d 0 obj\n%s\nendobj\n", i+1, o)
	}
	offs[5] = len(b)
	// W [1 2 1]: type, offset or stream number, generation or index.
	entries := []byte{0, 0, 0, 0}
	for i := 1; i <= 5; i++ {
		if i == 3 {
			entries = append(entries, 2, 0, 4, 0)
			continue
		}
		entries = append(entries, 1, byte(offs[i]>>8), byte(offs[i]), 0)
	}
	b = fmt.Appendf(b, "5 0 obj\n<< /Type /XRef /Size 6 /W [1 2 1] /Root 1 0 R /Length %d >>\nstream\n%s\nendstream\nendobj\n", len(entries), entries)
	return fmt.Appendf(b, "startxref\n%d\n%%%%EOF\n", offs[5])
}

// TestCharLimitStopsDecoding: a 4 MiB stream of text read for 1,000
// characters decodes little more than those characters' share of it.
func TestCharLimitStopsDecoding(t *testing.T) {
	content := "BT /F1 12 Tf 72 720 Td " + strings.Repeat("(abcdefghijklmnop) Tj ", 4<<20/22) + "ET"
	data := pdftexttest.File(pdftexttest.Pages(pdftexttest.Stream([]byte(content), true)), "")
	res, st, err := extract(context.Background(), data, Limits{Chars: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Truncated || len([]rune(res.Text)) != 1000 || !strings.HasPrefix(res.Text, "abcdefghijklmnopabcd") {
		t.Errorf("got %d characters (truncated %v) starting %.30q, want 1000 characters of the text, truncated", len([]rune(res.Text)), res.Truncated, res.Text)
	}
	if st.decoded > 64<<10 {
		t.Errorf("decoded %d bytes of a %d-byte stream for 1000 characters, want at most 64 KiB", st.decoded, len(content))
	}
}

// endsAfter is a context whose Err turns Canceled on its n-th call: it
// ends an extraction at a chosen point of its work, with no clock.
type endsAfter struct {
	context.Context
	mu sync.Mutex
	n  int
}

func (c *endsAfter) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n--; c.n <= 0 {
		return context.Canceled
	}
	return nil
}

// TestExtractStopsWhenItsContextEnds: the parser asks its context and
// its deadline inside its loops, so an extraction ended mid-stream
// returns then, having decoded a small part of the stream, with the
// context's error or the time limit's.
func TestExtractStopsWhenItsContextEnds(t *testing.T) {
	content := strings.Repeat("1 0 0 1 0 0 cm q Q ", 4<<20/19)
	data := pdftexttest.File(pdftexttest.Pages(pdftexttest.Stream([]byte(content), true)), "")
	for _, after := range []int{1, 20, 200} {
		ctx := &endsAfter{Context: context.Background(), n: after}
		_, st, err := extract(ctx, data, Limits{Time: time.Hour})
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("after %d checks: err = %v, want context.Canceled", after, err)
		}
		if st.decoded > 1<<20 {
			t.Errorf("after %d checks: decoded %d bytes of %d, want it stopped early", after, st.decoded, len(content))
		}
	}
	// The time limit is checked the same way: one of a nanosecond has
	// passed at the first check (or, on a coarse clock, at one of the
	// thousands of checks of this stream).
	_, st, err := extract(context.Background(), data, Limits{Time: time.Nanosecond})
	if err == nil || !strings.Contains(err.Error(), "took longer than 1ns") {
		t.Fatalf("with a 1ns limit: err = %v", err)
	}
	if st.decoded >= int64(len(content)) {
		t.Errorf("with a 1ns limit: decoded the whole stream (%d bytes)", st.decoded)
	}
}

// TestExtractorSlots: two extractions run at once; a third waits for a
// slot and gets one when one ends, or is ErrBusy after the wait.
func TestExtractorSlots(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := NewExtractor(2, 5*time.Second, DefaultLimits)
		gate := make(chan struct{})
		running := make(chan struct{}, 4)
		e.run = func(ctx context.Context, data []byte, lim Limits) (Result, error) {
			running <- struct{}{}
			<-gate
			return Result{Text: string(data)}, nil
		}
		results := make(chan error, 4)
		for range 2 {
			go func() { _, err := e.Extract(context.Background(), []byte("a")); results <- err }()
		}
		<-running
		<-running
		// A third finds both slots taken and gives up after the wait.
		start := time.Now()
		if _, err := e.Extract(context.Background(), []byte("b")); !errors.Is(err, ErrBusy) {
			t.Fatalf("third while two run: err = %v, want ErrBusy", err)
		}
		if waited := time.Since(start); waited != 5*time.Second {
			t.Errorf("waited %v, want the 5s wait", waited)
		}
		// A fourth waits, and runs once one of the two ends.
		go func() { _, err := e.Extract(context.Background(), []byte("c")); results <- err }()
		synctest.Wait()
		select {
		case <-running:
			t.Fatal("a third extraction ran while two were running")
		default:
		}
		gate <- struct{}{}
		<-running
		close(gate)
		for range 3 {
			if err := <-results; err != nil {
				t.Error(err)
			}
		}
		// A caller that leaves while waiting gets its context's error.
		e2 := NewExtractor(1, time.Minute, DefaultLimits)
		hold := make(chan struct{})
		e2.run = func(context.Context, []byte, Limits) (Result, error) { <-hold; return Result{}, nil }
		go e2.Extract(context.Background(), nil)
		synctest.Wait()
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if _, err := e2.Extract(ctx, nil); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("waiting caller whose context ends: err = %v", err)
		}
		close(hold)
	})
}
