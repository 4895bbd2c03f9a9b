package page

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/npuchat/npuchat/pdftext/pdftexttest"
)

// TestPDFAttachment: a PDF picked into the composer (one this test
// writes) becomes a chip with its pages and its text's size in tokens;
// sent, its text is in the message under its name; a damaged PDF and a
// file that only says it is a PDF are refused with a sentence that
// names them, and nothing is attached.
func TestPDFAttachment(t *testing.T) {
	base := t.TempDir()
	up := newUpstream(t)
	up.script(time.Millisecond, "It says hello.")
	srv := remoteServer(t, up, base)
	b := newBrowser(t)
	b.open(srv.URL + "/")
	b.waitJS(`document.getElementById('model-status').dataset.state === 'on'`, 30*time.Second)

	good := pdftexttest.PDF([][]string{{"Quarterly notes", "Revenue rose (a little)"}, {"Page two: <b>not bold</b>"}})
	notes := filepath.Join(base, "notes.pdf")
	os.WriteFile(notes, good, 0o644)
	b.run(chromedp.SetUploadFiles("#attach-input", []string{notes}, chromedp.ByQuery))
	b.waitJS(`document.querySelectorAll('[data-testid=chip]').length === 1`, 15*time.Second)
	chip := eval[string](b, `document.querySelector('[data-testid=chip]').textContent`)
	if !strings.HasPrefix(chip, "notes.pdf 2 pages, about ") || !strings.Contains(chip, " tokens") {
		t.Errorf("the chip reads %q", chip)
	}
	b.shot("attach-pdf-chip")
	b.run(chromedp.SetValue("#composer-input", "what does it say?", chromedp.ByQuery), chromedp.Click("[data-testid=send]", chromedp.ByQuery))
	b.answered(2)
	user := eval[string](b, `document.querySelector('[data-role=user] .body').dataset.raw`)
	want := "what does it say?\n\nFile: notes.pdf\n```\nQuarterly notes\nRevenue rose (a little)\n\nPage two: <b>not bold</b>\n```"
	if user != want {
		t.Errorf("the message sent is %q, want %q", user, want)
	}
	if n := eval[float64](b, `document.querySelectorAll('[data-role=user] .body b').length`); n != 0 {
		t.Error("the PDF's text became markup")
	}

	// A damaged PDF and a text file named .pdf: refused, said, not attached.
	for _, tc := range []struct{ name, data, says string }{
		{"cut.pdf", string(good[:len(good)/2]), "could not be read"},
		{"fake.pdf", "just text", "not a PDF"},
	} {
		p := filepath.Join(base, tc.name)
		os.WriteFile(p, []byte(tc.data), 0o644)
		b.run(chromedp.SetUploadFiles("#attach-input", []string{p}, chromedp.ByQuery))
		b.waitJS(`!document.getElementById('error-banner').hidden`, 15*time.Second)
		got := eval[string](b, `document.getElementById('error-text').textContent`)
		if !strings.Contains(got, "“"+tc.name+"”") || !strings.Contains(got, tc.says) {
			t.Errorf("%s: the banner reads %q", tc.name, got)
		}
		if n := eval[float64](b, `document.querySelectorAll('[data-testid=chip]').length`); n != 0 {
			t.Errorf("%s: %v chips: a refused PDF was attached", tc.name, n)
		}
		b.shot("attach-pdf-" + strings.TrimSuffix(tc.name, ".pdf"))
		b.run(chromedp.Click("#error-close", chromedp.ByQuery))
	}
}
