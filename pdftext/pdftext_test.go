package pdftext

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/npuchat/npuchat/pdftext/pdftexttest"
)

func TestExtract(t *testing.T) {
	two := pdftexttest.PDF([][]string{{"Hello from page one", "Second line (with parens)"}, {"Page two says hi"}})
	many := make([][]string, 5)
	for i := range many {
		many[i] = []string{strings.Repeat("x", 40)}
	}
	for _, tc := range []struct {
		name      string
		data      []byte
		lim       Limits
		want      string
		pages     int
		truncated bool
		err       string
	}{
		{name: "two pages", data: two, want: "Hello from page one\nSecond line (with parens)\n\nPage two says hi", pages: 2},
		{name: "page limit", data: two, lim: Limits{Pages: 1}, want: "Hello from page one\nSecond line (with parens)", pages: 2, truncated: true},
		{name: "char limit", data: two, lim: Limits{Chars: 11}, want: "Hello from ", pages: 2, truncated: true},
		{name: "five pages", data: pdftexttest.PDF(many), want: strings.TrimSuffix(strings.Repeat(strings.Repeat("x", 40)+"\n\n", 5), "\n\n"), pages: 5},
		{name: "not a pdf", data: []byte("hello, I am text"), err: "not a PDF"},
		{name: "damaged", data: two[:len(two)/2], err: "could not be read"},
		{name: "no text", data: pdftexttest.PDF([][]string{{}}), err: "no text to read"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := Extract(context.Background(), tc.data, tc.lim)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want one saying %q (text %q)", err, tc.err, res.Text)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if res.Text != tc.want || res.Pages != tc.pages || res.Truncated != tc.truncated {
				t.Errorf("got %q pages %d truncated %v, want %q pages %d truncated %v", res.Text, res.Pages, res.Truncated, tc.want, tc.pages, tc.truncated)
			}
		})
	}
}

func TestExtractHonoursItsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	// The reader asks the context before its first read: no race.
	_, err := Extract(ctx, pdftexttest.PDF([][]string{{"a"}}), Limits{Time: time.Minute})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
}
