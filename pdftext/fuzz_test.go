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
