package pdftext

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/npuchat/npuchat/pdftext/pdftexttest"
)

// FuzzExtract: no input crashes the reader, runs past its limits or
// returns text longer than the character limit.
func FuzzExtract(f *testing.F) {
	f.Add(pdftexttest.PDF([][]string{{"Hello from page one", "Second (line)"}, {"Page two"}}))
	f.Add(pdftexttest.File(pdftexttest.Pages(pdftexttest.Stream([]byte("BT /F1 12 Tf 72 720 Td [(Hel) -20 (lo)] TJ T* (x) ' ET"), true)), ""))
	f.Add(pdftexttest.File([]string{"<< /Type /Catalog /Pages 2 0 R >>", "<< /Type /Pages /Kids [2 0 R] /Count 1 >>"}, ""))
	f.Add(objStmFile("<< /Type /ObjStm /N 1 /First 4 /Length 3 0 R >>\nstream\n3 0 9\nendstream"))
	f.Add(objStmFile("<< /Type /ObjStm /N 1 /First 4 /Length 40 >>\nstream\n3 0 << /Type /Pages /Kids [] /Count 0 >>\nendstream"))
	f.Add(pdftexttest.File(pdftexttest.Pages(pdftexttest.Stream([]byte(strings.Repeat("q ", 300)+"<abc"), false)), "/Prev XREF"))
	lim := Limits{Pages: 20, Chars: 2000, Time: 10 * time.Second, StreamBytes: 1 << 20, FileBytes: 4 << 20}
	f.Fuzz(func(t *testing.T, data []byte) {
		res, st, err := extract(context.Background(), data, lim)
		if st.decoded > lim.FileBytes+1 {
			t.Errorf("decoded %d bytes, past the cap of %d", st.decoded, lim.FileBytes)
		}
		if err != nil {
			if strings.Contains(err.Error(), "took longer") {
				t.Errorf("ran into the time limit: %v", err)
			}
			return
		}
		if n := len([]rune(res.Text)); n > lim.Chars {
			t.Errorf("%d characters, past the limit of %d", n, lim.Chars)
		}
		if res.Read > lim.Pages {
			t.Errorf("read %d pages, past the limit of %d", res.Read, lim.Pages)
		}
	})
}

// FuzzPageContent: any bytes as a page's content stream and as its
// font's ToUnicode CMap (where a valid file can put anything) are read
// within the limits, without a crash.
func FuzzPageContent(f *testing.F) {
	f.Add([]byte("BT /F1 12 Tf 72 720 Td (Hello) Tj T* [(a) -20 (b)] TJ ET"), []byte("1 begincodespacerange <00> <FF> endcodespacerange 1 beginbfchar <41> <0042> endbfchar"))
	f.Add([]byte("q 1 0 0 1 0 0 cm BT /F1 0 Tf <414243> Tj ET Q Q Q"), []byte("1 beginbfrange <41> <43> [<0061> <0062>] endbfrange"))
	f.Add([]byte("BT /F1 12 Tf (a\\051\\\n) ' 1 2 (b) \" ET"), []byte("begincmap /x 1 dict begin /y 2 def end endcmap"))
	f.Add([]byte("<< /A [1 2 [3 <<>>]] >> BT <abc"), []byte("2 beginbfchar <01> endbfchar"))
	lim := Limits{Pages: 2, Chars: 2000, Time: 10 * time.Second, StreamBytes: 1 << 20, FileBytes: 4 << 20}
	f.Fuzz(func(t *testing.T, content, cmap []byte) {
		data := pdftexttest.File([]string{
			"<< /Type /Catalog /Pages 2 0 R >>",
			"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
			"<< /Type /Page /Parent 2 0 R /Resources << /Font << /F1 4 0 R >> >> /Contents 6 0 R >>",
			"<< /Type /Font /Subtype /Type1 /BaseFont /X /FirstChar 0 /LastChar 255 /Widths [500 600] /ToUnicode 5 0 R >>",
			pdftexttest.Stream(cmap, false),
			pdftexttest.Stream(content, false),
		}, "")
		res, st, err := extract(context.Background(), data, lim)
		if st.decoded > lim.FileBytes+1 {
			t.Errorf("decoded %d bytes, past the cap of %d", st.decoded, lim.FileBytes)
		}
		if err != nil {
			if strings.Contains(err.Error(), "took longer") {
				t.Errorf("ran into the time limit: %v", err)
			}
			return
		}
		if n := len([]rune(res.Text)); n > lim.Chars {
			t.Errorf("%d characters, past the limit of %d", n, lim.Chars)
		}
	})
}
