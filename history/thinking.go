package history

import "context"

// AppendThinking adds a piece of a streaming answer's thinking (a
// reasoning model's <think> text), kept apart from its content. Like
// AppendText, it goes into the answer's journal (into the row when the
// answer ends) before the piece is sent.
func (s *Store) AppendThinking(ctx context.Context, message int64, text string) error {
	if text == "" {
		return nil
	}
	if ok, err := s.answers.appendText(message, streamThink, text); ok {
		return err
	}
	// Not an answer this store started: into the row.
	_, err := s.db.ExecContext(ctx, `UPDATE messages SET thinking = thinking || ? WHERE id = ?`, text, message)
	return wrap("history: store thinking", err)
}
