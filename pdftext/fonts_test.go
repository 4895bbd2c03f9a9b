package pdftext

import (
	"context"
	"testing"

	"github.com/npuchat/npuchat/pdftext/pdftexttest"
)

// TestFontEncodings: a simple font's Differences and a ToUnicode CMap
// (bfchar and bfrange, a code defined twice) decode as the upstream
// reader decoded them, the CMap read once however often the font is set.
func TestFontEncodings(t *testing.T) {
	cmap := `/CIDInit /ProcSet findresource begin 12 dict begin begincmap
1 begincodespacerange <00> <FF> endcodespacerange
3 beginbfchar <01> <0058> <01> <0048> <02> <0069> endbfchar
1 beginbfrange <03> <04> <00E9> endbfrange
1 beginbfchar <02> <0059> endbfchar
endcmap CMapName currentdict /CMap defineresource pop end end`
	content := "BT /F1 12 Tf 72 720 Td (AB) Tj ET\n" +
		"BT /F2 12 Tf /F2 12 Tf /F2 12 Tf 72 700 Td <01020304> Tj ET\n"
	data := pdftexttest.File([]string{
		"<< /Type /Catalog /Pages 2 0 R >>",
		"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
		"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 4 0 R /F2 5 0 R >> >> /Contents 7 0 R >>",
		"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding << /Differences [65 /eacute /Adieresis] >> >>",
		"<< /Type /Font /Subtype /Type1 /BaseFont /Custom /ToUnicode 6 0 R >>",
		pdftexttest.Stream([]byte(cmap), true),
		pdftexttest.Stream([]byte(content), false),
	}, "")
	res, st, err := extract(context.Background(), data, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if want := "éÄ\nHiéê"; res.Text != want {
		t.Errorf("text %q, want %q", res.Text, want)
	}
	// The CMap (about 300 bytes) and the content stream, each decoded once.
	if max := int64(len(cmap) + len(content)); st.decoded > max {
		t.Errorf("decoded %d bytes, want at most %d (the CMap once)", st.decoded, max)
	}
}
