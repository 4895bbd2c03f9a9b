package history

import (
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// damagedHistory writes a history of n chats, each with a question and
// an answer, closes it, and scrambles the root page of table.
func damagedHistory(t *testing.T, path string, n int, table string) {
	t.Helper()
	damagedHistoryOf(t, path, n, table, nil)
}

// damagedHistoryOf is damagedHistory, with shape run on the database
// before it is closed and scrambled (to make it an older schema's).
func damagedHistoryOf(t *testing.T, path string, n int, table string, shape func(db *sql.DB)) {
	t.Helper()
	st := must[*Store](t)(Open(ctx, path, Options{}))
	for i := range n {
		c := must[*Conversation](t)(st.Create(ctx, fmt.Sprintf("chat %d", i), Settings{}))
		must[*Message](t)(st.AddUser(ctx, c.ID, fmt.Sprintf("question %d about pelicans %s", i, strings.Repeat("and more ", 100))))
		a := must[*Message](t)(st.StartAnswer(ctx, c.ID, "m"))
		st.AppendText(ctx, a.ID, fmt.Sprintf("answer %d", i))
		st.FinishAnswer(ctx, a.ID, Stats{Engine: "cpu"})
	}
	var root int64
	if shape != nil {
		shape(st.db)
	}
	if err := st.db.QueryRow(`SELECT rootpage FROM sqlite_master WHERE name = ?`, table).Scan(&root); err != nil || root < 2 {
		t.Fatalf("root page of %s: %d %v", table, root, err)
	}
	st.Close()
	b := must[[]byte](t)(os.ReadFile(path))
	page := 4096
	for i := (root - 1) * int64(page); i < root*int64(page) && i < int64(len(b)); i++ {
		b[i] ^= 0x5a
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	// The damage is real: the integrity check fails.
	db, _ := sql.Open("sqlite", "file:"+path)
	var check string
	db.QueryRow(`PRAGMA quick_check`).Scan(&check)
	db.Close()
	if check == "ok" {
		t.Fatalf("scrambling %s's root page left the database whole", table)
	}
}

// TestDamagedSearchIndexKeepsEveryChat: damage to the search index alone
// moved the whole history aside (every chat was still readable) and the
// page showed an empty history. Now every chat and message is there,
// search works again, the notice says what happened, and a copy of the
// damaged file is kept.
func TestDamagedSearchIndexKeepsEveryChat(t *testing.T) {
	path := filepath.Join(t.TempDir(), "history.db")
	damagedHistory(t, path, 30, "messages_fts_data")
	st := openTest(t, path)
	list := must[[]Conversation](t)(st.List(ctx, 0))
	if len(list) != 30 {
		t.Fatalf("%d chats after the repair, want 30", len(list))
	}
	for _, c := range list {
		if msgs := must[[]Message](t)(st.Messages(ctx, c.ID)); len(msgs) != 2 {
			t.Fatalf("chat %d has %d messages", c.ID, len(msgs))
		}
	}
	if got := must[[]Conversation](t)(st.Search(ctx, "pelicans", 0)); len(got) != 30 {
		t.Errorf("search finds %d chats after the repair", len(got))
	}
	t.Log(st.Notice())
	if n := st.Notice(); !strings.Contains(n, "damaged") || !strings.Contains(n, ".damaged-") {
		t.Errorf("notice %q", n)
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
		if strings.Contains(e.Name(), ".corrupt-") {
			t.Errorf("the history was moved aside: %v", names)
		}
	}
}

// TestDamagedMessagesAreSalvaged: the messages table's root page is
// scrambled: the chats that can be read are saved into a new history in
// the file's place, and the notice says how many.
func TestDamagedMessagesAreSalvaged(t *testing.T) {
	path := filepath.Join(t.TempDir(), "history.db")
	damagedHistory(t, path, 30, "messages")
	st := openTest(t, path)
	if n := len(must[[]Conversation](t)(st.List(ctx, 0))); n != 30 {
		t.Errorf("%d chats salvaged, want the 30 whose rows are readable", n)
	}
	t.Log(st.Notice())
	if n := st.Notice(); !strings.Contains(n, "30 chats") || !strings.Contains(n, "nothing was deleted") {
		t.Errorf("notice %q", n)
	}
	// The salvaged history works.
	c := must[*Conversation](t)(st.Create(ctx, "fresh", Settings{}))
	must[*Message](t)(st.AddUser(ctx, c.ID, "hello"))
}

// damagedIndex writes a history of n chats and garbles the index
// conversations_by_update where its keys are (the end of its root page,
// past the cells' headers): the check finds the index broken, every
// table is whole, and REINDEX can rebuild the index from its table.
func damagedIndex(t *testing.T, path string, n int) {
	t.Helper()
	st := must[*Store](t)(Open(ctx, path, Options{}))
	for i := range n {
		c := must[*Conversation](t)(st.Create(ctx, fmt.Sprintf("chat %d", i), Settings{}))
		must[*Message](t)(st.AddUser(ctx, c.ID, fmt.Sprintf("question %d about pelicans", i)))
	}
	var root int64
	if err := st.db.QueryRow(`SELECT rootpage FROM sqlite_master WHERE name = 'conversations_by_update'`).Scan(&root); err != nil || root < 2 {
		t.Fatalf("root page of the index: %d %v", root, err)
	}
	st.Close()
	b := must[[]byte](t)(os.ReadFile(path))
	const page = 4096
	end := root * page
	for i := end - int64(garble); i < end; i++ {
		b[i] ^= 0x5a
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	db, _ := sql.Open("sqlite", "file:"+path)
	var check string
	db.QueryRow(`PRAGMA quick_check`).Scan(&check)
	db.Close()
	if check == "ok" {
		t.Fatal("garbling the index left the database whole")
	}
	t.Logf("quick check: %s", check)
}

// garble is how many bytes at the end of the index's page damagedIndex
// changes.
var garble = 64

// TestDamagedIndexIsRebuiltInPlace reaches the in-place repair (no test
// did: the damaged search index above is salvaged): a damaged index,
// every table row readable, is rebuilt where it is, not salvaged into a
// new file: every chat is there with its
// messages, the notice says the indexes were rebuilt, the database is
// whole again and a copy of the damaged file is kept.
func TestDamagedIndexIsRebuiltInPlace(t *testing.T) {
	path := filepath.Join(t.TempDir(), "history.db")
	damagedIndex(t, path, 12)
	st := openTest(t, path)
	n := st.Notice()
	t.Log(n)
	if !strings.Contains(n, "they were rebuilt from the chats, and every chat is here") || !strings.Contains(n, ".damaged-") {
		t.Fatalf("notice %q, want the in-place repair's", n)
	}
	list := must[[]Conversation](t)(st.List(ctx, 0))
	if len(list) != 12 {
		t.Fatalf("%d chats after the repair, want 12", len(list))
	}
	for _, c := range list {
		if msgs := must[[]Message](t)(st.Messages(ctx, c.ID)); len(msgs) != 1 {
			t.Errorf("chat %d has %d messages", c.ID, len(msgs))
		}
	}
	var check string
	if err := st.db.QueryRow(`PRAGMA integrity_check`).Scan(&check); err != nil || check != "ok" {
		t.Errorf("after the repair: integrity check %q %v", check, err)
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	damaged := 0
	for _, e := range entries {
		if strings.Contains(e.Name(), ".damaged-") {
			damaged++
		}
	}
	if damaged == 0 {
		t.Error("no copy of the damaged file was kept")
	}
}

// TestDamagedOlderHistoryIsSalvaged: a damaged history of the schema
// before the last migration (version 6: no context_length) is salvaged
// into the current schema column by column: every chat is saved, its
// settings as they were.
func TestDamagedOlderHistoryIsSalvaged(t *testing.T) {
	path := filepath.Join(t.TempDir(), "history.db")
	damagedHistoryOf(t, path, 30, "messages", func(db *sql.DB) {
		for _, q := range []string{`UPDATE conversations SET max_tokens = 77`, `ALTER TABLE conversations DROP COLUMN context_length`, `PRAGMA user_version = 6`} {
			if _, err := db.Exec(q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
	})
	st := openTest(t, path)
	list := must[[]Conversation](t)(st.List(ctx, 0))
	if len(list) != 30 {
		t.Fatalf("%d chats salvaged, want 30 (%s)", len(list), st.Notice())
	}
	if c := list[0]; c.MaxTokens == nil || *c.MaxTokens != 77 || c.ContextLength != nil {
		t.Errorf("a salvaged chat's settings: %+v", c.Settings)
	}
	if n := st.Notice(); !strings.Contains(n, "30 chats") {
		t.Errorf("notice %q", n)
	}
}
