package history

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
)

// TestChatContextLength: a chat's own context length is stored with it,
// kept by an update of other settings, changed and cleared.
func TestChatContextLength(t *testing.T) {
	st := openTest(t, filepath.Join(t.TempDir(), "history.db"))
	n := 2048
	c := must[*Conversation](t)(st.Create(ctx, "long", Settings{ContextLength: &n}))
	if c.ContextLength == nil || *c.ContextLength != 2048 {
		t.Fatalf("created with context %v, want 2048", c.ContextLength)
	}
	set := c.Settings
	set.SystemPrompt = "Be brief."
	c = must[*Conversation](t)(st.Update(ctx, c.ID, Patch{Settings: &set}))
	if got := must[*Conversation](t)(st.Get(ctx, c.ID)); got.ContextLength == nil || *got.ContextLength != 2048 || got.SystemPrompt != "Be brief." {
		t.Fatalf("after another setting changed: %+v", got.Settings)
	}
	m := 8192
	set.ContextLength = &m
	must[*Conversation](t)(st.Update(ctx, c.ID, Patch{Settings: &set}))
	if list := must[[]Conversation](t)(st.List(ctx, 0)); len(list) != 1 || list[0].ContextLength == nil || *list[0].ContextLength != 8192 {
		t.Fatalf("listed: %+v", list)
	}
	set.ContextLength = nil
	if got := must[*Conversation](t)(st.Update(ctx, c.ID, Patch{Settings: &set})); got.ContextLength != nil {
		t.Fatalf("cleared context still %d", *got.ContextLength)
	}
}

// TestMigratesVersion6: a database of the schema before chats had a
// context length (version 6, as NPU Chat wrote it) opens with its chats
// and settings as they were, no context length set, and takes one.
func TestMigratesVersion6(t *testing.T) {
	path := filepath.Join(t.TempDir(), "history.db")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range append(append([]string(nil), migrations[:6]...),
		`PRAGMA user_version = 6`,
		`INSERT INTO conversations (id, title, system_prompt, max_tokens, thinking, created_at, updated_at, current_id) VALUES (3, 'Before', 'Be kind.', 300, 1, 1000, 2000, NULL)`,
		`INSERT INTO messages (id, conversation_id, role, content, created_at, cached_tokens, omitted_messages) VALUES (1, 3, 'user', 'an old question', 1000, 0, 0)`,
		`INSERT INTO messages (id, conversation_id, role, content, created_at, parent_id, engine, prompt_tokens, cached_tokens, omitted_messages) VALUES (2, 3, 'assistant', 'an old answer', 1500, 1, 'cpu', 40, 30, 2)`,
		`UPDATE conversations SET current_id = 2 WHERE id = 3`,
	) {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	db.Close()

	st := openTest(t, path)
	var v int
	st.db.QueryRow(`PRAGMA user_version`).Scan(&v)
	if v != SchemaVersion || SchemaVersion < 7 {
		t.Fatalf("schema %d after open, want %d", v, SchemaVersion)
	}
	c := must[*Conversation](t)(st.Get(ctx, 3))
	if c.ContextLength != nil || c.SystemPrompt != "Be kind." || c.MaxTokens == nil || *c.MaxTokens != 300 || c.Thinking == nil || !*c.Thinking {
		t.Fatalf("the old chat's settings after migration: %+v", c.Settings)
	}
	msgs := must[[]Message](t)(st.Messages(ctx, 3))
	if len(msgs) != 2 || msgs[1].Stats == nil || msgs[1].Stats.CachedTokens != 30 || msgs[1].Stats.OmittedMessages != 2 {
		t.Fatalf("the old chat's messages after migration: %+v", msgs)
	}
	n := 4096
	set := c.Settings
	set.ContextLength = &n
	if got := must[*Conversation](t)(st.Update(ctx, 3, Patch{Settings: &set})); got.ContextLength == nil || *got.ContextLength != 4096 {
		t.Fatalf("the migrated chat does not keep a context length: %+v", got.Settings)
	}
	if st.Notice() != "" {
		t.Fatalf("a migration is not a problem to report: %q", st.Notice())
	}
}

// TestAnswerDraftCounts: an answer's guessed and kept tokens (speculative
// decoding) are stored with its stats and read back, cut or finished;
// an answer without guesses reads back zeros.
func TestAnswerDraftCounts(t *testing.T) {
	st := openTest(t, filepath.Join(t.TempDir(), "history.db"))
	c := must[*Conversation](t)(st.Create(ctx, "", Settings{}))
	for _, tc := range []struct {
		cut               bool
		drafted, accepted int
	}{{false, 40, 31}, {true, 12, 0}, {false, 0, 0}} {
		must[*Message](t)(st.AddUser(ctx, c.ID, "again"))
		ans := must[*Message](t)(st.StartAnswer(ctx, c.ID, "minicpm5:2b"))
		s := Stats{Engine: "cpu", CompletionTokens: 50, DraftTokens: tc.drafted, DraftAccepted: tc.accepted}
		end := st.FinishAnswer
		if tc.cut {
			end = func(ctx context.Context, id int64, s Stats) error { return st.CutAnswer(ctx, id, CutStopped, s) }
		}
		if err := end(ctx, ans.ID, s); err != nil {
			t.Fatal(err)
		}
		got := must[*Message](t)(st.Message(ctx, ans.ID))
		if got.Stats == nil || got.Stats.DraftTokens != tc.drafted || got.Stats.DraftAccepted != tc.accepted {
			t.Errorf("stored %d of %d guesses kept, read back %+v", tc.accepted, tc.drafted, got.Stats)
		}
	}
}
