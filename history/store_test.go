package history

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/npuchat/npuchat/internal/golden"
)

var ctx = context.Background()

func fixedClock() func() time.Time {
	t := time.Date(2026, 12, 2, 15, 45, 1, 0, time.UTC)
	return func() time.Time { t = t.Add(time.Second); return t }
}

func openTest(t *testing.T, path string) *Store {
	t.Helper()
	st, err := Open(ctx, path, Options{Now: fixedClock(), BusyTimeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func must[T any](t *testing.T) func(T, error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

func TestSchemaVersionMatchesMigrations(t *testing.T) {
	if SchemaVersion != len(migrations) {
		t.Fatalf("SchemaVersion %d, %d migrations", SchemaVersion, len(migrations))
	}
}

func TestConversationLifecycle(t *testing.T) {
	st := openTest(t, filepath.Join(t.TempDir(), "history.db"))
	temp := 0.2
	a := must[*Conversation](t)(st.Create(ctx, "", Settings{SystemPrompt: "Be brief.", Temperature: &temp}))
	b := must[*Conversation](t)(st.Create(ctx, "second", Settings{}))
	if a.Temperature == nil || *a.Temperature != 0.2 || a.SystemPrompt != "Be brief." || a.TopP != nil {
		t.Fatalf("settings not kept: %+v", a)
	}
	must[*Message](t)(st.AddUser(ctx, a.ID, "What is   an NPU?\nTell me."))
	ans := must[*Message](t)(st.StartAnswer(ctx, a.ID, "minicpm5:2b"))
	if !ans.Cut || ans.CutReason != CutInterrupted {
		t.Fatalf("a started answer must be cut until finished: %+v", ans)
	}
	for _, piece := range []string{"A neural ", "processing ", "unit."} {
		if err := st.AppendText(ctx, ans.ID, piece); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.FinishAnswer(ctx, ans.ID, Stats{Engine: "cpu", PromptTokens: 9, CompletionTokens: 4, ContextLength: 4096, TTFTMillis: 12, TokensPerSecond: 11.5, FinishReason: "stop"}); err != nil {
		t.Fatal(err)
	}
	msgs := must[[]Message](t)(st.Messages(ctx, a.ID))
	if len(msgs) != 2 || msgs[1].Content != "A neural processing unit." || msgs[1].Cut || msgs[1].Stats == nil || msgs[1].Stats.Engine != "cpu" || msgs[1].Stats.Model != "minicpm5:2b" {
		t.Fatalf("messages: %+v", msgs)
	}
	// The first message titled the conversation, and it is now the newest.
	list := must[[]Conversation](t)(st.List(ctx, 0))
	if len(list) != 2 || list[0].ID != a.ID || list[0].Title != "What is an NPU? Tell me." || list[1].ID != b.ID {
		t.Fatalf("list: %+v", list)
	}
	title := "Renamed"
	if c := must[*Conversation](t)(st.Update(ctx, b.ID, Patch{Title: &title})); c.Title != "Renamed" {
		t.Fatalf("rename: %+v", c)
	}
	// Editing the user message drops it and the answer.
	if err := st.Truncate(ctx, a.ID, msgs[0].ID); err != nil {
		t.Fatal(err)
	}
	if n := len(must[[]Message](t)(st.Messages(ctx, a.ID))); n != 0 {
		t.Fatalf("%d messages left after truncate", n)
	}
	if err := st.Truncate(ctx, b.ID, msgs[0].ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("truncate a message of another conversation: %v", err)
	}
	must[*Message](t)(st.AddUser(ctx, a.ID, "again"))
	if err := st.Delete(ctx, a.ID); err != nil {
		t.Fatal(err)
	}
	var left int
	st.db.QueryRow(`SELECT count(*) FROM messages WHERE conversation_id = ?`, a.ID).Scan(&left)
	if left != 0 {
		t.Fatalf("deleting a conversation left %d messages (foreign keys off?)", left)
	}
	if _, err := st.Get(ctx, a.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("get deleted: %v", err)
	}
	if err := st.Delete(ctx, a.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("delete twice: %v", err)
	}
}

func TestBadValuesRefused(t *testing.T) {
	st := openTest(t, filepath.Join(t.TempDir(), "history.db"))
	c := must[*Conversation](t)(st.Create(ctx, "x", Settings{}))
	hot, neg, tiny, huge := 3.0, -1, MinContext-1, MaxContext+1
	for name, err := range map[string]error{
		"empty message":   second(st.AddUser(ctx, c.ID, "  \n")),
		"not UTF-8":       second(st.AddUser(ctx, c.ID, "\xff\xfe")),
		"hot temperature": second(st.Create(ctx, "", Settings{Temperature: &hot})),
		"negative tokens": second(st.Create(ctx, "", Settings{MaxTokens: &neg})),
		"tiny context":    second(st.Create(ctx, "", Settings{ContextLength: &tiny})),
		"huge context":    second(st.Update(ctx, c.ID, Patch{Settings: &Settings{ContextLength: &huge}})),
	} {
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: got %v, want ErrInvalid", name, err)
		}
	}
	if _, err := st.AddUser(ctx, 12345, "hi"); !errors.Is(err, ErrNotFound) {
		t.Errorf("message to a missing conversation: %v", err)
	}
	long := strings.Repeat("é", 500)
	if c := must[*Conversation](t)(st.Create(ctx, long, Settings{})); len([]rune(c.Title)) != MaxTitle {
		t.Errorf("title of %d runes kept as %d", 500, len([]rune(c.Title)))
	}
}

func second[T any](_ T, err error) error { return err }

func TestSearch(t *testing.T) {
	st := openTest(t, filepath.Join(t.TempDir(), "history.db"))
	pasta := must[*Conversation](t)(st.Create(ctx, "Dinner ideas", Settings{}))
	must[*Message](t)(st.AddUser(ctx, pasta.ID, "How long do I boil spaghetti?"))
	npu := must[*Conversation](t)(st.Create(ctx, "", Settings{}))
	must[*Message](t)(st.AddUser(ctx, npu.ID, "Explain the XDNA 2 NPU"))
	ans := must[*Message](t)(st.StartAnswer(ctx, npu.ID, "m"))
	st.AppendText(ctx, ans.ID, "It has 32 AIE tiles; ")
	st.AppendText(ctx, ans.ID, "spaghetti is not involved.")
	// An answer is indexed once, when it ends.
	st.FinishAnswer(ctx, ans.ID, Stats{Engine: "cpu"})

	ids := func(cs []Conversation) []int64 {
		var out []int64
		for _, c := range cs {
			out = append(out, c.ID)
		}
		return out
	}
	cases := []struct {
		query string
		want  []int64
	}{
		{"spaghetti", []int64{npu.ID, pasta.ID}},
		{"spag", []int64{npu.ID, pasta.ID}}, // the last word is a prefix
		{"tiles spaghetti", []int64{npu.ID}},
		{"dinner", []int64{pasta.ID}}, // titles too
		{"XDNA", []int64{npu.ID}},
		{"nothing-here", nil},
		// FTS5 syntax and SQL in the text are plain words.
		{`"`, nil},
		{`spaghetti OR dinner`, nil},
		{`NEAR(spaghetti boil)`, nil},
		{`*`, nil},
		{`'); DROP TABLE messages; --`, nil},
		{`content:spaghetti`, nil},
	}
	for _, c := range cases {
		got, err := st.Search(ctx, c.query, 0)
		if err != nil {
			t.Errorf("search %q: %v", c.query, err)
			continue
		}
		if fmt.Sprint(ids(got)) != fmt.Sprint(c.want) {
			t.Errorf("search %q: got %v, want %v", c.query, ids(got), c.want)
		}
	}
	got := must[[]Conversation](t)(st.Search(ctx, "tiles", 0))
	if len(got) != 1 || !strings.Contains(got[0].Snippet, "tiles") {
		t.Errorf("snippet: %+v", got)
	}
	if n := len(must[[]Message](t)(st.Messages(ctx, pasta.ID))); n != 1 {
		t.Errorf("the DROP TABLE search changed the data: %d messages", n)
	}
}

// v1 is a database as the first release wrote it.
func writeV1(t *testing.T, path string) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, q := range []string{
		migrations[0],
		`PRAGMA user_version = 1`,
		`INSERT INTO conversations (id, title, created_at, updated_at) VALUES (7, 'Old chat', 1000, 2000)`,
		`INSERT INTO messages (conversation_id, role, content, cut, created_at) VALUES (7, 'user', 'an old question about kernels', 0, 1000)`,
		`INSERT INTO messages (conversation_id, role, content, cut, created_at) VALUES (7, 'assistant', 'an old answer', 1, 1500)`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
}

func TestMigratesOlderSchema(t *testing.T) {
	path := filepath.Join(t.TempDir(), "history.db")
	writeV1(t, path)
	st := openTest(t, path)
	var v int
	st.db.QueryRow(`PRAGMA user_version`).Scan(&v)
	if v != SchemaVersion {
		t.Fatalf("schema %d after open, want %d", v, SchemaVersion)
	}
	msgs := must[[]Message](t)(st.Messages(ctx, 7))
	if len(msgs) != 2 || msgs[0].Content != "an old question about kernels" || !msgs[1].Cut {
		t.Fatalf("messages after migration: %+v", msgs)
	}
	if got := must[[]Conversation](t)(st.Search(ctx, "kernels", 0)); len(got) != 1 || got[0].ID != 7 {
		t.Fatalf("old messages are not searchable after migration: %+v", got)
	}
	if got := must[[]Conversation](t)(st.Search(ctx, "old chat", 0)); len(got) != 1 {
		t.Fatalf("old titles are not searchable after migration: %+v", got)
	}
	if st.Notice() != "" {
		t.Fatalf("a migration is not a problem to report: %q", st.Notice())
	}
}

func TestUnreadableDatabaseMovedAside(t *testing.T) {
	valid := func(t *testing.T, path string) []byte {
		st := must[*Store](t)(Open(ctx, path, Options{}))
		c := must[*Conversation](t)(st.Create(ctx, "x", Settings{}))
		must[*Message](t)(st.AddUser(ctx, c.ID, strings.Repeat("lost words ", 2000)))
		st.Close()
		return must[[]byte](t)(os.ReadFile(path))
	}
	cases := []struct {
		name, kind string
		write      func(t *testing.T, path string) []byte
	}{
		{"not a database", "corrupt", func(t *testing.T, path string) []byte {
			b := []byte("this is a text file someone saved as history.db\n")
			os.WriteFile(path, b, 0o600)
			return b
		}},
		{"damaged pages", "corrupt", func(t *testing.T, path string) []byte {
			b := valid(t, path)
			for i := 4096; i < len(b); i++ { // keep the header page, scramble the rest
				b[i] ^= 0x5a
			}
			os.WriteFile(path, b, 0o600)
			return b
		}},
		{"newer schema", "newer", func(t *testing.T, path string) []byte {
			valid(t, path)
			db, _ := sql.Open("sqlite", "file:"+path)
			db.Exec(`PRAGMA user_version = 99`)
			db.Close()
			return must[[]byte](t)(os.ReadFile(path))
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "history.db")
			orig := c.write(t, path)
			st := openTest(t, path)
			aside := path + "." + c.kind + "-20261202-154502"
			got, err := os.ReadFile(aside)
			if err != nil {
				entries, _ := os.ReadDir(dir)
				t.Fatalf("not moved aside as %s: %v (folder: %v)", aside, err, entries)
			}
			if !bytes.Equal(got, orig) {
				t.Fatal("the moved database is not the user's file byte for byte")
			}
			if !strings.Contains(st.Notice(), aside) || !strings.Contains(st.Notice(), "nothing was deleted") {
				t.Fatalf("notice does not say where it went: %q", st.Notice())
			}
			// The new history works.
			conv := must[*Conversation](t)(st.Create(ctx, "fresh", Settings{}))
			must[*Message](t)(st.AddUser(ctx, conv.ID, "hello"))
		})
	}
}

// TestMain doubles as the helper process of the lock and kill tests.
func TestMain(m *testing.M) {
	switch os.Getenv("HISTORY_HELPER") {
	case "lock":
		helperLock(os.Getenv("HISTORY_DB"))
		return
	case "stream":
		helperStream(os.Getenv("HISTORY_DB"))
		return
	}
	os.Exit(m.Run())
}

// helperLock holds an exclusive lock on the database until stdin closes.
func helperLock(path string) {
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=locking_mode(EXCLUSIVE)")
	if err != nil {
		panic(err)
	}
	db.SetMaxOpenConns(1)
	if _, err := db.Exec(`BEGIN EXCLUSIVE; UPDATE conversations SET title = title; COMMIT`); err != nil {
		panic(err)
	}
	fmt.Println("locked")
	bufio.NewReader(os.Stdin).ReadString('\n')
	db.Close()
}

// helperStream streams an answer into the database forever, printing
// each piece after it is stored, until it is killed.
func helperStream(path string) {
	st, err := Open(ctx, path, Options{})
	if err != nil {
		panic(err)
	}
	c, _ := st.Create(ctx, "", Settings{})
	st.AddUser(ctx, c.ID, "count")
	m, _ := st.StartAnswer(ctx, c.ID, "m")
	for i := 0; ; i++ {
		piece := fmt.Sprintf("w%d ", i)
		if err := st.AppendText(ctx, m.ID, piece); err != nil {
			panic(err)
		}
		fmt.Print(piece) // blocks once the test stops reading: the kill comes mid-answer
		os.Stdout.Sync()
	}
}

func helper(t *testing.T, kind, path string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "HISTORY_HELPER="+kind, "HISTORY_DB="+path)
	return cmd
}

func TestLockedByAnotherProcess(t *testing.T) {
	path := filepath.Join(t.TempDir(), "history.db")
	st := must[*Store](t)(Open(ctx, path, Options{}))
	c := must[*Conversation](t)(st.Create(ctx, "kept", Settings{}))
	st.Close()

	cmd := helper(t, "lock", path)
	stdin, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer stdin.Close()
	if line, _ := bufio.NewReader(out).ReadString('\n'); line != "locked\n" {
		t.Fatalf("helper: %q", line)
	}
	now := time.Now()
	h := NewHandle(path, Options{BusyTimeout: 200 * time.Millisecond, Now: func() time.Time { return now }})
	defer h.Close()
	if _, err := h.Store(ctx); !errors.Is(err, ErrLocked) {
		t.Fatalf("open while locked: %v, want ErrLocked", err)
	}
	if p := h.Problem(); !strings.Contains(p, "locked by another program") {
		t.Fatalf("problem for the page: %q", p)
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	for _, e := range entries {
		if strings.Contains(e.Name(), "corrupt") || strings.Contains(e.Name(), "newer") {
			t.Fatalf("a locked database was moved aside: %s", e.Name())
		}
	}
	// Freed, the handle opens it on a later use, with the data intact.
	stdin.Close()
	cmd.Wait()
	now = now.Add(3 * time.Second)
	st2, err := h.Store(ctx)
	if err != nil {
		t.Fatalf("open after the lock was released: %v", err)
	}
	if got := must[*Conversation](t)(st2.Get(ctx, c.ID)); got.Title != "kept" {
		t.Fatalf("data after lock: %+v", got)
	}
	if h.Problem() != "" {
		t.Fatalf("problem after recovery: %q", h.Problem())
	}
}

func TestKilledWriterKeepsEveryStoredWord(t *testing.T) {
	path := filepath.Join(t.TempDir(), "history.db")
	cmd := helper(t, "stream", path)
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(out)
	var shown strings.Builder
	for shown.Len() < 300 {
		piece, err := r.ReadString(' ')
		if err != nil {
			t.Fatal(err)
		}
		shown.WriteString(piece)
	}
	cmd.Process.Kill() // SIGKILL: no deferred close, no checkpoint
	cmd.Wait()
	st := openTest(t, path)
	msgs := must[[]Message](t)(st.Messages(ctx, 1))
	if len(msgs) != 2 {
		t.Fatalf("messages after kill: %+v", msgs)
	}
	ans := msgs[1]
	if !strings.HasPrefix(ans.Content, shown.String()) {
		t.Fatalf("stored answer %q does not hold everything that was shown %q", ans.Content, shown.String())
	}
	if !ans.Cut || ans.CutReason != CutInterrupted {
		t.Fatalf("an answer cut by a kill must be stored as cut: %+v", ans)
	}
}

func TestExport(t *testing.T) {
	st := openTest(t, filepath.Join(t.TempDir(), "history.db"))
	c := must[*Conversation](t)(st.Create(ctx, "Export me", Settings{SystemPrompt: "Answer in English.\nBe brief."}))
	must[*Message](t)(st.AddUser(ctx, c.ID, "Show me Go code"))
	a := must[*Message](t)(st.StartAnswer(ctx, c.ID, "minicpm5:2b"))
	st.AppendText(ctx, a.ID, "```go\nfmt.Println(\"hi\")\n```\n")
	st.FinishAnswer(ctx, a.ID, Stats{Engine: "cpu"})
	must[*Message](t)(st.AddUser(ctx, c.ID, "More"))
	b := must[*Message](t)(st.StartAnswer(ctx, c.ID, "minicpm5:2b"))
	st.AppendText(ctx, b.ID, "Sure, here")
	st.CutAnswer(ctx, b.ID, CutStopped, Stats{Engine: "cpu"})
	// Answered again, with thoughts: the cut answer stays as version 1.
	re := must[*Turn](t)(st.Regenerate(ctx, c.ID))
	b2 := must[*Message](t)(st.Answer(ctx, re, "minicpm5:2b"))
	st.AppendThinking(ctx, b2.ID, "They want more.")
	st.AppendText(ctx, b2.ID, "Here is more.")
	st.FinishAnswer(ctx, b2.ID, Stats{Engine: "cpu"})
	e := must[*Export](t)(st.Load(ctx, c.ID))
	for _, f := range []struct {
		name  string
		write func(*bytes.Buffer) error
	}{
		{"export.md", func(b *bytes.Buffer) error { return e.WriteMarkdown(b) }},
		{"export.json", func(b *bytes.Buffer) error { return e.WriteJSON(b) }},
	} {
		var buf bytes.Buffer
		if err := f.write(&buf); err != nil {
			t.Fatal(err)
		}
		golden.Assert(t, filepath.Join("testdata", f.name), buf.Bytes())
	}
}
