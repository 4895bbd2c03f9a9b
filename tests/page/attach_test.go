package page

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/npuchat/npuchat/engine/testmodel"
)

// TestAttachmentCountedAndSent: a text file picked into the composer is
// a chip with its size in tokens; sent, its text is in the message under
// its name; a file too long for the model's context is refused before
// anything is sent, and stays attached.
func TestAttachmentCountedAndSent(t *testing.T) {
	base := t.TempDir()
	w, err := testmodel.Random(7, testmodel.MiniCPM5Small())
	if err != nil {
		t.Fatal(err)
	}
	model := filepath.Join(base, "small.gguf")
	if err := testmodel.WriteGGUF(model, w, testmodel.Q8_0); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(base, "settings.json"), []byte(`{"chat": {"max_tokens": 4}}`), 0o644)
	srv := serve(t, home(t, base, nil), "--model", model, "--name", "minicpm5:2b", "--engine", "cpu")
	b := newBrowser(t)
	b.open(srv.URL + "/")
	b.waitJS(`document.getElementById('model-status').dataset.state === 'on'`, 60*time.Second)
	_, out := apiCall(t, "GET", srv.URL+"/api/status", "", "")
	var st struct {
		Info struct {
			ContextLength int `json:"context_length"`
		} `json:"info"`
	}
	json.Unmarshal([]byte(out), &st)
	if st.Info.ContextLength == 0 {
		t.Fatalf("no context length in the status: %s", out)
	}

	notes := filepath.Join(base, "notes.txt")
	os.WriteFile(notes, []byte("line one\n```\ncode in the notes\n```\n"), 0o644)
	b.run(chromedp.SetUploadFiles("#attach-input", []string{notes}, chromedp.ByQuery))
	b.waitJS(`document.querySelectorAll('[data-testid=chip]').length === 1`, 5*time.Second)
	if got := eval[string](b, `document.querySelector('[data-testid=chip]').textContent`); !strings.HasPrefix(got, "notes.txt about ") || !strings.Contains(got, "tokens") {
		t.Errorf("the chip reads %q", got)
	}
	b.shot("attach-chip")
	b.run(chromedp.SetValue("#composer-input", "what do the notes say?", chromedp.ByQuery), chromedp.Click("[data-testid=send]", chromedp.ByQuery))
	b.answered(2)
	user := eval[string](b, `document.querySelector('[data-role=user] .body').dataset.raw`)
	if !strings.HasPrefix(user, "what do the notes say?\n\nFile: notes.txt\n````\nline one\n```\ncode in the notes\n```\n````") {
		t.Errorf("the message sent is %q", user)
	}
	if n := eval[float64](b, `document.querySelectorAll('[data-testid=chip]').length`); n != 0 {
		t.Errorf("%v chips left after sending", n)
	}
	b.waitJS(`document.getElementById('chat-title').textContent !== 'New chat'`, 5*time.Second)
	if got := eval[string](b, `document.getElementById('chat-title').textContent`); got != "what do the notes say?" {
		t.Errorf("the chat is named %q, not after what was typed", got)
	}
	b.shot("attach-sent")

	// Too long for the context: refused before sending, kept attached.
	big := filepath.Join(base, "big.log")
	os.WriteFile(big, []byte(strings.Repeat("a log line that goes on\n", st.Info.ContextLength/4)), 0o644)
	b.run(chromedp.SetUploadFiles("#attach-input", []string{big}, chromedp.ByQuery))
	b.waitJS(`document.querySelectorAll('[data-testid=chip]').length === 1`, 5*time.Second)
	b.run(chromedp.SetValue("#composer-input", "and this?", chromedp.ByQuery), chromedp.Click("[data-testid=send]", chromedp.ByQuery))
	b.waitJS(`!document.getElementById('error-banner').hidden`, 5*time.Second)
	if got := eval[string](b, `document.getElementById('error-text').textContent`); !strings.Contains(got, "more than the") || !strings.Contains(got, "Remove a file") {
		t.Errorf("the banner reads %q", got)
	}
	if n := eval[float64](b, `document.querySelectorAll('[data-testid=message]').length`); n != 2 {
		t.Errorf("%v messages: the refused one was sent", n)
	}
	if n := eval[float64](b, `document.querySelectorAll('[data-testid=chip]').length`); n != 1 {
		t.Errorf("%v chips after the refusal, want the file still attached", n)
	}
	b.shot("attach-too-long")
}
