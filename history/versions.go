package history

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
)

// Answer versions. A conversation's messages form a tree: each message
// follows its parent (ParentID), and the conversation records which
// message ends the path the page shows (current_id). Answering a
// question again adds an answer beside the old one, editing a question
// adds a question beside it: nothing earlier is dropped, and the page
// offers each message's versions (‹ 2/3 ›). Ask, Edit and Regenerate
// prepare a turn, Answer starts its answer, Truncate removes an answer
// that said nothing, Select switches versions; the web handler only
// calls them.

// querier is what both *sql.DB and *sql.Tx offer.
type querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// currentLeaf is the message that ends the shown path: current when it
// is still one of the conversation's messages, else its newest message
// (0 when it has none).
func currentLeaf(ctx context.Context, q querier, conversation int64, current sql.NullInt64) (int64, error) {
	if current.Valid {
		var n int
		if err := q.QueryRowContext(ctx, `SELECT COUNT(*) FROM messages WHERE id = ? AND conversation_id = ?`, current.Int64, conversation).Scan(&n); err != nil {
			return 0, err
		}
		if n == 1 {
			return current.Int64, nil
		}
	}
	var last sql.NullInt64
	if err := q.QueryRowContext(ctx, `SELECT MAX(id) FROM messages WHERE conversation_id = ?`, conversation).Scan(&last); err != nil {
		return 0, err
	}
	return last.Int64, nil
}

// newestLeaf follows the replies from id down to a message no one has
// replied to: at each step the reply last shown there, or the newest.
func newestLeaf(ctx context.Context, q querier, id int64) (int64, error) {
	for {
		var next sql.NullInt64
		err := q.QueryRowContext(ctx, `SELECT IFNULL(
			(SELECT r.id FROM messages m JOIN messages r ON r.id = m.shown_reply AND r.parent_id = m.id WHERE m.id = ?1),
			(SELECT MAX(id) FROM messages WHERE parent_id = ?1))`, id).Scan(&next)
		if err != nil {
			return 0, err
		}
		if !next.Valid {
			return id, nil
		}
		id = next.Int64
	}
}

// showReply records that reply is the one shown after its parent.
func showReply(ctx context.Context, db execer, parent, reply int64) error {
	if parent == 0 {
		return nil
	}
	_, err := db.ExecContext(ctx, `UPDATE messages SET shown_reply = ? WHERE id = ?`, reply, parent)
	return err
}

type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// tree is a conversation's messages, every version.
type tree struct {
	byID     map[int64]*Message
	children map[int64][]int64 // by parent (0: the first messages), oldest first
	order    []int64           // every id, oldest first
	current  int64
}

func (s *Store) tree(ctx context.Context, conversation int64) (*tree, error) {
	var current sql.NullInt64
	err := s.db.QueryRowContext(ctx, `SELECT current_id FROM conversations WHERE id = ?`, conversation).Scan(&current)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("conversation %d: %w", conversation, ErrNotFound)
	}
	if err != nil {
		return nil, wrap("history: messages", err)
	}
	rows, err := s.db.QueryContext(ctx, `SELECT `+msgColumns+` FROM messages WHERE conversation_id = ? ORDER BY id`, conversation)
	if err != nil {
		return nil, wrap("history: messages", err)
	}
	defer rows.Close()
	t := &tree{byID: map[int64]*Message{}, children: map[int64][]int64{}}
	for rows.Next() {
		m, err := scanMessage(rows)
		if err != nil {
			return nil, wrap("history: messages", err)
		}
		s.streamed(m)
		t.byID[m.ID] = m
		t.order = append(t.order, m.ID)
	}
	if err := rows.Err(); err != nil {
		return nil, wrap("history: messages", err)
	}
	for _, id := range t.order {
		p := t.byID[id].ParentID
		if _, ok := t.byID[p]; !ok {
			p = 0
		}
		t.children[p] = append(t.children[p], id)
	}
	t.current = current.Int64
	if _, ok := t.byID[t.current]; !ok && len(t.order) > 0 {
		t.current = t.order[len(t.order)-1]
	}
	return t, nil
}

// path is the shown path, first message first, each with its versions.
func (t *tree) path() []Message {
	out := []Message{}
	seen := map[int64]bool{}
	for id := t.current; id != 0 && !seen[id]; {
		m, ok := t.byID[id]
		if !ok {
			break
		}
		seen[id] = true
		out = append(out, *m)
		id = m.ParentID
	}
	slices.Reverse(out)
	for i := range out {
		t.versions(&out[i])
	}
	return out
}

// versions fills m.Versions from its siblings.
func (t *tree) versions(m *Message) {
	p := m.ParentID
	if _, ok := t.byID[p]; !ok {
		p = 0
	}
	if sib := t.children[p]; len(sib) > 1 {
		m.Versions = slices.Clone(sib)
	}
}

// others are the messages not on the shown path, oldest first.
func (t *tree) others(path []Message) []Message {
	on := map[int64]bool{}
	for _, m := range path {
		on[m.ID] = true
	}
	out := []Message{}
	for _, id := range t.order {
		if !on[id] {
			m := *t.byID[id]
			t.versions(&m)
			out = append(out, m)
		}
	}
	return out
}

// Messages returns the conversation's shown path: its messages from the
// first to the current one, each with its versions.
func (s *Store) Messages(ctx context.Context, conversation int64) ([]Message, error) {
	t, err := s.tree(ctx, conversation)
	if err != nil {
		return nil, err
	}
	return t.path(), nil
}

// Message returns one message, with its versions.
func (s *Store) Message(ctx context.Context, id int64) (*Message, error) {
	m, err := scanMessage(s.db.QueryRowContext(ctx, `SELECT `+msgColumns+` FROM messages WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("message %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return nil, wrap(fmt.Sprintf("history: message %d", id), err)
	}
	s.streamed(m)
	rows, err := s.db.QueryContext(ctx, `SELECT id FROM messages WHERE conversation_id = ? AND parent_id IS ? ORDER BY id`,
		m.ConversationID, sql.NullInt64{Int64: m.ParentID, Valid: m.ParentID != 0})
	if err != nil {
		return nil, wrap(fmt.Sprintf("history: message %d", id), err)
	}
	defer rows.Close()
	var sib []int64
	for rows.Next() {
		var v int64
		if err := rows.Scan(&v); err != nil {
			return nil, wrap(fmt.Sprintf("history: message %d", id), err)
		}
		sib = append(sib, v)
	}
	if len(sib) > 1 {
		m.Versions = sib
	}
	return m, wrap(fmt.Sprintf("history: message %d", id), rows.Err())
}

// A Turn is a question ready to be answered: the shown path up to and
// including it (what the model is to see).
type Turn struct {
	Question *Message
	Path     []Message
}

// Ask stores a user's message at the end of the shown path (as AddUser)
// and returns its turn.
func (s *Store) Ask(ctx context.Context, conversation int64, content string) (*Turn, error) {
	path, err := s.Messages(ctx, conversation)
	if err != nil {
		return nil, err
	}
	q, err := s.AddUser(ctx, conversation, content)
	if err != nil {
		return nil, err
	}
	return &Turn{Question: q, Path: append(path, *q)}, nil
}

// Edit stores content as a new version of the user's message id: beside
// it, so that the old question and everything after it stay, as its
// other version. It returns the new question's turn.
func (s *Store) Edit(ctx context.Context, conversation, id int64, content string) (*Turn, error) {
	if err := CheckMessage(content); err != nil {
		return nil, err
	}
	path, err := s.Messages(ctx, conversation)
	if err != nil {
		return nil, err
	}
	at := slices.IndexFunc(path, func(m Message) bool { return m.ID == id && m.Role == "user" })
	if at < 0 {
		return nil, fmt.Errorf("conversation %d has no message %d of yours on the shown path to edit: %w", conversation, id, ErrNotFound)
	}
	q, err := s.insert(ctx, conversation, "user", content, false, path[at].ParentID)
	if err != nil {
		return nil, err
	}
	return &Turn{Question: q, Path: append(path[:at:at], *q)}, nil
}

// Regenerate returns the turn of the shown path's last question, to be
// answered again. It changes nothing: the new answer (Answer) is a
// version beside the old one.
func (s *Store) Regenerate(ctx context.Context, conversation int64) (*Turn, error) {
	path, err := s.Messages(ctx, conversation)
	if err != nil {
		return nil, err
	}
	for i := len(path) - 1; i >= 0; i-- {
		if path[i].Role == "user" {
			q := path[i]
			return &Turn{Question: &q, Path: path[: i+1 : i+1]}, nil
		}
	}
	return nil, fmt.Errorf("%w: there is no message to answer again in conversation %d", ErrInvalid, conversation)
}

// Answer stores an empty answer to the turn's question, cut
// ("interrupted") until FinishAnswer, as StartAnswer does; when the
// question has an answer already, this one is its next version. It is
// the end of the shown path.
func (s *Store) Answer(ctx context.Context, t *Turn, model string) (*Message, error) {
	m, err := s.insert(ctx, t.Question.ConversationID, "assistant", "", true, t.Question.ID)
	if err != nil {
		return nil, err
	}
	if _, err := s.db.ExecContext(ctx, `UPDATE messages SET model = ? WHERE id = ?`, model, m.ID); err != nil {
		return nil, wrap("history: start answer", err)
	}
	if err := s.answers.start(m.ConversationID, m.ID); err != nil {
		s.db.ExecContext(ctx, `DELETE FROM messages WHERE id = ?`, m.ID)
		return nil, err
	}
	return s.Message(ctx, m.ID)
}

// Truncate removes a message and every message after it, in every
// version (an answer that said nothing, or a chat to cut back). The
// shown path goes to the newest remaining version beside it, or, when
// there is none, ends with the message it followed.
func (s *Store) Truncate(ctx context.Context, conversation, from int64) error {
	m, err := s.Message(ctx, from)
	if err != nil {
		return err
	}
	if m.ConversationID != conversation {
		return fmt.Errorf("message %d in conversation %d: %w", from, conversation, ErrNotFound)
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return wrap("history: remove messages", err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `DELETE FROM messages WHERE id = ?`, from); err != nil {
		return wrap("history: remove messages", err)
	}
	parent := sql.NullInt64{Int64: m.ParentID, Valid: m.ParentID != 0}
	var sibling sql.NullInt64
	if err := tx.QueryRowContext(ctx, `SELECT MAX(id) FROM messages WHERE conversation_id = ? AND parent_id IS ?`, conversation, parent).Scan(&sibling); err != nil {
		return wrap("history: remove messages", err)
	}
	current := parent
	if sibling.Valid {
		leaf, err := newestLeaf(ctx, tx, sibling.Int64)
		if err != nil {
			return wrap("history: remove messages", err)
		}
		current = sql.NullInt64{Int64: leaf, Valid: true}
	}
	if _, err := tx.ExecContext(ctx, `UPDATE conversations SET current_id = ? WHERE id = ?`, current, conversation); err != nil {
		return wrap("history: remove messages", err)
	}
	if err := tx.Commit(); err != nil {
		return wrap("history: remove messages", err)
	}
	s.dropGone(ctx, conversation)
	return nil
}

// Select shows the version id of a message: the shown path goes through
// it and on through the replies last shown after it (the newest where
// none was chosen). The chat keeps its
// place in the list (nothing new was said).
func (s *Store) Select(ctx context.Context, conversation, id int64) error {
	m, err := s.Message(ctx, id)
	if err != nil {
		return err
	}
	if m.ConversationID != conversation {
		return fmt.Errorf("message %d in conversation %d: %w", id, conversation, ErrNotFound)
	}
	if err := showReply(ctx, s.db, m.ParentID, id); err != nil {
		return wrap("history: show version", err)
	}
	leaf, err := newestLeaf(ctx, s.db, id)
	if err != nil {
		return wrap("history: show version", err)
	}
	_, err = s.db.ExecContext(ctx, `UPDATE conversations SET current_id = ? WHERE id = ?`, leaf, conversation)
	return wrap("history: show version", err)
}
