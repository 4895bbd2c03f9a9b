package web

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/npuchat/npuchat/pdftext"
)

// pdfSlots and pdfWait bound PDF extraction across requests: at most two
// run at once (each can hold a core for pdftext.DefaultLimits.Time), and
// a third waits up to pdfWait for a slot before it is a 503 with
// Retry-After.
const (
	pdfSlots = 2
	pdfWait  = 5 * time.Second
)

func newPDFExtractor() *pdftext.Extractor {
	return pdftext.NewExtractor(pdfSlots, pdfWait, pdftext.DefaultLimits)
}

// pdfText is POST /api/attachments/pdf, a page route (the session or the
// API key): the body is a PDF a person dropped or picked in the
// composer; the answer is its text, {"text", "pages", "read",
// "truncated"} (pdftext.Result), for the page to put into the message
// with the file's name like a text file's. The body is bounded by
// Options.MaxBodyBytes (8 MiB by default), the work by
// pdftext.DefaultLimits (pages, characters, decoded bytes, time) and at
// most pdfSlots at a time. A file that is not a PDF, is damaged,
// protected, too large once decoded or has no text is a 422 whose message
// says so and what to do; all slots taken for pdfWait is a 503 with
// Retry-After.
func (s *Server) pdfText(w http.ResponseWriter, r *http.Request) {
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.opts.MaxBodyBytes))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeError(w, r, http.StatusRequestEntityTooLarge, "pdf_too_large",
				fmt.Sprintf("this PDF is larger than %d MB: attach a smaller one, or the pages that matter", s.opts.MaxBodyBytes>>20))
			return
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() { // as every body: 408 (errors.go)
			writeError(w, r, http.StatusRequestTimeout, "request_timeout",
				fmt.Sprintf("the PDF did not arrive within %s; send it at once", s.opts.BodyTimeout))
			return
		}
		writeError(w, r, http.StatusBadRequest, "invalid_request", "the PDF did not arrive whole: "+err.Error())
		return
	}
	if len(data) == 0 {
		writeError(w, r, http.StatusBadRequest, "invalid_request", "the PDF is empty")
		return
	}
	res, err := s.pdfs.Extract(r.Context(), data)
	if errors.Is(err, pdftext.ErrBusy) {
		w.Header().Set("Retry-After", strconv.Itoa(int(pdfWait/time.Second)))
		writeError(w, r, http.StatusServiceUnavailable, "busy", err.Error())
		return
	}
	if err != nil {
		writeError(w, r, http.StatusUnprocessableEntity, "unreadable_pdf", err.Error())
		return
	}
	writeJSON(w, http.StatusOK, res)
}
