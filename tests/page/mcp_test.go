package page

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/npuchat/npuchat/mcphost"
)

// buildMCPServer builds testdata/mcpserver (a stdio MCP server) into a
// folder whose name has a space, so that its command line needs quotes.
func buildMCPServer(t *testing.T) string {
	t.Helper()
	exe := filepath.Join(t.TempDir(), "mcp bin", "mcpserver")
	build := exec.Command("go", "build", "-o", exe, "./testdata/mcpserver")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the MCP server: %v\n%s", err, out)
	}
	return exe
}

// TestSettingsMCPServers: in the page's Settings, a person adds a stdio
// MCP server by its command line (quoted, split into the program and
// its arguments as a shell would) with an environment line, sees it
// saved in settings.json, and "Show tools" starts it and lists its
// tools with their descriptions as text (the arguments and environment
// it got); a bad name and an unclosed quote are refused at their
// fields; a URL server's token is kept but never shown or sent back;
// turning a server off stops it. Axe finds nothing serious, light and
// dark; screenshots of both.
func TestSettingsMCPServers(t *testing.T) {
	src := axeJS(t)
	exe := buildMCPServer(t)
	base := t.TempDir()
	env := home(t, base, nil)
	srv := serve(t, env)
	b := newBrowser(t)
	// The tray's button opens the page at /#settings: the Settings view.
	b.open(srv.URL + "/#settings")
	b.waitJS(`!document.getElementById('view-settings').hidden && document.querySelector('#mcp-list .mcp-empty') !== null`, 10*time.Second)

	// An unclosed quote is refused before anything is sent.
	b.run(chromedp.Click("#mcp-add", chromedp.ByQuery))
	b.waitJS(`!document.getElementById('mcp-form').hidden && document.activeElement.id === 'mcp-name'`, 5*time.Second)
	b.run(chromedp.SendKeys("#mcp-name", "notes", chromedp.ByQuery),
		chromedp.SendKeys("#mcp-command", `"`+exe+`" --label 'two words`, chromedp.ByQuery),
		chromedp.Click("#mcp-save", chromedp.ByQuery))
	b.waitJS(`!document.getElementById('err-mcp-command').hidden`, 5*time.Second)
	if msg := eval[string](b, `document.getElementById('err-mcp-command').textContent`); !strings.Contains(msg, "quote is not closed") {
		t.Errorf("unclosed quote: %q", msg)
	}

	// A bad name: the server's error, at the name, in words.
	b.run(chromedp.SetValue("#mcp-command", `"`+exe+`" --label 'two words' plain\ arg`, chromedp.ByQuery),
		chromedp.SetValue("#mcp-name", "my notes", chromedp.ByQuery),
		chromedp.SetValue("#mcp-env", "GREETING=hello from Settings\n\n", chromedp.ByQuery),
		chromedp.Click("#mcp-save", chromedp.ByQuery))
	b.waitJS(`!document.getElementById('err-mcp-name').hidden`, 10*time.Second)
	bad := eval[map[string]any](b, `({text: document.getElementById('err-mcp-name').textContent, invalid: document.getElementById('mcp-name').getAttribute('aria-invalid'),
		focused: document.activeElement.id, others: [...document.querySelectorAll('#mcp-form .field-error')].filter(e => !e.hidden).length})`)
	if !strings.HasPrefix(bad["text"].(string), `MCP server 1 ("my notes"), name: a name has only letters`) || bad["invalid"] != "true" || bad["focused"] != "mcp-name" || bad["others"] != 1.0 {
		t.Errorf("bad name: %v", bad)
	}
	if data, _ := os.ReadFile(env["NPUCHAT_CONFIG"]); strings.Contains(string(data), "mcp_servers") {
		t.Errorf("a refused server was saved: %s", data)
	}

	// Saved: the command split as a shell would, the environment line.
	b.run(chromedp.SetValue("#mcp-name", "notes", chromedp.ByQuery), chromedp.Click("#mcp-save", chromedp.ByQuery))
	b.waitJS(`document.getElementById('mcp-form').hidden && document.querySelector('#mcp-list li[data-name="notes"]') !== null`, 10*time.Second)
	var file struct {
		MCP []mcphost.Server `json:"mcp_servers"`
	}
	data, _ := os.ReadFile(env["NPUCHAT_CONFIG"])
	if err := json.Unmarshal(data, &file); err != nil || len(file.MCP) != 1 {
		t.Fatalf("settings.json: %s (%v)", data, err)
	}
	if got := strings.Join(file.MCP[0].Command, "|"); got != exe+"|--label|two words|plain arg" || file.MCP[0].Env["GREETING"] != "hello from Settings" || !file.MCP[0].Enabled || file.MCP[0].Trusted {
		t.Errorf("saved server %+v from %s", file.MCP[0], data)
	}
	if state := eval[string](b, `document.querySelector('#mcp-list li[data-name="notes"] [data-testid=mcp-state]').textContent`); !strings.HasPrefix(state, "On, not running") {
		t.Errorf("state before use: %q", state)
	}

	// Show tools: the server starts and lists them, as text.
	b.run(chromedp.Click(`#mcp-list li[data-name="notes"] [data-testid=mcp-show-tools]`, chromedp.ByQuery))
	b.waitJS(`document.querySelector('#mcp-list li[data-name="notes"] [data-testid=mcp-tools]') !== null`, 60*time.Second)
	tools := eval[map[string]string](b, `Object.fromEntries([...document.querySelectorAll('#mcp-list [data-testid=mcp-tools] dt')].map((dt) => [dt.textContent, dt.nextElementSibling.textContent]))`)
	if tools["args"] != "Started with --label|two words|plain arg" || tools["greet"] != "Says hello from Settings" || !strings.HasPrefix(tools["markup"], "<img") {
		t.Errorf("tools shown: %v", tools)
	}
	if eval[bool](b, `window.pwned !== undefined || document.querySelector('#mcp-list img, #mcp-list b') !== null`) {
		t.Error("a tool's description became markup")
	}
	state := eval[string](b, `document.querySelector('#mcp-list li[data-name="notes"] [data-testid=mcp-state]').textContent`)
	if !strings.HasPrefix(state, "Running (process ") || !strings.HasSuffix(state, "3 tools") {
		t.Errorf("state after Show tools: %q", state)
	}

	// A URL server with a token: kept, never shown or sent back.
	const token = "tok_PageSecretValue_123456789"
	b.run(chromedp.Click("#mcp-add", chromedp.ByQuery))
	b.waitJS(`!document.getElementById('mcp-form').hidden`, 5*time.Second)
	b.run(chromedp.SendKeys("#mcp-name", "search", chromedp.ByQuery),
		chromedp.Click(`#mcp-form input[name="mcp-kind"][value="url"]`, chromedp.ByQuery))
	b.waitJS(`!document.getElementById('mcp-url-part').hidden && document.getElementById('mcp-command-part').hidden`, 5*time.Second)
	b.run(chromedp.SendKeys("#mcp-url", "https://mcp.example.com/mcp", chromedp.ByQuery),
		chromedp.SendKeys("#mcp-token", token, chromedp.ByQuery),
		chromedp.Click("#mcp-enabled", chromedp.ByQuery),
		chromedp.Click("#mcp-save", chromedp.ByQuery))
	b.waitJS(`document.querySelector('#mcp-list li[data-name="search"]') !== null`, 10*time.Second)
	for _, route := range []string{"/api/settings", "/api/settings/mcp"} {
		if _, out := apiCall(t, "GET", srv.URL+route, "", ""); strings.Contains(out, "PageSecret") || !strings.Contains(out, `"token_set":true`) {
			t.Errorf("GET %s: %s", route, out)
		}
	}
	if page := eval[string](b, `document.getElementById('view-settings').innerText + [...document.querySelectorAll('input')].map((i) => i.value).join(' ')`); strings.Contains(page, "PageSecret") {
		t.Error("the page shows the token")
	}
	if data, _ := os.ReadFile(env["NPUCHAT_CONFIG"]); strings.Contains(string(data), "PageSecret") {
		t.Errorf("the token is in settings.json: %s", data)
	}
	if toks, err := mcphost.ReadTokens(mcphost.TokenPath(env["NPUCHAT_CONFIG"])); err != nil || toks["search"].Reveal() != token {
		t.Errorf("token file: %v (%v)", toks, err)
	}
	// Edit it without typing a token: the token stays.
	b.run(chromedp.Click(`#mcp-list li[data-name="search"] [data-testid=mcp-edit]`, chromedp.ByQuery))
	b.waitJS(`!document.getElementById('mcp-form').hidden && document.getElementById('mcp-token').placeholder.endsWith('(saved)')`, 5*time.Second)
	b.run(chromedp.Click("#mcp-trusted", chromedp.ByQuery), chromedp.Click("#mcp-save", chromedp.ByQuery))
	b.waitJS(`document.getElementById('mcp-form').hidden && document.querySelector('#mcp-list li[data-name="search"] .badge.trusted') !== null`, 10*time.Second)
	if toks, _ := mcphost.ReadTokens(mcphost.TokenPath(env["NPUCHAT_CONFIG"])); toks["search"].Reveal() != token {
		t.Errorf("an edit without a token lost it: %v", toks)
	}

	// Light and dark: axe, screenshots.
	for _, scheme := range []string{"light", "dark"} {
		b.scheme(scheme)
		b.waitJS(`matchMedia('(prefers-color-scheme: `+scheme+`)').matches`, 5*time.Second)
		b.run(chromedp.Evaluate(`document.getElementById('mcp-servers').scrollIntoView({block: 'start'})`, nil))
		b.axe(src, scheme+" MCP servers")
		b.shot("mcp-servers-" + scheme)
	}
	b.run(chromedp.Click("#mcp-add", chromedp.ByQuery))
	b.waitJS(`!document.getElementById('mcp-form').hidden`, 5*time.Second)
	b.run(chromedp.Evaluate(`document.getElementById('mcp-form').scrollIntoView({block: 'start'})`, nil))
	b.axe(src, "dark MCP server form")
	b.shot("mcp-form-dark")
	b.run(chromedp.Click("#mcp-cancel", chromedp.ByQuery))
	b.scheme("light")
	// At 360 px nothing is wider than the screen.
	b.run(chromedp.EmulateViewport(360, 740))
	b.open(srv.URL + "/#settings")
	b.waitJS(`window.innerWidth === 360 && document.getElementById('sidebar').getBoundingClientRect().right <= 0 && document.querySelector('#mcp-list li[data-name="search"]') !== null`, 10*time.Second)
	b.run(chromedp.Evaluate(`document.getElementById('mcp-servers').scrollIntoView({block: 'start'})`, nil))
	if w := eval[float64](b, `Math.max(...[...document.querySelectorAll('#mcp-servers, #mcp-servers *')].map((e) => e.getBoundingClientRect().right))`); w > 360 {
		t.Errorf("at 360 px the MCP servers reach %v px", w)
	}
	b.shot("mcp-servers-360")
	b.run(chromedp.EmulateViewport(1280, 860))

	// Off: stopped, and its tools cannot be listed.
	b.run(chromedp.Click(`#mcp-list li[data-name="notes"] [data-testid=mcp-toggle]`, chromedp.ByQuery))
	b.waitJS(`document.querySelector('#mcp-list li[data-name="notes"] [data-testid=mcp-state]').textContent === 'Off · 3 tools'`, 10*time.Second)
	if _, out := apiCall(t, "GET", srv.URL+"/api/settings/mcp/notes/tools", "", ""); !strings.Contains(out, "turned off") {
		t.Errorf("tools of a server turned off: %s", out)
	}
	// Removed: gone from the list and the file.
	b.run(chromedp.Click(`#mcp-list li[data-name="notes"] [data-testid=mcp-remove]`, chromedp.ByQuery))
	b.waitJS(`document.querySelector('#mcp-list li[data-name="notes"]') === null`, 10*time.Second)
	if data, _ := os.ReadFile(env["NPUCHAT_CONFIG"]); strings.Contains(string(data), `"notes"`) {
		t.Errorf("a removed server is still in settings.json: %s", data)
	}
}
