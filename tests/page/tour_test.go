package page

import (
	"encoding/json"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"

	"github.com/npuchat/npuchat/models/hub/hubtest"
	"github.com/npuchat/npuchat/service/install/installtest"
)

// longAnswer is a long Markdown answer, as a model writes one.
var longAnswer = []string{
	"## Reading a file in Go\n\n",
	"There are **three** common ways, from the simplest to the most flexible:\n\n",
	"1. `os.ReadFile` reads the whole file into memory.\n",
	"2. `bufio.Scanner` reads it line by line.\n",
	"3. `io.Reader` with a buffer for large files.\n\n",
	"### The whole file\n\n",
	"```go\npackage main\n\nimport (\n\t\"fmt\"\n\t\"os\"\n)\n\nfunc main() {\n\tdata, err := os.ReadFile(\"notes.txt\") // a very long comment that goes past the right edge of the code block so that it scrolls sideways\n\tif err != nil {\n\t\tpanic(err)\n\t}\n\tfmt.Println(len(data), \"bytes\")\n}\n```\n\n",
	"> Note: `os.ReadFile` is fine up to a few hundred megabytes.\n\n",
	"| Way | Memory | Speed |\n| --- | --- | --- |\n| ReadFile | whole file | fast |\n| Scanner | one line | fast |\n| Reader | one buffer | fastest |\n\n",
	"### Line by line\n\n",
	"```python\nwith open('notes.txt') as f:\n    for n, line in enumerate(f):\n        print(n, line.strip())  # 42\n```\n\n",
	"That's it. See <https://pkg.go.dev/os#ReadFile> for more.",
}

// TestTour takes screenshots of the page as a person goes through it,
// for a person to look at (tour-*.png): a new chat beside many others,
// a long answer streaming and finished, a search, the settings, the
// log, the chat settings, the model switched off, a dialog, dark mode
// and 360 px. It only runs with NPUCHAT_TOUR=1; the other tests check
// what these screens promise.
func TestTour(t *testing.T) {
	if os.Getenv("NPUCHAT_TOUR") == "" {
		t.Skip("NPUCHAT_TOUR=1 takes the tour's screenshots")
	}
	up := newUpstream(t)
	srv := remoteServer(t, up, t.TempDir())
	for i := range 30 {
		body, _ := json.Marshal(map[string]string{"title": fmt.Sprintf("Chat number %d about something rather long to fit", i)})
		apiCall(t, "POST", srv.URL+"/api/conversations", "", string(body))
	}
	b := newBrowser(t)
	b.open(srv.URL + "/")
	b.waitJS(`document.querySelectorAll('#conversations li.conversation').length === 30`, 10*time.Second)
	b.shot("tour-empty")
	up.script(40*time.Millisecond, longAnswer...)
	b.run(chromedp.SendKeys("#composer-input", "How do I read a file in Go?", chromedp.ByQuery), chromedp.Click("[data-testid=send]", chromedp.ByQuery))
	b.waitJS(`(() => { const a = document.querySelector('[data-role=assistant] .body'); return !!a && a.textContent.includes('Memory') })()`, 20*time.Second)
	b.shot("tour-streaming")
	b.waitJS(`(() => { const a = document.querySelector('[data-role=assistant]'); return !!a && !a.classList.contains('streaming') })()`, 20*time.Second)
	b.shot("tour-long-answer")
	b.run(chromedp.Evaluate(`document.getElementById('messages').scrollTop = 0`, nil))
	b.waitJS(`document.getElementById('messages').scrollTop === 0`, 5*time.Second)
	b.shot("tour-long-answer-top")
	b.run(chromedp.SendKeys("[data-testid=search]", "number 1", chromedp.ByQuery))
	b.waitJS(`document.querySelectorAll('#conversations li.conversation').length === 11`, 10*time.Second)
	b.shot("tour-search")
	b.run(chromedp.Click("#open-settings", chromedp.ByQuery))
	b.waitJS(`document.getElementById('set-keep-alive-text').textContent !== ''`, 10*time.Second)
	b.shot("tour-settings")
	b.run(chromedp.Click("#open-logs", chromedp.ByQuery))
	b.waitJS(`document.getElementById('log-lines').textContent !== ''`, 10*time.Second)
	b.shot("tour-log")
	b.run(chromedp.Click("#view-logs .close-view", chromedp.ByQuery))
	b.run(chromedp.Click("#open-chat-settings", chromedp.ByQuery))
	b.shot("tour-chat-settings")
	b.run(chromedp.Click("#open-chat-settings", chromedp.ByQuery))
	apiCall(t, "POST", srv.URL+"/api/model/stop", "", "")
	b.waitJS(`document.getElementById('status-text').textContent.includes('switched off')`, 10*time.Second)
	b.run(chromedp.SendKeys("#composer-input", "are you there?", chromedp.ByQuery), chromedp.Click("[data-testid=send]", chromedp.ByQuery))
	b.waitJS(`!document.getElementById('error-banner').hidden`, 10*time.Second)
	b.shot("tour-model-off")
	apiCall(t, "POST", srv.URL+"/api/model/start", "", `{"model":"scripted"}`)
	b.run(emulation.SetEmulatedMedia().WithFeatures([]*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: "dark"}}))
	path := eval[string](b, `location.pathname`)
	b.open(srv.URL + path)
	b.waitJS(`document.querySelectorAll('[data-testid=message]').length === 3`, 10*time.Second)
	b.shot("tour-dark")
	b.run(chromedp.Click("#conversations li.conversation button.delete", chromedp.ByQuery))
	b.waitJS(`(() => { const d = document.querySelector('dialog[data-testid=dialog]'); return !!d && d.open })()`, 5*time.Second)
	b.shot("tour-dark-dialog")
	b.run(chromedp.Evaluate(`document.querySelector('[data-testid=dialog-cancel]').click()`, nil))
	b.run(chromedp.EmulateViewport(360, 740))
	b.open(srv.URL + path)
	b.waitJS(`document.querySelectorAll('[data-testid=message]').length === 3`, 10*time.Second)
	b.shot("tour-360-dark")
	b.run(emulation.SetEmulatedMedia().WithFeatures([]*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: "light"}}))
	b.run(chromedp.Evaluate(`document.getElementById('messages').scrollTop = 0`, nil))
	b.waitJS(`document.getElementById('messages').scrollTop === 0`, 5*time.Second)
	b.shot("tour-360-light")
	b.run(chromedp.Click("[data-role=user] button.edit", chromedp.ByQuery))
	b.waitJS(`document.querySelector('.edit-form') !== null`, 5*time.Second)
	b.shot("tour-360-edit")
	b.run(chromedp.Click(".edit-form button[type=button]", chromedp.ByQuery))
	b.run(chromedp.Click("#open-chat-settings", chromedp.ByQuery))
	b.run(chromedp.Evaluate(`document.getElementById('messages').scrollTop = 0`, nil))
	b.shot("tour-360-chat-settings")
	b.run(chromedp.Click("#open-chat-settings", chromedp.ByQuery))
	b.run(chromedp.Click("#menu", chromedp.ByQuery))
	b.waitJS(`document.body.classList.contains('sidebar-open') && document.getElementById('sidebar').getBoundingClientRect().left === 0`, 5*time.Second)
	b.shot("tour-360-menu")
	b.run(chromedp.Click("#new-chat", chromedp.ByQuery))
	b.waitJS(`location.pathname === '/'`, 5*time.Second)
	b.waitJS(`!document.body.classList.contains('sidebar-open') && document.getElementById('sidebar').getBoundingClientRect().right <= 0`, 5*time.Second)
	b.shot("tour-360-empty")
	b.run(chromedp.EmulateViewport(1280, 860))
	b.open(srv.URL + path)
	b.waitJS(`document.querySelectorAll('[data-testid=message]').length === 3`, 10*time.Second)
	b.run(chromedp.Click("[data-role=user] button.edit", chromedp.ByQuery))
	b.waitJS(`document.querySelector('.edit-form') !== null`, 5*time.Second)
	b.shot("tour-edit")
}

// TestTourInstall takes the screenshots of the install (NPUCHAT_TOUR=1):
// in progress at 360 px and in dark mode, and failed.
func TestTourInstall(t *testing.T) {
	if os.Getenv("NPUCHAT_TOUR") == "" {
		t.Skip("NPUCHAT_TOUR=1 takes the tour's screenshots")
	}
	hub := installtest.Start(t)
	hub.AddFaults("model.q4nx", hubtest.Fault{Delay: 4 * time.Millisecond})
	base := t.TempDir()
	env := installtest.Env(hub, base)
	env["NPUCHAT_ENGINE"] = "cpu"
	env["PATH"] = "/usr/bin:/bin"
	srv := serve(t, env)
	b := newBrowser(t)
	b.run(chromedp.EmulateViewport(360, 740))
	b.open(srv.URL + "/")
	b.waitJS(`!document.getElementById('view-install').hidden`, 20*time.Second)
	b.shot("tour-install-360")
	b.run(chromedp.Click("[data-testid=install]", chromedp.ByQuery))
	b.waitJS(`document.querySelector('[data-testid=install-progress]').value > 0.1`, 30*time.Second)
	b.shot("tour-install-360-progress")
	b.run(emulation.SetEmulatedMedia().WithFeatures([]*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: "dark"}}))
	b.run(chromedp.EmulateViewport(1280, 860))
	b.shot("tour-install-dark")
	b.run(chromedp.Click("#install-cancel", chromedp.ByQuery))
	b.waitJS(`document.querySelector('[data-testid=install]').textContent === 'Resume'`, 20*time.Second)
	b.shot("tour-install-cancelled")
	hub.AddFaults("@tree", hubtest.Fault{Status: 500}, hubtest.Fault{Status: 500}, hubtest.Fault{Status: 500}, hubtest.Fault{Status: 500}, hubtest.Fault{Status: 500}, hubtest.Fault{Status: 500})
	hub.AddFaults("@revision", hubtest.Fault{Status: 500}, hubtest.Fault{Status: 500}, hubtest.Fault{Status: 500}, hubtest.Fault{Status: 500}, hubtest.Fault{Status: 500}, hubtest.Fault{Status: 500})
	b.run(chromedp.Click("[data-testid=install]", chromedp.ByQuery))
	b.waitJS(`!document.getElementById('install-error').hidden`, 120*time.Second)
	b.shot("tour-install-failed")
}
