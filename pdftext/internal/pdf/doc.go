// Package pdf reads the objects, page tree and page text of a PDF that
// nobody vouches for, within limits a caller sets.
//
// It is a fork of github.com/ledongthuc/pdf at
// v0.0.0-20260907135840-6c8c28e0e8a0 (itself the maintained fork of
// rsc.io/pdf; BSD licence, see LICENSE), cut down to what pdftext uses
// and changed so that no file can cost more than its Limits: the upstream
// package decoded a FlateDecode stream to its end whatever its size (a
// 4 MB file held 1 GB of text), walked a page tree that names itself for
// ever, re-decoded object streams and fonts for every object and every
// font change, and had no way to stop when its caller gave up.
//
// Here every reader of decoded stream data counts its bytes against a
// per-stream and a per-file cap (Limits.StreamBytes, Limits.TotalBytes;
// opening a stream costs 2 KiB of the file's cap by itself),
// every loop that reads, resolves or decodes checks the context, every
// chain of references (page tree kids and parents, object streams'
// Extends, cross-reference sections' Prev, an object whose resolution
// needs itself) is refused when it comes back to where it started, the
// cross-reference table is bounded (Limits.Objects), the graphics and
// operand stacks are bounded, and page text stops being decoded when the
// caller's character budget is spent. Objects, object streams and fonts'
// ToUnicode maps are decoded once per file and cached.
//
// The package reports a broken limit or a cancelled context as an error
// (a *LimitError, or the context's error) from NewReader, Reader.Pages and
// Page.Text; internally these travel as a panic of type stop, which every
// recover in the package passes on.
package pdf
