package history

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// Errors the store returns (wrapped); test with errors.Is.
var (
	// ErrNotFound: no conversation or message with that id.
	ErrNotFound = errors.New("not found")
	// ErrLocked: another program holds the database; nothing was changed.
	ErrLocked = errors.New("the history database is locked by another program")
	// ErrInvalid: a value a request sent is not acceptable (the message says why).
	ErrInvalid = errors.New("invalid")
	// ErrClosed: the store was closed (the server is stopping).
	ErrClosed = errors.New("the history is closed")
)

// Limits on what a request may store.
const (
	MaxTitle   = 200      // characters of a title
	MaxContent = 1 << 20  // bytes of one message
	MaxSystem  = 64 << 10 // bytes of a system prompt
	// A chat's context length, in tokens: MinContext is room for a
	// short question and answer, MaxContext beyond any model's.
	MinContext = 64
	MaxContext = 1 << 20
)

// Options configure Open.
type Options struct {
	// BusyTimeout is how long a statement waits for another writer
	// (default 5s).
	BusyTimeout time.Duration
	// Now is the clock (time.Now by default).
	Now func() time.Time
	// OpenJournal opens a streaming answer's journal (answers.go; an
	// append-only file when nil). Tests make it fail as a full disk does.
	OpenJournal func(path string) (JournalFile, error)
}

// Store is an open history database. Its methods are safe for
// concurrent use.
type Store struct {
	db      *sql.DB
	path    string
	now     func() time.Time
	notice  string
	answers *journals
}

// Settings are a conversation's own generation settings; nil means the
// server's default.
type Settings struct {
	SystemPrompt string   `json:"system_prompt"`
	Temperature  *float64 `json:"temperature"`
	TopP         *float64 `json:"top_p"`
	MaxTokens    *int     `json:"max_tokens"`
	// Thinking switches a reasoning model's thinking on or off, where
	// its chat template allows (backend.CapThinking).
	Thinking *bool `json:"thinking"`
	// ContextLength is the context the chat's answers may use, in
	// tokens (its oldest turns are left out past it); the loaded
	// model's context when larger (the engine clamps it).
	ContextLength *int `json:"context_length"`
}

// Conversation is one chat.
type Conversation struct {
	ID    int64  `json:"id"`
	Title string `json:"title"`
	Settings
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
	// Snippet is the matching text, in search results only.
	Snippet string `json:"snippet,omitempty"`
}

// Stats describe how an answer was made.
type Stats struct {
	Model            string  `json:"model,omitempty"`
	Engine           string  `json:"engine,omitempty"`   // backend kind: "npu", "cpu", "remote"
	Fallback         string  `json:"fallback,omitempty"` // why the preferred engine did not answer
	FinishReason     string  `json:"finish_reason,omitempty"`
	PromptTokens     int     `json:"prompt_tokens"`
	CompletionTokens int     `json:"completion_tokens"`
	ContextLength    int     `json:"context_length"`
	TTFTMillis       int64   `json:"ttft_ms"`
	TokensPerSecond  float64 `json:"tokens_per_second"`
	// CachedTokens are the prompt tokens whose keys and values came from
	// the KV cache; OmittedMessages the chat's oldest messages (after
	// the system prompt) the model did not see, the chat being longer
	// than the context. The history keeps those messages.
	CachedTokens    int `json:"cached_tokens"`
	OmittedMessages int `json:"omitted_messages"`
	// DraftTokens are the tokens guessed ahead and checked (speculative
	// decoding), DraftAccepted how many of them the model kept; 0 when
	// nothing was guessed.
	DraftTokens   int `json:"draft_tokens,omitempty"`
	DraftAccepted int `json:"draft_accepted,omitempty"`
}

// Message is one turn of a conversation.
type Message struct {
	ID             int64  `json:"id"`
	ConversationID int64  `json:"conversation_id"`
	Role           string `json:"role"`
	Content        string `json:"content"`
	// Cut is true for an answer that did not finish (stopped,
	// interrupted, failed); CutReason says which.
	Cut       bool   `json:"cut"`
	CutReason string `json:"cut_reason,omitempty"`
	// Thinking is a reasoning model's thoughts before its answer (the
	// text of its <think> block), kept apart from Content.
	Thinking  string    `json:"thinking,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	Stats     *Stats    `json:"stats,omitempty"`
	// ParentID is the message this one follows (0 for a chat's first).
	ParentID int64 `json:"parent_id,omitempty"`
	// Versions are the ids of this message and its siblings (the other
	// answers to the same question, the other edits of a question), in
	// the order they were written; empty when there is only this one.
	Versions []int64 `json:"versions,omitempty"`
}

// Cut reasons.
const (
	CutInterrupted = "interrupted"  // the server stopped mid-answer (set when an answer starts)
	CutStopped     = "stopped"      // the user stopped it or closed the page
	CutFailed      = "failed"       // the engine failed mid-answer
	CutSwitchedOff = "switched-off" // the model was switched off mid-answer
)

// Open opens (creating it if needed) the database at path and brings its
// schema up to date. A file that is not a readable database, or one from
// a newer NPU Chat, is moved aside and a new one started (Notice says
// where it went); a locked one returns an error wrapping ErrLocked.
func Open(ctx context.Context, path string, opts Options) (*Store, error) {
	if opts.BusyTimeout <= 0 {
		opts.BusyTimeout = 5 * time.Second
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("history: %w", err)
	}
	st, problem, err := open(ctx, path, opts)
	if err == nil {
		return st.ready(ctx, opts), nil
	}
	if problem == "" {
		return nil, err
	}
	now := opts.Now()
	if problem == "corrupt" && checkHeader(path) == nil {
		// A database with damage in it: rebuild or salvage what can be
		// read (salvage.go) before moving anything aside.
		if notice, rerr := repair(ctx, path, opts, now); rerr == nil {
			if st, _, err2 := open(ctx, path, opts); err2 == nil {
				st.notice = notice
				return st.ready(ctx, opts), nil
			}
		}
	}
	aside, merr := moveAside(path, now, problem)
	if merr != nil {
		return nil, fmt.Errorf("history: %s (%v), and it could not be moved aside: %w", path, err, merr)
	}
	st, _, err2 := open(ctx, path, opts)
	if err2 != nil {
		return nil, err2
	}
	st.ready(ctx, opts)
	why := "could not be read (" + cause(err) + ")"
	if problem == "newer" {
		why = "was written by a newer version of NPU Chat"
	}
	st.notice = fmt.Sprintf("The chat history %s %s. It was moved to %s and a new, empty history was started; nothing was deleted.", path, why, aside)
	return st, nil
}

// ready starts the store's answer journals, putting those a killed
// server left into their messages (one that cannot be put now stays for
// the next Open).
func (s *Store) ready(ctx context.Context, opts Options) *Store {
	s.answers = newJournals(s.path, opts.OpenJournal)
	s.recoverJournals(ctx)
	return s
}

// open tries once. problem is "corrupt" or "newer" when the file should
// be moved aside.
func open(ctx context.Context, path string, opts Options) (*Store, string, error) {
	if err := checkHeader(path); err != nil {
		return nil, "corrupt", err
	}
	if err := private(path); err != nil {
		return nil, "", fmt.Errorf("history: make %s private: %w", path, err)
	}
	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", opts.BusyTimeout.Milliseconds()))
	q.Add("_pragma", "foreign_keys(1)")
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous(NORMAL)")
	// After a checkpoint the write-ahead log is cut back to 4 MiB, so
	// that it does not keep the largest size it ever had.
	q.Add("_pragma", "journal_size_limit(4194304)")
	db, err := sql.Open("sqlite", "file:"+filepath.ToSlash(path)+"?"+q.Encode())
	if err != nil {
		return nil, "", fmt.Errorf("history: open %s: %w", path, err)
	}
	// One connection: statements are short, and one writer never waits
	// for itself.
	db.SetMaxOpenConns(1)
	fail := func(what string, err error) (*Store, string, error) {
		db.Close()
		err = wrap(fmt.Sprintf("history: %s %s", what, path), err)
		if errors.Is(err, ErrLocked) {
			return nil, "", err
		}
		if isCode(err, sqlite3.SQLITE_NOTADB) || isCode(err, sqlite3.SQLITE_CORRUPT) {
			return nil, "corrupt", err
		}
		return nil, "", err
	}
	var check string
	if err := db.QueryRowContext(ctx, "PRAGMA quick_check").Scan(&check); err != nil {
		return fail("check", err)
	}
	if check != "ok" {
		db.Close()
		return nil, "corrupt", fmt.Errorf("history: %s failed its integrity check: %s", path, check)
	}
	var version int
	if err := db.QueryRowContext(ctx, "PRAGMA user_version").Scan(&version); err != nil {
		return fail("read version of", err)
	}
	if version > SchemaVersion {
		db.Close()
		return nil, "newer", fmt.Errorf("history: %s has schema version %d; this NPU Chat knows up to %d", path, version, SchemaVersion)
	}
	for v := version; v < SchemaVersion; v++ {
		if err := migrate(ctx, db, v); err != nil {
			return fail(fmt.Sprintf("upgrade to schema %d of", v+1), err)
		}
	}
	return &Store{db: db, path: path, now: opts.Now}, "", nil
}

// migrate runs migration v (from version v to v+1) in one transaction.
func migrate(ctx context.Context, db *sql.DB, v int) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, migrations[v]); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", v+1)); err != nil {
		return err
	}
	return tx.Commit()
}

// private makes the database's folder 0700 and its files 0600, creating
// the database file (empty, which SQLite takes for a new database) when
// there is none: SQLite creates a file 0644 less the umask, and gives a
// new -wal or -shm the mode of the database file, so a database made
// private before SQLite opens it never gets a file another local account
// can read.
func private(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err == nil {
		f.Close()
	} else if !errors.Is(err, os.ErrExist) {
		return err
	}
	return tighten(path)
}

// tighten makes the database's folder 0700 and those of its files that
// exist (the database, -wal, -shm, -journal) 0600: an older NPU Chat
// left them 0644 in a 0755 folder.
func tighten(path string) error {
	if dir := filepath.Dir(path); dir != "." { // never the working folder of a bare name
		if err := chmod(dir, 0o700); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	for _, sfx := range []string{"", "-wal", "-shm", "-journal"} {
		fi, err := os.Lstat(path + sfx)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
		if fi.Mode().IsRegular() && fi.Mode().Perm()&0o077 != 0 {
			if err := chmod(path+sfx, 0o600); err != nil {
				return err
			}
		}
	}
	return nil
}

// chmod is os.Chmod, except that a file system that cannot hold modes
// (a FAT or network mount refusing chmod) is left as it is rather than
// keeping the history from opening.
func chmod(path string, mode os.FileMode) error {
	err := os.Chmod(path, mode)
	if errors.Is(err, fs.ErrPermission) || errors.Is(err, errors.ErrUnsupported) {
		return nil
	}
	return err
}

// checkHeader refuses a non-empty file that does not start as a SQLite
// database does (before SQLite would try to recover it as one).
func checkHeader(path string) error {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return nil // let SQLite report it
	}
	defer f.Close()
	head := make([]byte, 16)
	n, _ := f.Read(head)
	if n == 0 {
		return nil
	}
	if !bytes.Equal(head[:n], []byte("SQLite format 3\x00")[:n]) || n < 16 {
		return fmt.Errorf("history: %s is not a SQLite database", path)
	}
	return nil
}

// moveAside renames path (and its -wal and -shm) to
// path.KIND-YYYYMMDD-HHMMSS and returns the new name.
func moveAside(path string, now time.Time, kind string) (string, error) {
	base := fmt.Sprintf("%s.%s-%s", path, kind, now.UTC().Format("20060102-150405"))
	aside := base
	for i := 2; ; i++ {
		if _, err := os.Lstat(aside); errors.Is(err, os.ErrNotExist) {
			break
		}
		aside = fmt.Sprintf("%s-%d", base, i)
	}
	if err := os.Rename(path, aside); err != nil {
		return "", err
	}
	for _, sfx := range []string{"-wal", "-shm"} {
		if _, err := os.Lstat(path + sfx); err == nil {
			os.Rename(path+sfx, aside+sfx)
		}
	}
	return aside, nil
}

// cause is the innermost message of an error, for people.
func cause(err error) string {
	for {
		u := errors.Unwrap(err)
		if u == nil {
			return err.Error()
		}
		err = u
	}
}

// isDiskFullCode reports a full disk as SQLite or the system says it.
func isDiskFullCode(err error) bool {
	if isCode(err, sqlite3.SQLITE_FULL) {
		return true
	}
	var en syscall.Errno
	if errors.As(err, &en) {
		if runtime.GOOS == "windows" {
			return en == 112 || en == 39 // ERROR_DISK_FULL, ERROR_HANDLE_DISK_FULL
		}
		return en == syscall.ENOSPC
	}
	return false
}

func isCode(err error, code int) bool {
	var se *sqlite.Error
	return errors.As(err, &se) && se.Code()&0xff == code
}

// wrap adds context to a database error, marking busy and locked ones
// with ErrLocked.
func wrap(what string, err error) error {
	if err == nil {
		return nil
	}
	if isCode(err, sqlite3.SQLITE_BUSY) || isCode(err, sqlite3.SQLITE_LOCKED) {
		return fmt.Errorf("%s: %w (%v)", what, ErrLocked, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// Path is the database file.
func (s *Store) Path() string { return s.path }

// Notice says what Open had to do (a database moved aside), or "".
func (s *Store) Notice() string { return s.notice }

// Close closes the database (and the journals of answers still
// streaming, which the next Open puts into their messages).
func (s *Store) Close() error {
	s.answers.closeAll()
	return s.db.Close()
}

func (s *Store) stamp() int64 { return s.now().UnixMilli() }

func fromMillis(ms int64) time.Time { return time.UnixMilli(ms).UTC() }

// CheckSettings validates settings a request sent.
func CheckSettings(st Settings) error {
	if len(st.SystemPrompt) > MaxSystem {
		return fmt.Errorf("%w: the system prompt is longer than %d bytes", ErrInvalid, MaxSystem)
	}
	if !utf8.ValidString(st.SystemPrompt) {
		return fmt.Errorf("%w: the system prompt is not UTF-8 text", ErrInvalid)
	}
	if t := st.Temperature; t != nil && (*t < 0 || *t > 2 || *t != *t) {
		return fmt.Errorf("%w: temperature must be between 0 and 2, got %g", ErrInvalid, *t)
	}
	if p := st.TopP; p != nil && (*p < 0 || *p > 1 || *p != *p) {
		return fmt.Errorf("%w: top_p must be between 0 and 1, got %g", ErrInvalid, *p)
	}
	if m := st.MaxTokens; m != nil && (*m < 1 || *m > 1<<20) {
		return fmt.Errorf("%w: max_tokens must be between 1 and %d, got %d", ErrInvalid, 1<<20, *m)
	}
	if n := st.ContextLength; n != nil && (*n < MinContext || *n > MaxContext) {
		return fmt.Errorf("%w: context_length must be between %d and %d tokens, got %d", ErrInvalid, MinContext, MaxContext, *n)
	}
	return nil
}

// cleanTitle trims a title to one line of at most MaxTitle characters.
func cleanTitle(t string) (string, error) {
	if !utf8.ValidString(t) {
		return "", fmt.Errorf("%w: the title is not UTF-8 text", ErrInvalid)
	}
	t = strings.Join(strings.Fields(t), " ")
	if r := []rune(t); len(r) > MaxTitle {
		t = strings.TrimSpace(string(r[:MaxTitle-1])) + "…"
	}
	return t, nil
}

const convColumns = `id, title, system_prompt, temperature, top_p, max_tokens, created_at, updated_at, thinking, context_length`

type scanner interface{ Scan(...any) error }

func scanConversation(r scanner) (*Conversation, error) {
	var c Conversation
	var temp, topP sql.NullFloat64
	var maxTok, ctxLen sql.NullInt64
	var created, updated int64
	var thinking sql.NullBool
	if err := r.Scan(&c.ID, &c.Title, &c.SystemPrompt, &temp, &topP, &maxTok, &created, &updated, &thinking, &ctxLen); err != nil {
		return nil, err
	}
	if ctxLen.Valid {
		n := int(ctxLen.Int64)
		c.ContextLength = &n
	}
	if thinking.Valid {
		c.Thinking = &thinking.Bool
	}
	if temp.Valid {
		c.Temperature = &temp.Float64
	}
	if topP.Valid {
		c.TopP = &topP.Float64
	}
	if maxTok.Valid {
		n := int(maxTok.Int64)
		c.MaxTokens = &n
	}
	c.CreatedAt, c.UpdatedAt = fromMillis(created), fromMillis(updated)
	return &c, nil
}

// Create starts a conversation.
func (s *Store) Create(ctx context.Context, title string, st Settings) (*Conversation, error) {
	title, err := cleanTitle(title)
	if err != nil {
		return nil, err
	}
	if err := CheckSettings(st); err != nil {
		return nil, err
	}
	now := s.stamp()
	res, err := s.db.ExecContext(ctx, `INSERT INTO conversations (title, system_prompt, temperature, top_p, max_tokens, thinking, context_length, created_at, updated_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`, title, st.SystemPrompt, st.Temperature, st.TopP, st.MaxTokens, st.Thinking, st.ContextLength, now, now)
	if err != nil {
		return nil, wrap("history: new conversation", err)
	}
	id, _ := res.LastInsertId()
	return s.Get(ctx, id)
}

// Get returns one conversation.
func (s *Store) Get(ctx context.Context, id int64) (*Conversation, error) {
	c, err := scanConversation(s.db.QueryRowContext(ctx, `SELECT `+convColumns+` FROM conversations WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("conversation %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return nil, wrap(fmt.Sprintf("history: conversation %d", id), err)
	}
	return c, nil
}

// List returns up to limit conversations, the most recently active first.
func (s *Store) List(ctx context.Context, limit int) ([]Conversation, error) {
	if limit <= 0 || limit > 1000 {
		limit = 1000
	}
	rows, err := s.db.QueryContext(ctx, `SELECT `+convColumns+` FROM conversations ORDER BY updated_at DESC, id DESC LIMIT ?`, limit)
	if err != nil {
		return nil, wrap("history: list conversations", err)
	}
	defer rows.Close()
	out := []Conversation{}
	for rows.Next() {
		c, err := scanConversation(rows)
		if err != nil {
			return nil, wrap("history: list conversations", err)
		}
		out = append(out, *c)
	}
	return out, wrap("history: list conversations", rows.Err())
}

// Patch changes a conversation: nil fields stay as they are.
type Patch struct {
	Title    *string
	Settings *Settings
}

// Update applies a patch and returns the conversation as it is now. A
// chat keeps its place in the list (UpdatedAt is when it last had a
// message): renaming it or changing its settings says nothing new.
func (s *Store) Update(ctx context.Context, id int64, p Patch) (*Conversation, error) {
	c, err := s.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	if p.Title != nil {
		if c.Title, err = cleanTitle(*p.Title); err != nil {
			return nil, err
		}
	}
	if p.Settings != nil {
		if err := CheckSettings(*p.Settings); err != nil {
			return nil, err
		}
		c.Settings = *p.Settings
	}
	_, err = s.db.ExecContext(ctx, `UPDATE conversations SET title = ?, system_prompt = ?, temperature = ?, top_p = ?, max_tokens = ?, thinking = ?, context_length = ? WHERE id = ?`,
		c.Title, c.SystemPrompt, c.Temperature, c.TopP, c.MaxTokens, c.Thinking, c.ContextLength, id)
	if err != nil {
		return nil, wrap(fmt.Sprintf("history: update conversation %d", id), err)
	}
	return s.Get(ctx, id)
}

// Delete removes a conversation and its messages.
func (s *Store) Delete(ctx context.Context, id int64) error {
	res, err := s.db.ExecContext(ctx, `DELETE FROM conversations WHERE id = ?`, id)
	if err != nil {
		return wrap(fmt.Sprintf("history: delete conversation %d", id), err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("conversation %d: %w", id, ErrNotFound)
	}
	s.dropGone(ctx, id)
	return nil
}

// ftsQuery turns what a person typed into an FTS5 query that matches
// every word (the last one as a prefix), each quoted so that no FTS5
// syntax from the text is interpreted. "" when there are no words.
func ftsQuery(text string) string {
	var terms []string
	for _, w := range strings.FieldsFunc(text, func(r rune) bool {
		return !(r == '_' || r == '\'' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r > 127)
	}) {
		terms = append(terms, `"`+strings.ReplaceAll(w, `"`, `""`)+`"`)
	}
	if len(terms) == 0 {
		return ""
	}
	if len(terms) > 16 {
		terms = terms[:16]
	}
	terms[len(terms)-1] += "*"
	return strings.Join(terms, " ")
}

// Search finds conversations whose title or messages contain every word
// of text, most recent first, with a snippet of the match.
func (s *Store) Search(ctx context.Context, text string, limit int) ([]Conversation, error) {
	q := ftsQuery(text)
	if q == "" {
		return []Conversation{}, nil
	}
	if limit <= 0 || limit > 200 {
		limit = 200
	}
	rows, err := s.db.QueryContext(ctx, `
		WITH hits AS (
			SELECT m.conversation_id AS cid, snippet(messages_fts, 0, '', '', '…', 12) AS snip, bm25(messages_fts) AS rank
			FROM messages_fts JOIN messages m ON m.id = messages_fts.rowid WHERE messages_fts MATCH ?1
			UNION ALL
			SELECT rowid AS cid, title AS snip, bm25(titles_fts) - 100 AS rank FROM titles_fts WHERE titles_fts MATCH ?1
		), best AS (
			SELECT cid, snip, MIN(rank) FROM hits GROUP BY cid
		)
		SELECT `+prefixed("c.", convColumns)+`, best.snip FROM best JOIN conversations c ON c.id = best.cid
		ORDER BY c.updated_at DESC, c.id DESC LIMIT ?2`, q, limit)
	if err != nil {
		return nil, wrap("history: search", err)
	}
	defer rows.Close()
	out := []Conversation{}
	for rows.Next() {
		var snip string
		c, err := scanConversation(scanFunc(func(dst ...any) error { return rows.Scan(append(dst, &snip)...) }))
		if err != nil {
			return nil, wrap("history: search", err)
		}
		c.Snippet = snip
		out = append(out, *c)
	}
	return out, wrap("history: search", rows.Err())
}

type scanFunc func(...any) error

func (f scanFunc) Scan(dst ...any) error { return f(dst...) }

func prefixed(p, cols string) string {
	parts := strings.Split(cols, ", ")
	for i := range parts {
		parts[i] = p + parts[i]
	}
	return strings.Join(parts, ", ")
}

const msgColumns = `id, conversation_id, role, content, cut, cut_reason, created_at, model, engine, fallback, finish_reason,
	prompt_tokens, completion_tokens, context_length, ttft_ms, tokens_per_second, IFNULL(parent_id, 0), thinking, cached_tokens, omitted_messages, draft_tokens, draft_accepted`

func scanMessage(r scanner) (*Message, error) {
	var m Message
	var st Stats
	var created int64
	if err := r.Scan(&m.ID, &m.ConversationID, &m.Role, &m.Content, &m.Cut, &m.CutReason, &created,
		&st.Model, &st.Engine, &st.Fallback, &st.FinishReason, &st.PromptTokens, &st.CompletionTokens, &st.ContextLength,
		&st.TTFTMillis, &st.TokensPerSecond, &m.ParentID, &m.Thinking, &st.CachedTokens, &st.OmittedMessages,
		&st.DraftTokens, &st.DraftAccepted); err != nil {
		return nil, err
	}
	m.CreatedAt = fromMillis(created)
	if m.Role == "assistant" && (st.Engine != "" || st.Model != "") {
		m.Stats = &st
	}
	if !m.Cut {
		m.CutReason = ""
	}
	return &m, nil
}

// streamed adds to m what has streamed of it so far, when it is an
// answer being streamed (its text is in its journal until it ends).
func (s *Store) streamed(m *Message) {
	if text, thinking, ok := s.answers.text(m.ID); ok {
		m.Content += text
		m.Thinking += thinking
	}
}

// AddUser stores a user's message; a conversation without a title takes
// the start of its first message as one.
func (s *Store) AddUser(ctx context.Context, conversation int64, content string) (*Message, error) {
	if err := CheckMessage(content); err != nil {
		return nil, err
	}
	return s.insert(ctx, conversation, "user", content, false, afterCurrent)
}

// CheckMessage validates a user's message as AddUser does, so that a
// caller can refuse it before changing anything (an edit checks it
// before it drops the messages it replaces).
func CheckMessage(content string) error {
	if strings.TrimSpace(content) == "" {
		return fmt.Errorf("%w: the message is empty", ErrInvalid)
	}
	if len(content) > MaxContent || !utf8.ValidString(content) {
		return fmt.Errorf("%w: the message must be UTF-8 text of at most %d bytes", ErrInvalid, MaxContent)
	}
	return nil
}

// StartAnswer stores an empty assistant message, marked cut
// ("interrupted") until FinishAnswer: if the server dies mid-answer, what
// was streamed stays, marked as cut.
func (s *Store) StartAnswer(ctx context.Context, conversation int64, model string) (*Message, error) {
	m, err := s.insert(ctx, conversation, "assistant", "", true, afterCurrent)
	if err != nil {
		return nil, err
	}
	if _, err := s.db.ExecContext(ctx, `UPDATE messages SET model = ? WHERE id = ?`, model, m.ID); err != nil {
		return nil, wrap("history: start answer", err)
	}
	if err := s.answers.start(conversation, m.ID); err != nil {
		s.db.ExecContext(ctx, `DELETE FROM messages WHERE id = ?`, m.ID)
		return nil, err
	}
	return s.Message(ctx, m.ID)
}

// afterCurrent, as insert's parent, puts the message after the end of
// the shown path.
const afterCurrent = -1

// insert adds a message after parent (afterCurrent: after the shown
// path's last message; 0: as a first message) and makes it the end of
// the shown path.
func (s *Store) insert(ctx context.Context, conversation int64, role, content string, cut bool, parent int64) (*Message, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, wrap("history: add message", err)
	}
	defer tx.Rollback()
	now := s.stamp()
	var title string
	var current sql.NullInt64
	if err := tx.QueryRowContext(ctx, `SELECT title, current_id FROM conversations WHERE id = ?`, conversation).Scan(&title, &current); errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("conversation %d: %w", conversation, ErrNotFound)
	} else if err != nil {
		return nil, wrap("history: add message", err)
	}
	var after sql.NullInt64
	switch {
	case parent == afterCurrent:
		leaf, err := currentLeaf(ctx, tx, conversation, current)
		if err != nil {
			return nil, wrap("history: add message", err)
		}
		after = sql.NullInt64{Int64: leaf, Valid: leaf != 0}
	case parent > 0:
		after = sql.NullInt64{Int64: parent, Valid: true}
	}
	reason := ""
	if cut {
		reason = CutInterrupted
	}
	res, err := tx.ExecContext(ctx, `INSERT INTO messages (conversation_id, role, content, cut, cut_reason, created_at, parent_id) VALUES (?, ?, ?, ?, ?, ?, ?)`,
		conversation, role, content, cut, reason, now, after)
	if err != nil {
		return nil, wrap("history: add message", err)
	}
	id, _ := res.LastInsertId()
	if err := showReply(ctx, tx, after.Int64, id); err != nil {
		return nil, wrap("history: add message", err)
	}
	if title == "" && role == "user" {
		title, _ = cleanTitle(content)
		if r := []rune(title); len(r) > 60 {
			title = strings.TrimSpace(string(r[:59])) + "…"
		}
	}
	if _, err := tx.ExecContext(ctx, `UPDATE conversations SET updated_at = ?, title = ?, current_id = ? WHERE id = ?`, now, title, id, conversation); err != nil {
		return nil, wrap("history: add message", err)
	}
	if err := tx.Commit(); err != nil {
		return nil, wrap("history: add message", err)
	}
	return s.Message(ctx, id)
}

// AppendText adds a piece of a streaming answer: it is in the answer's
// journal (answers.go) when AppendText returns, before the piece is sent
// to anyone, and costs a write of the piece. An error (ErrDiskFull) keeps
// nothing of the piece and everything before it.
func (s *Store) AppendText(ctx context.Context, message int64, text string) error {
	if text == "" {
		return nil
	}
	if ok, err := s.answers.appendText(message, streamText, text); ok {
		return err
	}
	// Not an answer this store started: into the row.
	_, err := s.db.ExecContext(ctx, `UPDATE messages SET content = content || ? WHERE id = ?`, text, message)
	return wrap("history: store answer", err)
}

// FinishAnswer records an answer as complete, with its stats.
func (s *Store) FinishAnswer(ctx context.Context, message int64, st Stats) error {
	return s.endAnswer(ctx, message, false, "", st)
}

// CutAnswer records that an answer ended before it was complete.
func (s *Store) CutAnswer(ctx context.Context, message int64, reason string, st Stats) error {
	return s.endAnswer(ctx, message, true, reason, st)
}

// endAnswer records how an answer ended and puts its streamed text into
// the database: one write, one indexing for search. When that fails (a
// full disk) the journal stays, and the next Open puts it in.
func (s *Store) endAnswer(ctx context.Context, message int64, cut bool, reason string, st Stats) error {
	text, thinking, _ := s.answers.text(message)
	_, err := s.db.ExecContext(ctx, `UPDATE messages SET content = content || ?, thinking = thinking || ?, cut = ?, cut_reason = ?, engine = ?, fallback = ?, finish_reason = ?,
		prompt_tokens = ?, completion_tokens = ?, context_length = ?, ttft_ms = ?, tokens_per_second = ?,
		cached_tokens = ?, omitted_messages = ?, draft_tokens = ?, draft_accepted = ?,
		model = CASE WHEN ? = '' THEN model ELSE ? END WHERE id = ?`,
		text, thinking, cut, reason, st.Engine, st.Fallback, st.FinishReason, st.PromptTokens, st.CompletionTokens, st.ContextLength,
		st.TTFTMillis, st.TokensPerSecond, st.CachedTokens, st.OmittedMessages, st.DraftTokens, st.DraftAccepted, st.Model, st.Model, message)
	if err != nil {
		if isDiskFullCode(err) {
			return fmt.Errorf("history: finish answer: %w (%v); the answer is kept in %s until there is room", ErrDiskFull, err, s.answers.path(message))
		}
		return wrap("history: finish answer", err)
	}
	s.answers.done(message)
	return nil
}
