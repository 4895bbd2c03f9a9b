package history

import (
	"database/sql"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// contents is the shown path as "role:content" strings, with each
// message's version as "[i/n]" when it has others.
func contents(t *testing.T, st *Store, conv int64) []string {
	t.Helper()
	var out []string
	for _, m := range must[[]Message](t)(st.Messages(ctx, conv)) {
		s := m.Role + ":" + m.Content
		if len(m.Versions) > 1 {
			s += "[" + string(rune('0'+slices.Index(m.Versions, m.ID)+1)) + "/" + string(rune('0'+len(m.Versions))) + "]"
		}
		out = append(out, s)
	}
	return out
}

func answer(t *testing.T, st *Store, turn *Turn, text string) *Message {
	t.Helper()
	a := must[*Message](t)(st.Answer(ctx, turn, "m"))
	if err := st.AppendText(ctx, a.ID, text); err != nil {
		t.Fatal(err)
	}
	if err := st.FinishAnswer(ctx, a.ID, Stats{Engine: "cpu"}); err != nil {
		t.Fatal(err)
	}
	return a
}

func TestRegenerateAndEditKeepEveryVersion(t *testing.T) {
	st := openTest(t, filepath.Join(t.TempDir(), "history.db"))
	c := must[*Conversation](t)(st.Create(ctx, "", Settings{}))
	q1 := must[*Turn](t)(st.Ask(ctx, c.ID, "one"))
	a1 := answer(t, st, q1, "first answer")
	q2 := must[*Turn](t)(st.Ask(ctx, c.ID, "two"))
	if got := len(q2.Path); got != 3 {
		t.Fatalf("the turn of a second question sees %d messages, want 3", got)
	}
	answer(t, st, q2, "answer to two")

	// Answer the first question again? Regenerate answers the last one.
	re := must[*Turn](t)(st.Regenerate(ctx, c.ID))
	if re.Question.Content != "two" || len(re.Path) != 3 {
		t.Fatalf("regenerate turn: %q with %d messages", re.Question.Content, len(re.Path))
	}
	answer(t, st, re, "another answer to two")
	want := []string{"user:one", "assistant:first answer", "user:two", "assistant:another answer to two[2/2]"}
	if got := contents(t, st, c.ID); !slices.Equal(got, want) {
		t.Fatalf("after regenerate: %q, want %q", got, want)
	}

	// Edit the first question: the old one and all that followed stay.
	ed := must[*Turn](t)(st.Edit(ctx, c.ID, q1.Question.ID, "one, edited"))
	if len(ed.Path) != 1 || ed.Question.ParentID != 0 {
		t.Fatalf("an edited first question sees %d messages and follows %d", len(ed.Path), ed.Question.ParentID)
	}
	answer(t, st, ed, "answer to the edit")
	want = []string{"user:one, edited[2/2]", "assistant:answer to the edit"}
	if got := contents(t, st, c.ID); !slices.Equal(got, want) {
		t.Fatalf("after edit: %q, want %q", got, want)
	}

	// Back to the first version: the whole old line, with its newest answer.
	if err := st.Select(ctx, c.ID, q1.Question.ID); err != nil {
		t.Fatal(err)
	}
	want = []string{"user:one[1/2]", "assistant:first answer", "user:two", "assistant:another answer to two[2/2]"}
	if got := contents(t, st, c.ID); !slices.Equal(got, want) {
		t.Fatalf("after selecting version 1: %q, want %q", got, want)
	}
	path := must[[]Message](t)(st.Messages(ctx, c.ID))
	if err := st.Select(ctx, c.ID, path[3].Versions[0]); err != nil {
		t.Fatal(err)
	}
	want[3] = "assistant:answer to two[1/2]"
	if got := contents(t, st, c.ID); !slices.Equal(got, want) {
		t.Fatalf("after selecting the first answer to two: %q, want %q", got, want)
	}
	// Over to the edit and back: the answer chosen is still shown.
	if err := st.Select(ctx, c.ID, ed.Question.ID); err != nil {
		t.Fatal(err)
	}
	if got := contents(t, st, c.ID); len(got) != 2 || got[1] != "assistant:answer to the edit" {
		t.Fatalf("the edit again: %q", got)
	}
	if err := st.Select(ctx, c.ID, q1.Question.ID); err != nil {
		t.Fatal(err)
	}
	if got := contents(t, st, c.ID); !slices.Equal(got, want) {
		t.Fatalf("back from the edit: %q, want %q (the answer chosen before)", got, want)
	}

	// A message of another chat is not a version of this one.
	other := must[*Conversation](t)(st.Create(ctx, "", Settings{}))
	if err := st.Select(ctx, other.ID, a1.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("selecting another chat's message: %v, want ErrNotFound", err)
	}
	if _, err := st.Edit(ctx, c.ID, a1.ID, "x"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("editing an answer: %v, want ErrNotFound", err)
	}
	if _, err := st.Edit(ctx, c.ID, q1.Question.ID, "  "); !errors.Is(err, ErrInvalid) {
		t.Fatalf("an empty edit: %v, want ErrInvalid", err)
	}
	if _, err := st.Regenerate(ctx, other.ID); !errors.Is(err, ErrInvalid) {
		t.Fatalf("regenerate in an empty chat: %v, want ErrInvalid", err)
	}

	// Every version is in the export.
	e := must[*Export](t)(st.Load(ctx, c.ID))
	if n := len(e.Messages) + len(e.OtherVersions); n != 7 {
		t.Fatalf("the export holds %d messages, want all 7", n)
	}
}

func TestTruncateGoesBackToTheVersionBefore(t *testing.T) {
	st := openTest(t, filepath.Join(t.TempDir(), "history.db"))
	c := must[*Conversation](t)(st.Create(ctx, "", Settings{}))
	q := must[*Turn](t)(st.Ask(ctx, c.ID, "q"))
	answer(t, st, q, "kept answer")
	re := must[*Turn](t)(st.Regenerate(ctx, c.ID))
	empty := must[*Message](t)(st.Answer(ctx, re, "m"))
	if got := contents(t, st, c.ID); !slices.Equal(got, []string{"user:q", "assistant:[2/2]"}) {
		t.Fatalf("while the new answer starts: %q", got)
	}
	// The new answer said nothing: drop it, and the old one is shown again.
	if err := st.Truncate(ctx, c.ID, empty.ID); err != nil {
		t.Fatal(err)
	}
	if got := contents(t, st, c.ID); !slices.Equal(got, []string{"user:q", "assistant:kept answer"}) {
		t.Fatalf("after dropping the empty version: %q", got)
	}
	// Without another version, the question ends the path.
	path := must[[]Message](t)(st.Messages(ctx, c.ID))
	if err := st.Truncate(ctx, c.ID, path[1].ID); err != nil {
		t.Fatal(err)
	}
	if got := contents(t, st, c.ID); !slices.Equal(got, []string{"user:q"}) {
		t.Fatalf("after dropping the only answer: %q", got)
	}
	// A new question follows the path's end.
	must[*Turn](t)(st.Ask(ctx, c.ID, "next"))
	if got := contents(t, st, c.ID); !slices.Equal(got, []string{"user:q", "user:next"}) {
		t.Fatalf("after another question: %q", got)
	}
}

// writeV3 is a database as schema 3 wrote it: one chat of four messages
// in a line, and one of two.
func writeV3(t *testing.T, path string) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	qs := slices.Clone(migrations[:3])
	qs = append(qs, `PRAGMA user_version = 3`,
		`INSERT INTO conversations (id, title, created_at, updated_at) VALUES (4, 'Old chat', 1000, 2000), (5, 'Other', 1000, 3000)`,
		`INSERT INTO messages (id, conversation_id, role, content, cut, created_at) VALUES
			(10, 4, 'user', 'first question', 0, 1000),
			(11, 5, 'user', 'elsewhere', 0, 1000),
			(12, 4, 'assistant', 'first answer', 0, 1100),
			(13, 4, 'user', 'second question', 0, 1200),
			(14, 5, 'assistant', 'elsewhere too', 0, 1200),
			(15, 4, 'assistant', 'second answer', 1, 1300)`)
	for _, q := range qs {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", strings.SplitN(q, "\n", 2)[0], err)
		}
	}
}

func TestSchema3ChatsKeepTheirOrderAndGainVersions(t *testing.T) {
	path := filepath.Join(t.TempDir(), "history.db")
	writeV3(t, path)
	st := openTest(t, path)
	want := []string{"user:first question", "assistant:first answer", "user:second question", "assistant:second answer"}
	if got := contents(t, st, 4); !slices.Equal(got, want) {
		t.Fatalf("an old chat after the upgrade: %q, want %q", got, want)
	}
	if got := contents(t, st, 5); !slices.Equal(got, []string{"user:elsewhere", "assistant:elsewhere too"}) {
		t.Fatalf("the other old chat: %q", got)
	}
	re := must[*Turn](t)(st.Regenerate(ctx, 4))
	answer(t, st, re, "a new second answer")
	want[3] = "assistant:a new second answer[2/2]"
	if got := contents(t, st, 4); !slices.Equal(got, want) {
		t.Fatalf("regenerated in an old chat: %q, want %q", got, want)
	}
	must[*Turn](t)(st.Ask(ctx, 5, "more"))
	if got := contents(t, st, 5); len(got) != 3 || got[2] != "user:more" {
		t.Fatalf("a question added to an old chat: %q", got)
	}
}
