package history

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Damage to history.db moved the whole history aside, even damage to the
// search index alone, where every chat was still readable, and the page
// then showed an empty history. Now Open, on a database whose integrity
// check fails, first keeps a copy of the file as it was
// (history.db.damaged-…), then:
//
//  1. repairs it in place when the damage is in what can be rebuilt:
//     the search index (rebuilt from the messages) and the other
//     indexes (REINDEX);
//  2. otherwise salvages into a new database every conversation and
//     message that can still be read, and puts the new one in its place;
//
// and says which in the Notice (the page's banner, /api/history). Only a
// file that is not a database at all, or that nothing can be read from,
// is moved aside as before.

// repair tries 1 and 2 on the damaged database at path. It returns the
// notice, or an error when nothing could be saved.
func repair(ctx context.Context, path string, opts Options, now time.Time) (string, error) {
	backup, err := copyAside(path, now)
	if err != nil {
		return "", fmt.Errorf("keep a copy of the damaged history: %w", err)
	}
	if rebuildIndexes(ctx, path, opts) == nil {
		return fmt.Sprintf("The chat history %s was damaged in its search index or its other indexes; they were rebuilt from the chats, and every chat is here. A copy of the damaged file is in %s.",
			path, backup), nil
	}
	convs, msgs, lost, err := salvage(ctx, path, opts)
	if err != nil {
		// Nothing to save: the file is moved aside whole, so the copy
		// is not needed.
		for _, sfx := range []string{"", "-wal"} {
			os.Remove(backup + sfx)
		}
		return "", err
	}
	what := fmt.Sprintf("%d chats and %d messages could be read and were saved into a new history in its place", convs, msgs)
	if lost > 0 {
		what += fmt.Sprintf("; %d rows could not be read", lost)
	}
	return fmt.Sprintf("The chat history %s was damaged: %s. The damaged file is in %s; nothing was deleted.", path, what, backup), nil
}

// copyAside copies path (with its -wal) to path.damaged-TIME.
func copyAside(path string, now time.Time) (string, error) {
	base := fmt.Sprintf("%s.damaged-%s", path, now.UTC().Format("20060102-150405"))
	aside := base
	for i := 2; ; i++ {
		if _, err := os.Lstat(aside); errors.Is(err, os.ErrNotExist) {
			break
		}
		aside = fmt.Sprintf("%s-%d", base, i)
	}
	for _, sfx := range []string{"", "-wal"} {
		if err := copyFile(path+sfx, aside+sfx); err != nil && !(sfx != "" && errors.Is(err, os.ErrNotExist)) {
			return "", err
		}
	}
	return aside, nil
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		os.Remove(to)
		return err
	}
	return out.Close()
}

func openRaw(path string, opts Options) (*sql.DB, error) {
	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", opts.BusyTimeout.Milliseconds()))
	db, err := sql.Open("sqlite", "file:"+filepath.ToSlash(path)+"?"+q.Encode())
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	return db, nil
}

// rebuildIndexes rebuilds the search index and the other indexes in
// place and checks the database again.
func rebuildIndexes(ctx context.Context, path string, opts Options) error {
	db, err := openRaw(path, opts)
	if err != nil {
		return err
	}
	defer db.Close()
	for _, stmt := range []string{
		`INSERT INTO messages_fts(messages_fts) VALUES ('rebuild')`,
		`INSERT INTO titles_fts(titles_fts) VALUES ('rebuild')`,
		`REINDEX`,
	} {
		if _, err := db.ExecContext(ctx, stmt); err != nil {
			return err
		}
	}
	var check string
	if err := db.QueryRowContext(ctx, "PRAGMA integrity_check").Scan(&check); err != nil {
		return err
	}
	if check != "ok" {
		return fmt.Errorf("still damaged: %s", check)
	}
	return nil
}

// salvage copies what can be read of the damaged database at path into
// a new one, which then replaces it. It counts the conversations and
// messages saved and the rows lost.
func salvage(ctx context.Context, path string, opts Options) (convs, msgs, lost int, err error) {
	fresh := path + ".salvage"
	for _, sfx := range []string{"", "-wal", "-shm"} {
		os.Remove(fresh + sfx)
	}
	st, _, err := open(ctx, fresh, opts) // the current schema, empty
	if err != nil {
		return 0, 0, 0, fmt.Errorf("start a new history to salvage into: %w", err)
	}
	db := st.db
	// The search index is filled by the triggers as rows arrive.
	if _, err := db.ExecContext(ctx, `ATTACH DATABASE ? AS old`, "file:"+filepath.ToSlash(path)+"?mode=ro"); err != nil {
		db.Close()
		return 0, 0, 0, fmt.Errorf("read the damaged history: %w", err)
	}
	db.ExecContext(ctx, `PRAGMA foreign_keys = OFF`)
	for _, table := range []string{"conversations", "messages"} {
		n, bad := copyRows(ctx, db, table)
		lost += bad
		if table == "conversations" {
			convs = n
		} else {
			msgs = n
		}
	}
	// Messages whose conversation was lost cannot be shown.
	db.ExecContext(ctx, `DELETE FROM messages WHERE conversation_id NOT IN (SELECT id FROM conversations)`)
	db.ExecContext(ctx, `DETACH DATABASE old`)
	db.Close()
	if convs == 0 && msgs == 0 {
		for _, sfx := range []string{"", "-wal", "-shm"} {
			os.Remove(fresh + sfx)
		}
		return 0, 0, lost, errors.New("nothing could be read from it")
	}
	os.Remove(fresh + "-shm")
	for _, sfx := range []string{"-wal", "-shm"} {
		os.Remove(path + sfx)
	}
	if err := os.Rename(fresh, path); err != nil {
		return 0, 0, 0, fmt.Errorf("put the salvaged history in place: %w", err)
	}
	// A WAL left after the close holds part of the salvaged history.
	if _, err := os.Lstat(fresh + "-wal"); err == nil {
		os.Rename(fresh+"-wal", path+"-wal")
	}
	return convs, msgs, lost, nil
}

// copyRows copies a table from old into main: at once when it reads
// whole, else row by row by rowid, skipping the rows that cannot be
// read. The columns both have are copied, so that a history of an
// older schema (fewer columns: those a later migration added keep
// their defaults) is salvaged too.
func copyRows(ctx context.Context, db *sql.DB, table string) (copied, lost int) {
	insert := `INSERT INTO main.` + table + ` SELECT * FROM old.` + table
	if cols := commonColumns(ctx, db, table); cols != "" {
		insert = `INSERT INTO main.` + table + ` (` + cols + `) SELECT ` + cols + ` FROM old.` + table
	}
	if res, err := db.ExecContext(ctx, insert); err == nil {
		n, _ := res.RowsAffected()
		return int(n), 0
	}
	db.ExecContext(ctx, `DELETE FROM main.`+table)
	var top sql.NullInt64
	if err := db.QueryRowContext(ctx, `SELECT seq FROM old.sqlite_sequence WHERE name = ?`, table).Scan(&top); err != nil || !top.Valid {
		db.QueryRowContext(ctx, `SELECT MAX(rowid) FROM old.`+table).Scan(&top)
	}
	for id := int64(1); id <= top.Int64; id++ {
		res, err := db.ExecContext(ctx, insert+` WHERE rowid = ?`, id)
		if err != nil {
			lost++
			continue
		}
		if n, _ := res.RowsAffected(); n == 1 {
			copied++
		}
	}
	return copied, lost
}

// commonColumns lists the columns table has in both main and old, quoted
// and comma-separated ("" when they cannot be read).
func commonColumns(ctx context.Context, db *sql.DB, table string) string {
	names := func(schema string) []string {
		rows, err := db.QueryContext(ctx, `SELECT name FROM pragma_table_info(?, ?)`, table, schema)
		if err != nil {
			return nil
		}
		defer rows.Close()
		var out []string
		for rows.Next() {
			var n string
			if rows.Scan(&n) == nil {
				out = append(out, n)
			}
		}
		return out
	}
	old := map[string]bool{}
	for _, n := range names("old") {
		old[n] = true
	}
	var cols []string
	for _, n := range names("main") {
		if old[n] {
			cols = append(cols, `"`+strings.ReplaceAll(n, `"`, `""`)+`"`)
		}
	}
	return strings.Join(cols, ", ")
}
