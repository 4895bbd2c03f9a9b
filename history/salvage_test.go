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
	st := must[*Store](t)(Open(ctx, path, Options{}))
	for i := range n {
		c := must[*Conversation](t)(st.Create(ctx, fmt.Sprintf("chat %d", i), Settings{}))
		must[*Message](t)(st.AddUser(ctx, c.ID, fmt.Sprintf("question %d about pelicans %s", i, strings.Repeat("and more ", 100))))
		a := must[*Message](t)(st.StartAnswer(ctx, c.ID, "m"))
		st.AppendText(ctx, a.ID, fmt.Sprintf("answer %d", i))
		st.FinishAnswer(ctx, a.ID, Stats{Engine: "cpu"})
	}
	var root int64
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
