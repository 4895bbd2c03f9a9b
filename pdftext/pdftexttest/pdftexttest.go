// Package pdftexttest writes small PDFs for tests: pages of text lines
// in Helvetica, with a correct cross-reference table, so that a test
// can make the PDF it reads instead of shipping one.
package pdftexttest

import (
	"bytes"
	"fmt"
	"strings"
)

// PDF returns a PDF with one page per element of pages, each line of a
// page drawn below the one before. Lines are plain ASCII; ( ) and \ are
// escaped.
func PDF(pages [][]string) []byte {
	var objs []string
	n := len(pages)
	kids := make([]string, n)
	for i := range pages {
		kids[i] = fmt.Sprintf("%d 0 R", 4+2*i)
	}
	objs = append(objs,
		"<< /Type /Catalog /Pages 2 0 R >>",
		fmt.Sprintf("<< /Type /Pages /Kids [%s] /Count %d >>", strings.Join(kids, " "), n),
		"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>")
	esc := strings.NewReplacer(`\`, `\\`, "(", `\(`, ")", `\)`)
	for i, lines := range pages {
		var c strings.Builder
		c.WriteString("BT /F1 12 Tf 72 720 Td\n")
		for _, l := range lines {
			fmt.Fprintf(&c, "(%s) Tj 0 -16 Td\n", esc.Replace(l))
		}
		c.WriteString("ET\n")
		objs = append(objs,
			fmt.Sprintf("<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >> /Contents %d 0 R >>", 5+2*i),
			fmt.Sprintf("<< /Length %d >>\nstream\n%sendstream", c.Len(), c.String()))
	}
	var b bytes.Buffer
	b.WriteString("%PDF-1.4\n")
	offsets := make([]int, len(objs))
	for i, o := range objs {
		offsets[i] = b.Len()
		fmt.Fprintf(&b, "%d 0 obj\n%s\nendobj\n", i+1, o)
	}
	xref := b.Len()
	fmt.Fprintf(&b, "xref\n0 %d\n0000000000 65535 f \n", len(objs)+1)
	for _, off := range offsets {
		fmt.Fprintf(&b, "%010d 00000 n \n", off)
	}
	fmt.Fprintf(&b, "trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n", len(objs)+1, xref)
	return b.Bytes()
}
