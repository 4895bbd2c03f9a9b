package web_test

import (
	"bytes"
	"compress/flate"
	"compress/zlib"
	"context"
	"encoding"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/adler32"
	"io"
	"math/rand/v2"
	"net/http"
	"runtime/metrics"
	"strings"
	"testing"
	"time"

	"github.com/npuchat/npuchat/pdftext"
	"github.com/npuchat/npuchat/pdftext/pdftexttest"
)

// soakPDFSlots is web's pdfSlots: how many extractions run at once.
const soakPDFSlots = 2

// soakPDFWorkers is how many PDF requests the soak has in flight at
// once: one normal, two hostile.
const soakPDFWorkers = 3

// bombMiB is what the soak's zip bomb decodes to: 1 GiB of spaces in
// about 1 MiB, the size issue 38 found taking the server to 7.65 GB.
const bombMiB = 1024

// pdfHeapBound is the most heap the soak's PDF requests may hold at
// once, derived from the limits: each request in flight its body (read
// whole, at most MaxBodyBytes, twice that while io.ReadAll grows its
// buffer), and each running extraction a page's pieces of text (about
// 40 bytes a character, at most pdftext.DefaultLimits.Chars) and one
// stream's decoded bytes at most (StreamBytes; the reader decodes in
// small pieces, so this is slack).
func pdfHeapBound(maxBody int64) uint64 {
	lim := pdftext.DefaultLimits
	return uint64(soakPDFWorkers*2*maxBody + soakPDFSlots*(40*int64(lim.Chars)+lim.StreamBytes))
}

// hostilePDF is a file made to cost the server memory or time, and what
// the server must answer it with.
type hostilePDF struct {
	name   string
	data   []byte
	status int    // 422, or 413 for a body over MaxBodyBytes
	says   string // in the error's message
}

// hostilePDFs are issue 38's hostile attachments, built here: a zip
// bomb, a page tree that names itself, a file cut short, and a body
// larger than the server takes.
func hostilePDFs(t testing.TB, maxBody int64) []hostilePDF {
	t.Helper()
	whole := pdftexttest.PDF([][]string{{"a file cut short", "in the middle of its objects"}, {"second page"}})
	return []hostilePDF{
		{name: "zip bomb of spaces", data: zipBombPDF(t, "", ' ', bombMiB, ""), status: 422, says: "decodes to more than"},
		{name: "zip bomb of one string", data: zipBombPDF(t, "BT /F1 12 Tf 72 720 Td (", 'a', bombMiB, ") Tj ET"), status: 422, says: "decodes to more than"},
		{name: "page tree names itself", data: pdftexttest.File([]string{
			"<< /Type /Catalog /Pages 2 0 R >>",
			"<< /Type /Pages /Kids [2 0 R] /Count 1 >>",
		}, ""), status: 422, says: "loop"},
		{name: "cut short", data: whole[:len(whole)/2], status: 422, says: "could not be read"},
		{name: "larger than a body may be", data: append([]byte("%PDF-1.4\n"), bytes.Repeat([]byte("%"), int(maxBody))...), status: 413, says: "larger than"},
	}
}

// zipBombPDF is a one-page PDF whose content stream is one FlateDecode
// stream of prefix, mib MiB of fill, and suffix.
func zipBombPDF(t testing.TB, prefix string, fill byte, mib int, suffix string) []byte {
	t.Helper()
	z := zipBomb(t, prefix, fill, mib, suffix)
	stream := fmt.Sprintf("<< /Length %d /Filter /FlateDecode >>\nstream\n%s\nendstream", len(z), z)
	return pdftexttest.File(pdftexttest.Pages(stream), "")
}

// zipBomb is the zlib stream of prefix, mib MiB of fill and suffix,
// built without compressing all of it: once the window is all fill, the
// deflate blocks of each further MiB are the same bytes, so the stream
// is the first blocks, one of them repeated, the suffix's, and the
// Adler-32 of the whole (worked out for the run). The construction is
// checked on a small bomb, decoded in full: its bytes and its checksum
// (zlib reads it to io.EOF) must be right.
func zipBomb(t testing.TB, prefix string, fill byte, mib int, suffix string) []byte {
	t.Helper()
	small := buildZipBomb(t, prefix, fill, 6, suffix)
	r, err := zlib.NewReader(bytes.NewReader(small))
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(r)
	want := prefix + strings.Repeat(string(fill), 6<<20) + suffix
	if err != nil || string(got) != want {
		t.Fatalf("the zip bomb's construction: %d bytes (%v), want %d", len(got), err, len(want))
	}
	return buildZipBomb(t, prefix, fill, mib, suffix)
}

func buildZipBomb(t testing.TB, prefix string, fill byte, mib int, suffix string) []byte {
	t.Helper()
	var out bytes.Buffer
	out.Write([]byte{0x78, 0xda}) // zlib header: deflate, best compression
	w, err := flate.NewWriter(&out, flate.BestCompression)
	if err != nil {
		t.Fatal(err)
	}
	run := bytes.Repeat([]byte{fill}, 1<<20)
	w.Write([]byte(prefix))
	var blocks [3][]byte
	for i := range blocks {
		start := out.Len()
		w.Write(run)
		w.Flush()
		blocks[i] = bytes.Clone(out.Bytes()[start:])
	}
	if !bytes.Equal(blocks[1], blocks[2]) {
		t.Fatal("the zip bomb's construction: a MiB of fill after the first does not deflate to the same bytes")
	}
	for range mib - 3 {
		out.Write(blocks[2])
	}
	w.Write([]byte(suffix))
	w.Close()
	// Adler-32 (a, b) after the prefix, then n bytes of fill c:
	// a += n·c, b += n·a + c·n(n+1)/2 (mod 65521); then the suffix.
	const mod = 65521
	h := adler32.New()
	h.Write([]byte(prefix))
	p := uint64(h.Sum32())
	a, b := p&0xffff, p>>16
	n, c := uint64(mib)<<20, uint64(fill)
	b = (b + (n%mod)*a + c*((n*(n+1)/2)%mod)) % mod
	a = (a + (n%mod)*c) % mod
	state := append([]byte("adl\x01"), binary.BigEndian.AppendUint32(nil, uint32(b<<16|a))...)
	if err := h.(encoding.BinaryUnmarshaler).UnmarshalBinary(state); err != nil {
		t.Fatal(err)
	}
	h.Write([]byte(suffix))
	out.Write(h.Sum(nil))
	return out.Bytes()
}

// normalPDF is a PDF of one to three pages of random words, and its
// lines.
func normalPDF(rng *rand.Rand) ([]byte, []string) {
	var pages [][]string
	var all []string
	for range 1 + rng.IntN(3) {
		var lines []string
		for range 1 + rng.IntN(8) {
			words := make([]string, 1+rng.IntN(8))
			for j := range words {
				words[j] = fmt.Sprintf("w%d", rng.IntN(100000))
			}
			lines = append(lines, strings.Join(words, " "))
		}
		pages = append(pages, lines)
		all = append(all, lines...)
	}
	return pdftexttest.PDF(pages), all
}

// pdfPause is a PDF worker's pause between two files: 100 to 300 ms.
func pdfPause(rng *rand.Rand) time.Duration {
	return time.Duration(100+rng.IntN(200)) * time.Millisecond
}

// postPDF sends a PDF to the page's attachment route as the page does.
func postPDF(ctx context.Context, client *http.Client, url, cookie string, data []byte) (*http.Response, string, error) {
	req, err := http.NewRequestWithContext(ctx, "POST", url+"/api/attachments/pdf", bytes.NewReader(data))
	if err != nil {
		return nil, "", err
	}
	req.Header.Set("Content-Type", "application/pdf")
	req.Header.Set("Cookie", cookie)
	resp, err := client.Do(req)
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b), nil
}

// heapNow is the runtime's heap objects now (live and not yet
// collected, as heapPeak samples).
func heapNow() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// pdfSoak is the soak's PDF attachments: its workers post normal and
// hostile files and check every answer.
type pdfSoak struct {
	url, cookie string
	client      *http.Client
	hostile     []hostilePDF
	fail        func(format string, args ...any)
	count       func(k string)
}

// normal posts a normal PDF until it is read (503 is "busy, try again",
// honoured briefly), and checks that its text holds every line.
func (p *pdfSoak) normal(ctx context.Context, rng *rand.Rand) {
	data, lines := normalPDF(rng)
	for ctx.Err() == nil {
		resp, body, err := postPDF(ctx, p.client, p.url, p.cookie, data)
		if err != nil {
			if ctx.Err() == nil {
				p.fail("normal PDF: %v", err)
			}
			return
		}
		p.count("pdf requests")
		if resp.StatusCode == 503 && resp.Header.Get("Retry-After") != "" {
			p.count("pdf normal busy (503)")
			sleepCtx(ctx, 50*time.Millisecond)
			continue
		}
		if resp.StatusCode == http.StatusRequestTimeout { // the soak's body timeout is 500 ms: a busy machine can miss it
			p.count("pdf body late (408)")
			continue
		}
		var res pdftext.Result
		if resp.StatusCode != 200 || json.Unmarshal([]byte(body), &res) != nil {
			p.fail("normal PDF: %d %s", resp.StatusCode, tail(body, 300))
			return
		}
		for _, l := range lines {
			if !strings.Contains(res.Text, l) {
				p.fail("normal PDF: text %q lacks the line %q", tail(res.Text, 300), l)
				return
			}
		}
		p.count("pdf normal read")
		return
	}
}

// hostileOne posts one hostile file and checks that it gets its clear
// refusal (or 503 with Retry-After when the readers are busy).
func (p *pdfSoak) hostileOne(ctx context.Context, rng *rand.Rand) {
	h := p.hostile[rng.IntN(len(p.hostile))]
	resp, body, err := postPDF(ctx, p.client, p.url, p.cookie, h.data)
	if err != nil {
		if ctx.Err() == nil {
			p.fail("%s PDF: %v", h.name, err)
		}
		return
	}
	p.count("pdf requests")
	switch {
	case resp.StatusCode == 503 && resp.Header.Get("Retry-After") != "":
		p.count("pdf hostile busy (503)")
	case resp.StatusCode == http.StatusRequestTimeout && strings.Contains(body, "did not arrive within"):
		// the soak's body timeout is 500 ms: a busy machine can miss it
		p.count("pdf body late (408)")
	case resp.StatusCode == h.status && strings.Contains(body, h.says):
		p.count("pdf hostile refused")
		p.count("pdf " + h.name)
	default:
		p.fail("%s PDF: %d %s, want %d saying %q", h.name, resp.StatusCode, tail(body, 300), h.status, h.says)
	}
}
