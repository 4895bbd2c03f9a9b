package web

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/npuchat/npuchat/pdftext/pdftexttest"
	"github.com/npuchat/npuchat/service/backend/fake"
)

// TestPDFAttachmentRefusesHostileFiles: a zip bomb and a page tree that
// names itself are 422s that say what is wrong, answered at once; a good
// PDF is its text.
func TestPDFAttachmentRefusesHostileFiles(t *testing.T) {
	s := newDriverServer(t, fake.Options{})
	bomb := pdftexttest.File(pdftexttest.Pages(pdftexttest.Stream(bytes.Repeat([]byte(" "), 64<<20), true)), "")
	loop := pdftexttest.File([]string{"<< /Type /Catalog /Pages 2 0 R >>", "<< /Type /Pages /Kids [2 0 R] /Count 1 >>"}, "")
	for _, tc := range []struct {
		name   string
		body   []byte
		status int
		want   string
	}{
		{"zip bomb", bomb, 422, "decodes to more than 16 MiB"},
		{"page tree loop", loop, 422, "loop"},
		{"good", pdftexttest.PDF([][]string{{"Hello"}}), 200, `"text":"Hello"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := httptest.NewRecorder()
			s.pdfText(w, httptest.NewRequest(http.MethodPost, "/api/attachments/pdf", bytes.NewReader(tc.body)))
			if w.Code != tc.status || !strings.Contains(w.Body.String(), tc.want) {
				t.Errorf("status %d %s, want %d saying %q", w.Code, w.Body, tc.status, tc.want)
			}
		})
	}
}
