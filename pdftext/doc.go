// Package pdftext takes the text out of a PDF for a chat attachment: the
// page sends the PDF a person dropped or picked, and the text (with the
// file's name) goes into the prompt like a text file's.
//
// Parsing is internal/pdf, a fork of github.com/ledongthuc/pdf (the
// maintained fork of rsc.io/pdf): a pure-Go reader that decodes fonts'
// ToUnicode maps, with no cgo and no external program, so it builds for
// every target as the rest of NPU Chat does. It is forked because the
// upstream reader could not be bounded from outside: see its package doc.
//
// A PDF is untrusted input. Extract bounds what one can cost: the file's
// size (the caller's), the bytes its streams decode to (Limits.StreamBytes
// per stream, Limits.FileBytes per file), the pages read (Limits.Pages),
// the text kept (Limits.Chars: decoding stops soon after, Result.Truncated
// set) and the time (Limits.Time: the parser checks the clock and the
// context inside its loops, so the extraction ends there, in the caller's
// goroutine). Loops in the page tree and other chains of references, and
// trees or cross-reference tables too deep or too large, are errors. A
// panic in the parser on a malformed file is an error, not a crash.
// Extractor runs at most a few extractions at a time for a server.
// Errors are sentences a person can act on.
package pdftext
