package history

// migrations bring a database from version i to i+1 (PRAGMA
// user_version); each runs in one transaction. Append, never edit: a
// released migration is what users' databases went through.
var migrations = []string{
	// 1: conversations and their messages.
	`CREATE TABLE conversations (
		id         INTEGER PRIMARY KEY AUTOINCREMENT,
		title      TEXT    NOT NULL DEFAULT '',
		created_at INTEGER NOT NULL,
		updated_at INTEGER NOT NULL
	);
	CREATE TABLE messages (
		id              INTEGER PRIMARY KEY AUTOINCREMENT,
		conversation_id INTEGER NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
		role            TEXT    NOT NULL CHECK (role IN ('user', 'assistant', 'system')),
		content         TEXT    NOT NULL DEFAULT '',
		cut             INTEGER NOT NULL DEFAULT 0,
		created_at      INTEGER NOT NULL
	);
	CREATE INDEX messages_by_conversation ON messages(conversation_id, id);
	CREATE INDEX conversations_by_update ON conversations(updated_at DESC);`,

	// 2: per-chat settings, and what each answer cost and who made it.
	`ALTER TABLE conversations ADD COLUMN system_prompt TEXT NOT NULL DEFAULT '';
	ALTER TABLE conversations ADD COLUMN temperature REAL;
	ALTER TABLE conversations ADD COLUMN top_p REAL;
	ALTER TABLE conversations ADD COLUMN max_tokens INTEGER;
	ALTER TABLE messages ADD COLUMN cut_reason TEXT NOT NULL DEFAULT '';
	ALTER TABLE messages ADD COLUMN model TEXT NOT NULL DEFAULT '';
	ALTER TABLE messages ADD COLUMN engine TEXT NOT NULL DEFAULT '';
	ALTER TABLE messages ADD COLUMN fallback TEXT NOT NULL DEFAULT '';
	ALTER TABLE messages ADD COLUMN finish_reason TEXT NOT NULL DEFAULT '';
	ALTER TABLE messages ADD COLUMN prompt_tokens INTEGER NOT NULL DEFAULT 0;
	ALTER TABLE messages ADD COLUMN completion_tokens INTEGER NOT NULL DEFAULT 0;
	ALTER TABLE messages ADD COLUMN context_length INTEGER NOT NULL DEFAULT 0;
	ALTER TABLE messages ADD COLUMN ttft_ms INTEGER NOT NULL DEFAULT 0;
	ALTER TABLE messages ADD COLUMN tokens_per_second REAL NOT NULL DEFAULT 0;`,

	// 3: full-text search over titles and messages (FTS5, external
	// content kept in step by triggers), filled from what is there.
	`CREATE VIRTUAL TABLE messages_fts USING fts5(content, content='messages', content_rowid='id');
	CREATE TRIGGER messages_ai AFTER INSERT ON messages BEGIN
		INSERT INTO messages_fts(rowid, content) VALUES (new.id, new.content);
	END;
	CREATE TRIGGER messages_ad AFTER DELETE ON messages BEGIN
		INSERT INTO messages_fts(messages_fts, rowid, content) VALUES ('delete', old.id, old.content);
	END;
	CREATE TRIGGER messages_au AFTER UPDATE OF content ON messages BEGIN
		INSERT INTO messages_fts(messages_fts, rowid, content) VALUES ('delete', old.id, old.content);
		INSERT INTO messages_fts(rowid, content) VALUES (new.id, new.content);
	END;
	INSERT INTO messages_fts(rowid, content) SELECT id, content FROM messages;
	CREATE VIRTUAL TABLE titles_fts USING fts5(title, content='conversations', content_rowid='id');
	CREATE TRIGGER conversations_ai AFTER INSERT ON conversations BEGIN
		INSERT INTO titles_fts(rowid, title) VALUES (new.id, new.title);
	END;
	CREATE TRIGGER conversations_ad AFTER DELETE ON conversations BEGIN
		INSERT INTO titles_fts(titles_fts, rowid, title) VALUES ('delete', old.id, old.title);
	END;
	CREATE TRIGGER conversations_au AFTER UPDATE OF title ON conversations BEGIN
		INSERT INTO titles_fts(titles_fts, rowid, title) VALUES ('delete', old.id, old.title);
		INSERT INTO titles_fts(rowid, title) VALUES (new.id, new.title);
	END;
	INSERT INTO titles_fts(rowid, title) SELECT id, title FROM conversations;`,

	// 4: answer versions and thinking. Messages form a tree: each has
	// the message it follows (parent_id; NULL for a chat's first one),
	// so a regenerated answer or an edited question is a sibling of the
	// one it replaces, and the conversation records which message ends
	// the shown path (current_id); shown_reply is the reply last shown
	// after a message, so that going back to a version shows what was
	// chosen after it. A chat written before is one line: each message
	// follows the one before it, and the last one is current.
	// thinking is a reasoning model's <think> text, kept apart from the
	// answer.
	`ALTER TABLE messages ADD COLUMN parent_id INTEGER REFERENCES messages(id) ON DELETE CASCADE;
	ALTER TABLE messages ADD COLUMN shown_reply INTEGER;
	ALTER TABLE messages ADD COLUMN thinking TEXT NOT NULL DEFAULT '';
	ALTER TABLE conversations ADD COLUMN current_id INTEGER;
	UPDATE messages SET parent_id = (SELECT MAX(p.id) FROM messages p WHERE p.conversation_id = messages.conversation_id AND p.id < messages.id);
	UPDATE conversations SET current_id = (SELECT MAX(m.id) FROM messages m WHERE m.conversation_id = conversations.id);
	CREATE INDEX messages_by_parent ON messages(parent_id);`,

	// 5: a chat's thinking switch (NULL: the model's default).
	`ALTER TABLE conversations ADD COLUMN thinking INTEGER;`,

	// 6: how much of an answer's prompt came from the KV cache, and how
	// many of the chat's oldest messages the model did not see.
	`ALTER TABLE messages ADD COLUMN cached_tokens INTEGER NOT NULL DEFAULT 0;
	ALTER TABLE messages ADD COLUMN omitted_messages INTEGER NOT NULL DEFAULT 0;`,

	// 7: a chat's own context length (NULL: the server's).
	`ALTER TABLE conversations ADD COLUMN context_length INTEGER;`,

	// 8: an answer's tokens guessed ahead (speculative decoding) and how
	// many of them the model kept.
	`ALTER TABLE messages ADD COLUMN draft_tokens INTEGER NOT NULL DEFAULT 0;
	ALTER TABLE messages ADD COLUMN draft_accepted INTEGER NOT NULL DEFAULT 0;`,
}

// SchemaVersion is the schema this package writes (len(migrations);
// a test keeps the two equal).
const SchemaVersion = 8
