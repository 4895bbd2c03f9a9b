// Package history keeps the chat page's conversations in a SQLite
// database in the data folder (history.db): conversations with their
// system prompt and settings, their messages, and a full-text index of
// both for search.
//
// The driver is modernc.org/sqlite (v1.62.0, pinned): SQLite translated
// to pure Go, so the app stays cgo-free and cross-compiles to Windows, and
// it is built with FTS5, which search uses. The database runs in WAL mode
// with synchronous=NORMAL: every committed write is in the WAL file when
// the statement returns, so a killed process loses nothing that was
// committed (only a power cut can lose the last transactions). Foreign
// keys are on (deleting a conversation deletes its messages) and a busy
// timeout makes concurrent writers wait instead of failing.
//
// The schema is versioned with PRAGMA user_version and upgraded by the
// ordered migrations in schema.go, each in one transaction; a database
// written by a newer NPU Chat is never changed.
//
// An answer is stored while it streams: AppendText adds each piece before
// the web layer sends it, and the message is "cut" from the moment it is
// created until FinishAnswer records it as complete. So an answer stopped
// by the user, dropped by a closed tab or left by a killed server is
// stored, and shown, as cut, with every word that was sent. The pieces go
// to the answer's own append-only journal (answers.go), one write of the
// piece each; the answer's end puts the text into the database once and
// indexes it for search once, so storing an answer writes a few times
// its size (it wrote the square of it). Open puts a journal a killed
// server left into its message. A full disk is ErrDiskFull: the piece
// that did not fit is not kept, everything before it is. The WAL is cut
// back to 4 MiB after checkpoints (journal_size_limit).
//
// Answer versions (versions.go): messages form a tree, each following
// its parent, and a conversation records the message that ends the path
// it shows. Answering again (Regenerate, then Answer) adds an answer
// beside the earlier ones; editing a question (Edit) adds a question
// beside it; neither drops anything, and Select shows another version
// (with the replies last shown after it). Messages returns the shown
// path with each message's versions; the JSON export has every version.
// A reasoning model's <think> text is stored apart from the answer
// (AppendThinking; the split is service/think's).
//
// Bad databases: a database whose integrity check fails is first kept
// as a copy (history.db.damaged-20261202-154501), then repaired in place
// when only its indexes are damaged (the search index is rebuilt from the
// messages), or else every conversation and message that can still be
// read is salvaged into a new database that takes its place
// (salvage.go); the Notice says which, and how many chats were saved.
// A file that is not a database, one from which nothing can be read, or
// one from a newer schema is moved aside with a timestamp
// (history.db.corrupt-20261202-154501, with its -wal and -shm) and a new
// one started; the Notice says where it went. Nothing is ever deleted. A database locked by another program is left alone:
// Open returns an error wrapping ErrLocked, and Handle tries again on the
// next use, so the API keeps serving meanwhile.
//
// Every value from a request (ids, titles, search text) is a bound
// parameter; search text is turned into quoted FTS5 terms, never FTS
// syntax.
package history
