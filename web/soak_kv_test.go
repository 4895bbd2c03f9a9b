package web_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/npuchat/npuchat/engine/testmodel"
	"github.com/npuchat/npuchat/enginekind"
	"github.com/npuchat/npuchat/history"
	"github.com/npuchat/npuchat/service"
	"github.com/npuchat/npuchat/service/backend"
	"github.com/npuchat/npuchat/service/cpu"
	"github.com/npuchat/npuchat/web"
	"github.com/npuchat/npuchat/web/webtest"
)

// kvChange is what another process of the user does to a chat's KV file
// (issue 38, items 2 and 6): cut it short, overwrite its bytes in place,
// put a FIFO in its place, delete it; "none" leaves it, so that the soak
// also reads files back.
type kvChange struct {
	name   string
	change func(path string) error
}

var kvChanges = []kvChange{
	{"none", func(string) error { return nil }},
	{"truncated", func(p string) error { return os.Truncate(p, 4096) }},
	{"overwritten", func(p string) error {
		fi, err := os.Stat(p)
		if err != nil {
			return err
		}
		f, err := os.OpenFile(p, os.O_WRONLY, 0)
		if err != nil {
			return err
		}
		defer f.Close()
		// everything after the first 4 KiB (the head): keys, values,
		// checksums
		if fi.Size() > 4096 {
			_, err = f.WriteAt(bytes.Repeat([]byte{0x7b}, int(fi.Size()-4096)), 4096)
		}
		return err
	}},
	{"replaced by a FIFO", func(p string) error {
		if err := os.Remove(p); err != nil {
			return err
		}
		return mkfifo(p)
	}},
	{"deleted", os.Remove},
}

// lineCount counts the lines written to it (the disk cache's warnings).
type lineCount struct {
	mu sync.Mutex
	n  int
}

func (c *lineCount) Write(p []byte) (int, error) {
	c.mu.Lock()
	c.n += bytes.Count(p, []byte("\n"))
	c.mu.Unlock()
	return len(p), nil
}

func (c *lineCount) lines() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// kvSoakServer starts a server on the in-process engine over the small
// model at path, with a history and the KV disk cache in kvDir ("" for
// none: a fresh server, nothing cached on disk); the cache's warnings
// (files ignored) are counted in warnings.
func kvSoakServer(t *testing.T, path string, opts cpu.Options, warnings *lineCount) *webtest.Server {
	t.Helper()
	opts.Path, opts.Threads, opts.Log = path, 1, slog.New(slog.NewTextHandler(warnings, nil))
	h := history.NewHandle(filepath.Join(t.TempDir(), "history.db"), history.Options{})
	t.Cleanup(func() { h.Close() })
	return webtest.Start(t, webtest.Config{
		NewBackend: func(_ context.Context, model string, kind enginekind.Kind) (backend.Backend, error) {
			o := opts
			o.Name = model
			return cpu.New(o), nil
		},
		Web:     web.Options{History: h},
		Service: service.Options{KeepAlive: -1},
	})
}

// pageCall is a page route's request with the server's session.
func pageCall(ctx context.Context, ts *webtest.Server, method, path, body string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, method, ts.URL+path, strings.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Cookie", ts.Cookie)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	var b strings.Builder
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<16), 1<<24)
	for sc.Scan() {
		b.WriteString(sc.Text())
		b.WriteByte('\n')
	}
	return resp.StatusCode, b.String(), sc.Err()
}

// kvAnswer is one answer of the page's route: the text streamed, the
// message stored, and the prompt tokens from a cache.
type kvAnswer struct {
	streamed string
	stored   history.Message
}

// sendChat sends a message to a chat on the page's route and reads its
// answer to the end.
func sendChat(ctx context.Context, ts *webtest.Server, id int64, text string) (kvAnswer, error) {
	st, body, err := pageCall(ctx, ts, "POST", fmt.Sprintf("/api/conversations/%d/messages", id), fmt.Sprintf(`{"content": %q}`, text))
	if err != nil {
		return kvAnswer{}, err
	}
	if st != 200 {
		return kvAnswer{}, fmt.Errorf("status %d: %s", st, tail(body, 300))
	}
	var a kvAnswer
	var sb strings.Builder
	var name string
	done := false
	for _, line := range strings.Split(body, "\n") {
		if n, ok := strings.CutPrefix(line, "event: "); ok {
			name = n
			continue
		}
		d, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			continue
		}
		switch name {
		case "token":
			var v struct{ Text string }
			if err := json.Unmarshal([]byte(d), &v); err != nil {
				return kvAnswer{}, fmt.Errorf("token event %s: %w", d, err)
			}
			sb.WriteString(v.Text)
		case "done":
			if err := json.Unmarshal([]byte(d), &a.stored); err != nil {
				return kvAnswer{}, fmt.Errorf("done event %s: %w", d, err)
			}
			done = true
		case "error":
			return kvAnswer{}, fmt.Errorf("error event: %s", d)
		}
	}
	if !done {
		return kvAnswer{}, fmt.Errorf("the answer did not end: %s", tail(body, 300))
	}
	a.streamed = sb.String()
	return a, nil
}

// createChat creates a chat at temperature 0 with a system prompt long
// enough for a KV file.
func createChat(ctx context.Context, ts *webtest.Server, i int) (int64, error) {
	sys := fmt.Sprintf("you are chat %d, a model that knows about cats and dogs and trees and rivers. ", i)
	body := fmt.Sprintf(`{"title": "kv %d", "system_prompt": %q, "temperature": 0, "max_tokens": 12}`, i, strings.Repeat(sys, 4))
	st, out, err := pageCall(ctx, ts, "POST", "/api/conversations", body)
	if err != nil || st != 201 {
		return 0, fmt.Errorf("create a chat: %d %v %s", st, err, out)
	}
	var c history.Conversation
	if err := json.Unmarshal([]byte(out), &c); err != nil {
		return 0, fmt.Errorf("create a chat: %w in %s", err, out)
	}
	return c.ID, nil
}

// chatKVFiles are the regular KV files of a chat in dir.
func chatKVFiles(t *testing.T, dir string, id int64) []string {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, fmt.Sprintf("chat-%d-*.kv", id)))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, n := range names {
		if fi, err := os.Lstat(n); err == nil && fi.Mode().IsRegular() {
			out = append(out, n)
		}
	}
	return out
}

// kvSoakMode is how the KV soak's chats come to have KV files.
type kvSoakMode struct {
	name string
	// restart stops the model between rounds (every chat's KV written
	// at unload) and starts it again (the folder indexed anew); without
	// it, the model stays on with a KV budget that holds about one chat,
	// so chats are dropped from memory (written in the background) and
	// read back while the others go on.
	restart  bool
	budget   int64    // cpu.Options.KVBudget (0: the default)
	parallel int      // cpu.Options.Parallel (0: the default)
	moments  []string // when a chat's file is changed
}

// kvFigures are what a KV soak did.
type kvFigures struct {
	rounds, requests, compared, fromDisk, warnings, fifos int
	changed                                               map[string]int
}

// TestSoakKVFilesChanged (issue 38, "Deliver", last bullet): chats on the
// page's routes continue over several rounds while each chat's KV file
// is cut short, overwritten, replaced by a FIFO, deleted or left. With
// restarts: between rounds the model stops (writing every chat's KV
// file) and starts again, and the change comes with the model off, once
// it is on, after the chat was opened (its KV read back) or while the
// answers run. With evictions: the model stays on with a KV budget of
// about one chat, and the change comes between rounds, after the chat
// was opened or while the answers run. Every answer, at temperature 0,
// must equal a fresh server's answer to the same chat (no NUL
// characters, no crash, no hang: each wait has a failure-only deadline),
// and files must be read back (prompt tokens from the cache after a
// restart; every untouched file, with restarts), or the soak tests
// nothing.
func TestSoakKVFilesChanged(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the soak test runs in the full suite")
	}
	w, err := testmodel.Random(5, testmodel.MiniCPM5Small())
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "m.gguf")
	if err := testmodel.WriteGGUF(path, w, testmodel.F32); err != nil {
		t.Fatal(err)
	}
	for _, mode := range []kvSoakMode{
		{name: "restarts", restart: true, moments: []string{"model off", "model on", "chat opened", "answering"}},
		{name: "evictions", budget: kvEvictBudget, parallel: 1, moments: []string{"between rounds", "chat opened", "answering"}},
	} {
		t.Run(mode.name, func(t *testing.T) {
			f := kvSoak(t, path, mode)
			t.Logf("KV soak, %s: %d rounds of 4 chats, %d requests, %d answers compared with a fresh server's, %d with prompt tokens from the cache (with restarts: from KV files); files changed: %v (%d FIFOs in the folder at the end); %d warnings of files ignored",
				mode.name, f.rounds, f.requests, f.compared, f.fromDisk, f.changed, f.fifos, f.warnings)
		})
	}
}

// kvEvictBudget is the evictions soak's KV budget: 896 positions of the
// small model's 512 bytes (F32 keys and values), one or two of the
// chats (200 to 500 positions each), so the others are dropped to disk.
const kvEvictBudget = 896 * 512

// kvSoak runs the KV soak in one mode.
func kvSoak(t *testing.T, path string, mode kvSoakMode) kvFigures {
	kvDir := t.TempDir()
	var warnings lineCount
	ts := kvSoakServer(t, path, cpu.Options{KVDir: kvDir, KVBudget: mode.budget, Parallel: mode.parallel}, &warnings)
	fresh := kvSoakServer(t, path, cpu.Options{}, &lineCount{})
	var err error

	// Each pass: four new chats, and every change at every moment once
	// (5 × 4 plans with restarts: four chats' files changed in each of
	// five restarts, after a first round that writes the files). The
	// suite runs two passes; -soak runs one more per 20 s.
	passes := max(1, int(*soakFor/(20*time.Second)))
	type plan struct {
		change kvChange
		moment string
	}
	var onePass []plan
	for _, c := range kvChanges {
		if c.name == "replaced by a FIFO" && !haveFIFOs {
			continue
		}
		for _, m := range mode.moments {
			onePass = append(onePass, plan{c, m})
		}
	}
	rng := rand.New(rand.NewPCG(38, 2))
	const chats = 4
	rounds := 1 + (len(onePass)+chats-1)/chats
	// A failure-only deadline for the whole soak: a hang ends here,
	// with the answers that did not come named.
	ctx, cancel := context.WithTimeout(t.Context(), time.Duration(passes)*5*time.Minute)
	defer cancel()
	var requests, compared, fromDisk, roundsRun int
	changed := map[string]int{} // files changed, by change (in the test's goroutine only)

	// apply makes a change to every regular KV file of a chat.
	apply := func(id int64, c kvChange) {
		for _, p := range chatKVFiles(t, kvDir, id) {
			if err := c.change(p); err != nil {
				t.Errorf("%s %s: %v", c.name, p, err)
				continue
			}
			if c.name != "none" {
				changed[c.name]++
			}
		}
	}
	startModel := func() {
		if st, out, err := pageCall(ctx, ts, "POST", "/api/model/start", `{"model":"minicpm5:2b"}`); err != nil || st != 202 {
			t.Fatalf("start: %d %v %s", st, err, out)
		}
		waitUntil(t, "the model on", func() bool { return ts.Manager.Status().State == service.StateOn })
	}

	for pass := 0; pass < passes && !t.Failed(); pass++ {
		allPlans := slices.Clone(onePass)
		rng.Shuffle(len(allPlans), func(i, j int) { allPlans[i], allPlans[j] = allPlans[j], allPlans[i] })
		ids := make([]int64, chats)
		freshIDs := make([]int64, chats)
		for i := range chats {
			if ids[i], err = createChat(ctx, ts, i); err != nil {
				t.Fatal(err)
			}
			if freshIDs[i], err = createChat(ctx, fresh, i); err != nil {
				t.Fatal(err)
			}
		}
		for round := range rounds {
			// Which change each chat's file gets, and when (the first round
			// has no files yet).
			plans := make([]plan, chats)
			if round > 0 {
				for i := range plans {
					plans[i] = allPlans[((round-1)*chats+i)%len(allPlans)]
				}
			}
			if round > 0 && mode.restart {
				// The model stops: every chat's KV goes to its file.
				if st, out, err := pageCall(ctx, ts, "POST", "/api/model/stop", ""); err != nil || st != 200 {
					t.Fatalf("round %d: stop: %d %v %s", round, st, err, out)
				}
				for _, id := range ids {
					waitUntil(t, fmt.Sprintf("chat %d's KV file", id), func() bool { return len(chatKVFiles(t, kvDir, id)) > 0 })
				}
				for i, p := range plans {
					if p.moment == "model off" {
						apply(ids[i], p.change)
					}
				}
				startModel()
				for i, p := range plans {
					switch p.moment {
					case "model on":
						apply(ids[i], p.change)
					case "chat opened":
						if st, out, err := pageCall(ctx, ts, "GET", fmt.Sprintf("/api/conversations/%d", ids[i]), ""); err != nil || st != 200 {
							t.Fatalf("open chat %d: %d %v %s", ids[i], st, err, out)
						}
						apply(ids[i], p.change)
					}
				}
			}
			if round > 0 && !mode.restart {
				for i, p := range plans {
					switch p.moment {
					case "between rounds":
						apply(ids[i], p.change)
					case "chat opened":
						if st, out, err := pageCall(ctx, ts, "GET", fmt.Sprintf("/api/conversations/%d", ids[i]), ""); err != nil || st != 200 {
							t.Fatalf("open chat %d: %d %v %s", ids[i], st, err, out)
						}
						apply(ids[i], p.change)
					}
				}
			}
			// The chats' next answers, all at once on the server under test
			// and on the fresh one, while the remaining changes are made.
			got := make([]kvAnswer, chats)
			want := make([]kvAnswer, chats)
			errs := make([]error, 2*chats)
			var wg sync.WaitGroup
			for i := range chats {
				text := fmt.Sprintf("round %d: tell me about the cat number %d", round, rng.IntN(1000))
				wg.Add(2)
				go func() {
					defer wg.Done()
					got[i], errs[i] = sendChat(ctx, ts, ids[i], text)
				}()
				go func() {
					defer wg.Done()
					want[i], errs[chats+i] = sendChat(ctx, fresh, freshIDs[i], text)
				}()
			}
			if round > 0 {
				for i, p := range plans {
					if p.moment == "answering" {
						apply(ids[i], p.change)
					}
				}
			}
			wg.Wait()
			roundsRun++
			requests += 2 * chats
			for i := range chats {
				if errs[i] != nil || errs[chats+i] != nil {
					t.Fatalf("round %d, chat %d (file %s, %s): %v; the fresh server: %v", round, ids[i], plans[i].change.name, plans[i].moment, errs[i], errs[chats+i])
				}
				g, f := got[i], want[i]
				compared++
				cached := 0
				if g.stored.Stats != nil {
					cached = g.stored.Stats.CachedTokens
				}
				if round > 0 && cached > 0 {
					fromDisk++
				}
				if round > 0 && mode.restart && plans[i].change.name == "none" && cached == 0 {
					// after a restart, only the chat's file holds its prompt
					t.Errorf("round %d, chat %d (file left, %s): no prompt token from its KV file", round, ids[i], plans[i].moment)
				}
				switch {
				case strings.ContainsRune(g.stored.Content, 0) && !strings.ContainsRune(f.stored.Content, 0):
					t.Errorf("round %d, chat %d (file %s, %s): NUL characters in the answer %q", round, ids[i], plans[i].change.name, plans[i].moment, g.stored.Content)
				case g.stored.Content != f.stored.Content || g.streamed != f.streamed || g.streamed != g.stored.Content:
					t.Errorf("round %d, chat %d (file %s, %s): answered %q (streamed %q), a fresh server %q",
						round, ids[i], plans[i].change.name, plans[i].moment, g.stored.Content, g.streamed, f.stored.Content)
				case g.stored.Cut != f.stored.Cut:
					t.Errorf("round %d, chat %d: cut %v (%s), a fresh server's %v", round, ids[i], g.stored.Cut, g.stored.CutReason, f.stored.Cut)
				}
			}
			if t.Failed() {
				break
			}
		}
	}
	// The server is still whole: its status agrees, and a chat goes on.
	if st := ts.Manager.Status(); st.State != service.StateOn || st.Running != 0 || st.Waiting != 0 {
		t.Errorf("after the soak: %+v", st)
	}
	fifos := 0
	filepath.WalkDir(kvDir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type()&fs.ModeNamedPipe != 0 {
			fifos++
		}
		return nil
	})
	if fromDisk == 0 {
		t.Error("no answer took its prompt from a KV file: the soak did not read the disk cache")
	}
	total := 0
	for _, n := range changed {
		total += n
	}
	if total == 0 {
		t.Error("no KV file was changed")
	}
	return kvFigures{rounds: roundsRun, requests: requests, compared: compared, fromDisk: fromDisk,
		warnings: warnings.lines(), fifos: fifos, changed: changed}
}
