package page

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/npuchat/npuchat/engine/testmodel"
)

// TestAnOlderStatusNeverShowsOverANewerOne: the page reads the status
// both from the event stream and from GET /api/status, whose answers can
// arrive in either order. A status older than the one shown (a smaller
// seq) is not shown: once the model had gone on, a GET answered while it
// was still loading kept the page at "Loading (80%)…" for good (seen
// about one run in five of TestInstallFromThePage).
func TestAnOlderStatusNeverShowsOverANewerOne(t *testing.T) {
	base := t.TempDir()
	w, err := testmodel.Random(7, testmodel.MiniCPM5Small())
	if err != nil {
		t.Fatal(err)
	}
	model := filepath.Join(base, "small.gguf")
	if err := testmodel.WriteGGUF(model, w, testmodel.Q8_0); err != nil {
		t.Fatal(err)
	}
	env := home(t, base, nil)
	srv := serve(t, env, "--model", model, "--name", "minicpm5:2b", "--engine", "cpu")
	b := newBrowser(t)
	b.open(srv.URL + "/")
	b.waitJS(`document.getElementById('model-status').dataset.state === 'on'`, 60*time.Second)
	var seq float64
	b.run(chromedp.Evaluate(`fetch('/api/status').then(r => r.json()).then(s => s.seq)`, &seq, func(p *runtime.EvaluateParams) *runtime.EvaluateParams {
		return p.WithAwaitPromise(true)
	}))
	if seq < 1 {
		t.Fatalf("/api/status's seq is %v, want it counting the events sent", seq)
	}

	// From now on every GET /api/status answers with a snapshot from
	// before the model was on, as a slow answer would. Switching the
	// model off asks for the status again after the stop; the stop's
	// events are newer, so the page must end switched off, not loading.
	b.run(chromedp.Evaluate(`(() => {
		const real = window.fetch;
		window.fetch = (path, opts) => {
			if (String(path) === '/api/status' && (!opts || !opts.method || opts.method === 'GET')) {
				return Promise.resolve(new Response(JSON.stringify({state: 'loading', model: 'minicpm5:2b', backend: 'cpu', enabled: true, progress: {frac: 0.8}, seq: 0, since: '2026-01-01T00:00:00Z', running: 0, waiting: 0, stats: {}}), {headers: {'Content-Type': 'application/json'}}));
			}
			return real(path, opts);
		};
	})()`, nil))
	b.run(chromedp.Click("[data-testid=model-toggle]", chromedp.ByQuery))
	b.waitJS(`document.getElementById('model-status').dataset.state === 'off'`, 30*time.Second)
	b.waitIdle() // the GET after the stop has been answered and applied
	if s := eval[string](b, `document.getElementById('model-status').dataset.state + ': ' + document.getElementById('status-text').textContent`); s != "off: minicpm5:2b is switched off." {
		t.Errorf("after switching off, with an older status answered last, the page says %q", s)
	}
}
