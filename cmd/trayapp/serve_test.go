package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/npuchat/npuchat/engine/simd"
	"github.com/npuchat/npuchat/engine/testmodel"
	"github.com/npuchat/npuchat/gui/desktoptest"
	"github.com/npuchat/npuchat/web/webtest"
)

// serveInProcess runs `npuchat serve args...` with a private data folder
// and returns its base URL; it stops when the test ends.
func serveInProcess(t *testing.T, args ...string) string {
	t.Helper()
	return serveInProcessArgs(t, append([]string{"serve", "--addr", "127.0.0.1:0"}, args...))
}

// serveInProcessArgs runs `npuchat args...` (which must serve) with a
// private data folder and no display, and returns its base URL.
func serveInProcessArgs(t *testing.T, args []string) string {
	t.Helper()
	url, _ := serveInProcessLink(t, args)
	return url
}

// serveInProcessLink is serveInProcessArgs that also returns the
// one-time link to the page that `serve` prints on its second line ("" for
// a command that prints none).
func serveInProcessLink(t *testing.T, args []string) (url, link string) {
	t.Helper()
	home := t.TempDir()
	envs := map[string]string{"HOME": home, "NPUCHAT_DATA": filepath.Join(home, "data"), "FLM_MODEL_PATH": filepath.Join(home, "flm"),
		simd.EnvCeiling: os.Getenv(simd.EnvCeiling)} // scripts/test-ceilings
	pr, pw := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int)
	go func() {
		done <- run(ctx, &Env{Stdin: strings.NewReader(""), Stdout: pw, Stderr: io.Discard, Getenv: func(k string) string { return envs[k] }, GOOS: "linux"}, args)
		pw.Close()
	}()
	br := bufio.NewReader(pr)
	line, err := br.ReadString('\n')
	if err != nil {
		t.Fatalf("serve printed nothing: %v", err)
	}
	url, _, _ = strings.Cut(strings.TrimPrefix(line, "NPU Chat is serving on "), " ")
	if args[0] == "serve" {
		second, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("serve printed no link: %v", err)
		}
		if i := strings.Index(second, "http://"); i >= 0 {
			link = strings.TrimSpace(second[i:])
		}
	}
	go io.Copy(io.Discard, br)
	t.Cleanup(func() {
		cancel()
		select {
		case code := <-done:
			if code != 0 {
				t.Errorf("serve exited with %d", code)
			}
		case <-time.After(60 * time.Second):
			t.Error("serve did not stop within 60 s")
		}
	})
	return url, link
}

func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatal(err)
	}
}

func TestServeWithNoModelInstalledSaysWhy(t *testing.T) {
	url := serveInProcess(t)
	var st struct {
		State, Reason, Model string
	}
	desktoptest.Eventually(t, 60*time.Second, "the status saying why the model is off", func() error {
		getJSON(t, url+"/api/status", &st)
		if st.Reason == "" || st.State == "loading" {
			return fmt.Errorf("status %+v", st)
		}
		return nil
	})
	if st.State != "off" || st.Model != "minicpm5:2b" || !strings.Contains(st.Reason, "npuchat install minicpm5:2b") {
		t.Fatalf("status %+v", st)
	}
	resp, err := http.Get(url + "/")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("page: %v %v", resp, err)
	}
	resp.Body.Close()
	var rep struct {
		Ready   *bool  `json:"ready"`
		Summary string `json:"summary"`
		Checks  []struct{ ID, Status string }
	}
	getJSON(t, url+"/api/check", &rep) // this machine has no NPU
	if rep.Ready == nil || *rep.Ready || rep.Summary == "" || len(rep.Checks) == 0 {
		t.Fatalf("check report %+v", rep)
	}
	resp, err = http.Post(url+"/v1/chat/completions", "application/json", strings.NewReader(`{"model":"minicpm5:2b","messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 503 || !strings.Contains(string(b), "npuchat install minicpm5:2b") {
		t.Fatalf("chat without a model: %d %s", resp.StatusCode, b)
	}
}

// TestServeALocalModel serves a small generated Hugging Face folder with
// the in-process engine under --name and chats with it.
func TestServeALocalModel(t *testing.T) {
	w, err := testmodel.Random(3, testmodel.Qwen3Small())
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "tiny-qwen")
	if err := testmodel.WriteHF(dir, w, testmodel.HFOptions{}); err != nil {
		t.Fatal(err)
	}
	url := serveInProcess(t, "--model", dir, "--name", "tiny", "--engine", "cpu")
	body := `{"model":"tiny","max_tokens":5,"temperature":0,"messages":[{"role":"user","content":"hello"}]}`
	resp, err := http.Post(url+"/v1/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Choices []struct {
			Message      struct{ Content string } `json:"message"`
			FinishReason string                   `json:"finish_reason"`
		} `json:"choices"`
		Usage struct {
			PromptTokens     int `json:"prompt_tokens"`
			CompletionTokens int `json:"completion_tokens"`
		} `json:"usage"`
		Fingerprint string `json:"system_fingerprint"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != 200 {
		t.Fatalf("%d %v", resp.StatusCode, err)
	}
	if out.Usage.CompletionTokens == 0 || out.Usage.PromptTokens < 5 || out.Fingerprint != "npuchat-cpu" {
		t.Fatalf("answer %+v", out)
	}
	var models struct {
		Data []struct{ ID string } `json:"data"`
	}
	getJSON(t, url+"/v1/models", &models)
	ids := []string{}
	for _, m := range models.Data {
		ids = append(ids, m.ID)
	}
	if !strings.Contains(strings.Join(ids, ","), "tiny") {
		t.Fatalf("models %v", ids)
	}
}

// TestServePrintsAOneTimeLink: `npuchat serve` prints a link to the page
// that starts the session the history and the settings need; it works
// once, and without it those routes say how to get in.
func TestServePrintsAOneTimeLink(t *testing.T) {
	url, link := serveInProcessLink(t, []string{"serve", "--addr", "127.0.0.1:0"})
	if !strings.HasPrefix(link, url+"/open?t=") {
		t.Fatalf("serve printed the link %q; want one on %s", link, url)
	}
	resp, err := http.Get(url + "/api/conversations")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 401 || !strings.Contains(string(body), "open the link NPU Chat printed when it started") || strings.ContainsAny(string(body), "`") {
		t.Fatalf("the history without the link: %d %s", resp.StatusCode, body)
	}
	cookie, err := webtest.Login(url, strings.TrimPrefix(link, url))
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest("GET", url+"/api/conversations", nil)
	req.Header.Set("Cookie", cookie)
	if resp, err = http.DefaultClient.Do(req); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("the history with the link's session: %d", resp.StatusCode)
	}
	if _, err := webtest.Login(url, strings.TrimPrefix(link, url)); err == nil {
		t.Fatal("the printed link worked twice")
	}
}
