package page

import (
	"os"
	"regexp"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestLogViewShowsReadableLines: the Log view shows each record of the
// log as one line (time, level, message, key=value), not raw JSON; a
// line that is not JSON is kept as it is; markup in a record stays
// text; lines wrap at 360 px without widening the page.
func TestLogViewShowsReadableLines(t *testing.T) {
	up := newUpstream(t)
	srv := remoteServer(t, up, t.TempDir())
	b := newBrowser(t)
	b.open(srv.URL + "/")
	b.run(chromedp.Click("#open-logs", chromedp.ByQuery))
	b.waitJS(`document.getElementById('logs-path').textContent !== '' && document.getElementById('log-lines').textContent !== ''`, 15*time.Second)
	path := eval[string](b, `document.getElementById('logs-path').textContent`)
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatalf("the log the view names: %v", err)
	}
	f.WriteString(`{"time":"2026-12-08T01:02:03.456789+01:00","level":"WARN","msg":"model load failed","model":"qwen3:0.6b","err":"open /m/a b.gguf: no such file","tries":2,"ok":false,"mem":{"free":12},"note":"<b>bold</b>"}` + "\n")
	f.WriteString("panic: not a record\n")
	f.Close()
	b.run(chromedp.Click("#logs-refresh", chromedp.ByQuery))
	b.waitJS(`document.getElementById('log-lines').textContent.includes('not a record')`, 15*time.Second)
	lines := eval[[]string](b, `[...document.querySelectorAll('#log-lines > .log-line')].map((e) => e.textContent)`)
	if len(lines) < 3 {
		t.Fatalf("%d lines", len(lines))
	}
	want := []string{
		`2026-12-08 01:02:03 WARN  model load failed model=qwen3:0.6b err="open /m/a b.gguf: no such file" tries=2 ok=false mem={"free":12} note=<b>bold</b>`,
		"panic: not a record",
	}
	if got := lines[len(lines)-2:]; got[0] != want[0] || got[1] != want[1] {
		t.Errorf("the last lines read\n\t%q\nwant\n\t%q", got, want)
	}
	record := regexp.MustCompile(`^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d (DEBUG|INFO |WARN |ERROR) `)
	for _, l := range lines[:len(lines)-2] {
		if !record.MatchString(l) {
			t.Errorf("the server's own record reads %q", l)
		}
	}
	if n := eval[int](b, `document.querySelectorAll('#log-lines .log-line *, #log-lines > :not(.log-line)').length`); n != 0 {
		t.Errorf("the log holds %d elements: markup in a record became markup", n)
	}
	// A wrapped record's next lines are indented under its first.
	if in := eval[float64](b, `(() => { const e = document.querySelectorAll('#log-lines > .log-line')[0]; return parseFloat(getComputedStyle(e).paddingLeft) + parseFloat(getComputedStyle(e).textIndent); })()`); in != 0 {
		t.Errorf("a record's first line starts %v px in", in)
	}
	b.shot("log-light")
	b.run(chromedp.Evaluate(`document.documentElement.dataset.theme = 'dark'`, nil))
	b.shot("log-dark")
	b.run(chromedp.EmulateViewport(360, 780))
	b.waitStill("#sidebar")
	b.shot("log-360")
	if w := eval[float64](b, `document.documentElement.scrollWidth`); w > 362 {
		t.Errorf("at 360 px the page is %v px wide", w)
	}
}
