// Package pdftext takes the text out of a PDF for a chat attachment: the
// page sends the PDF a person dropped or picked, and the text (with the
// file's name) goes into the prompt like a text file's.
//
// Parsing is github.com/ledongthuc/pdf, pinned in go.mod at
// v0.0.0-20260907135840-6c8c28e0e8a0 (it has no tagged releases): a
// pure-Go reader, the maintained fork of rsc.io/pdf, that decodes fonts'
// ToUnicode maps and groups text by rows. No cgo and no external program,
// so it builds for every target as the rest of NPU Chat does.
//
// A PDF is untrusted input. Extract bounds what one can cost: the file's
// size (the caller's), the pages read (Limits.Pages), the text kept
// (Limits.Chars, cut with Result.Truncated set) and the time (Limits.Time:
// past it the answer is an error; the parse goroutine still stops by
// itself at the page limit). A panic in the parser on a malformed file is
// an error, not a crash. Errors are sentences a person can act on.
package pdftext
