package history

import "context"

// AppendThinking adds a piece of a streaming answer's thinking (a
// reasoning model's <think> text), kept apart from its content. Like
// AppendText, it is committed when it returns, before the piece is sent.
func (s *Store) AppendThinking(ctx context.Context, message int64, text string) error {
	if text == "" {
		return nil
	}
	_, err := s.db.ExecContext(ctx, `UPDATE messages SET thinking = thinking || ? WHERE id = ?`, text, message)
	return wrap("history: store thinking", err)
}
