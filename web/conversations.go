package web

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/npuchat/npuchat/config"
	"github.com/npuchat/npuchat/history"
	"github.com/npuchat/npuchat/service"
	"github.com/npuchat/npuchat/service/backend"
)

// The conversation API (/api/conversations) is the chat page's back end:
// the server keeps the history, and stores each answer as it streams
// (history.Store.AppendText runs before a piece is sent), so whatever a
// browser showed is on disk.

// store returns the history store, or an error for the client when the
// history is not available (locked, closed, or not configured).
func (s *Server) store(ctx context.Context) (*history.Store, error) {
	if s.opts.History == nil {
		return nil, &apiError{http.StatusNotFound, "history_unavailable", "this server keeps no chat history", ""}
	}
	st, err := s.opts.History.Store(ctx)
	if err != nil {
		return nil, err
	}
	return st, nil
}

// historyError maps store errors to API errors with a message a person
// can act on.
func historyError(err error) error {
	var ae *apiError
	switch {
	case errors.As(err, &ae):
		return ae
	case errors.Is(err, history.ErrNotFound):
		return &apiError{http.StatusNotFound, "not_found", err.Error(), ""}
	case errors.Is(err, history.ErrInvalid):
		return &apiError{http.StatusBadRequest, "invalid_request_error", strings.TrimPrefix(err.Error(), "invalid: "), ""}
	case errors.Is(err, history.ErrLocked):
		return &apiError{http.StatusServiceUnavailable, "history_locked",
			"The chat history is locked by another program (" + cause(err) + "). Close the other program; chats are saved again as soon as it is free.", ""}
	case errors.Is(err, history.ErrDiskFull):
		return &apiError{http.StatusInsufficientStorage, "disk_full",
			"The disk is full, so the chat history cannot keep more of this answer: it was stopped here, and everything shown so far is stored. Free some space, then ask again.", ""}
	case errors.Is(err, history.ErrClosed):
		return &apiError{http.StatusServiceUnavailable, "history_unavailable", "the chat history is closed; the server is stopping", ""}
	}
	return &apiError{http.StatusInternalServerError, "history_error", "the chat history failed: " + err.Error(), ""}
}

func cause(err error) string {
	for {
		u := errors.Unwrap(err)
		if u == nil {
			return err.Error()
		}
		err = u
	}
}

func (s *Server) failHistory(w http.ResponseWriter, r *http.Request, err error) {
	s.fail(w, r, historyError(err))
}

// pathID parses {id} (or another path value) as a positive integer.
func pathID(r *http.Request, name string) (int64, error) {
	v := r.PathValue(name)
	id, err := strconv.ParseInt(v, 10, 64)
	if err != nil || id <= 0 {
		return 0, &apiError{http.StatusBadRequest, "invalid_request_error", fmt.Sprintf("%s %q is not a conversation or message id (a positive number)", name, v), name}
	}
	return id, nil
}

// historyStatus is GET /api/history: where the history is and what is
// wrong with it, for the page's banner.
func (s *Server) historyStatus(w http.ResponseWriter, r *http.Request) {
	out := map[string]any{"available": false}
	if s.opts.History != nil {
		_, err := s.opts.History.Store(r.Context())
		out["available"] = err == nil
		out["path"] = s.opts.History.Path()
		if p := s.opts.History.Problem(); p != "" {
			if err != nil {
				p = historyError(err).Error()
			}
			out["problem"] = p
		}
	} else {
		out["problem"] = "this server keeps no chat history"
	}
	writeJSON(w, http.StatusOK, out)
}

// conversationIn is the body of POST and PATCH /api/conversations[/{id}].
type conversationIn struct {
	Title        *string  `json:"title"`
	SystemPrompt *string  `json:"system_prompt"`
	Temperature  *float64 `json:"temperature"`
	TopP         *float64 `json:"top_p"`
	MaxTokens    *int     `json:"max_tokens"`
	// Thinking switches a reasoning model's thinking on or off (where
	// the model's chat template allows: status info capability
	// "thinking").
	Thinking *bool `json:"thinking"`
	// ContextLength is the context the chat's answers may use, in
	// tokens; a longer one than the loaded model holds is clamped to it
	// (the answer's stats say the context used).
	ContextLength *int `json:"context_length"`
	// Clear names settings to reset to the server's default
	// ("temperature", "top_p", "max_tokens", "thinking",
	// "context_length") in a PATCH.
	Clear []string `json:"clear"`
}

func (in *conversationIn) apply(st *history.Settings) error {
	if in.SystemPrompt != nil {
		st.SystemPrompt = *in.SystemPrompt
	}
	if in.Temperature != nil {
		st.Temperature = in.Temperature
	}
	if in.TopP != nil {
		st.TopP = in.TopP
	}
	if in.MaxTokens != nil {
		st.MaxTokens = in.MaxTokens
	}
	if in.Thinking != nil {
		st.Thinking = in.Thinking
	}
	if n := in.ContextLength; n != nil {
		if *n < history.MinContext || *n > history.MaxContext {
			return badRequest("context_length", "context_length must be between %d and %d tokens (or cleared for the loaded model's context), got %d",
				history.MinContext, history.MaxContext, *n)
		}
		st.ContextLength = n
	}
	for _, c := range in.Clear {
		switch c {
		case "temperature":
			st.Temperature = nil
		case "top_p":
			st.TopP = nil
		case "max_tokens":
			st.MaxTokens = nil
		case "thinking":
			st.Thinking = nil
		case "context_length":
			st.ContextLength = nil
		default:
			return badRequest("clear", "clear: %q is not a setting (temperature, top_p, max_tokens, thinking, context_length)", c)
		}
	}
	return nil
}

// decode reads a body of at most limit bytes (readSmall) into v.
func (s *Server) decode(w http.ResponseWriter, r *http.Request, limit int64, v any) error {
	body, err := s.readSmall(w, r, limit)
	if err != nil {
		return err
	}
	return unmarshalBody(body, v)
}

func (s *Server) listConversations(w http.ResponseWriter, r *http.Request) {
	st, err := s.store(r.Context())
	if err != nil {
		s.failHistory(w, r, err)
		return
	}
	var list []history.Conversation
	if q := r.URL.Query().Get("q"); strings.TrimSpace(q) != "" {
		list, err = st.Search(r.Context(), q, 0)
	} else {
		list, err = st.List(r.Context(), 0)
	}
	if err != nil {
		s.failHistory(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"conversations": list})
}

func (s *Server) createConversation(w http.ResponseWriter, r *http.Request) {
	st, err := s.store(r.Context())
	if err != nil {
		s.failHistory(w, r, err)
		return
	}
	var in conversationIn
	if body, err := s.readSmall(w, r, maxChatBody); err != nil {
		s.fail(w, r, err)
		return
	} else if len(strings.TrimSpace(string(body))) > 0 {
		if err := unmarshalBody(body, &in); err != nil {
			s.fail(w, r, err)
			return
		}
	}
	var set history.Settings
	if err := in.apply(&set); err != nil {
		s.fail(w, r, err)
		return
	}
	title := ""
	if in.Title != nil {
		title = *in.Title
	}
	c, err := st.Create(r.Context(), title, set)
	if err != nil {
		s.failHistory(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, c)
}

func (s *Server) getConversation(w http.ResponseWriter, r *http.Request) {
	st, id, ok := s.storeAndID(w, r)
	if !ok {
		return
	}
	e, err := st.Load(r.Context(), id)
	if err != nil {
		s.failHistory(w, r, err)
		return
	}
	// the chat is open: its keys and values, if on disk, are read back
	// while its next message is written (in the background)
	s.mgr.WarmCache(chatCacheTag(id))
	writeJSON(w, http.StatusOK, e)
}

func (s *Server) storeAndID(w http.ResponseWriter, r *http.Request) (*history.Store, int64, bool) {
	id, err := pathID(r, "id")
	if err != nil {
		s.fail(w, r, err)
		return nil, 0, false
	}
	st, err := s.store(r.Context())
	if err != nil {
		s.failHistory(w, r, err)
		return nil, 0, false
	}
	return st, id, true
}

func (s *Server) updateConversation(w http.ResponseWriter, r *http.Request) {
	st, id, ok := s.storeAndID(w, r)
	if !ok {
		return
	}
	var in conversationIn
	if err := s.decode(w, r, maxChatBody, &in); err != nil {
		s.fail(w, r, err)
		return
	}
	c, err := st.Get(r.Context(), id)
	if err != nil {
		s.failHistory(w, r, err)
		return
	}
	set := c.Settings
	if err := in.apply(&set); err != nil {
		s.fail(w, r, err)
		return
	}
	c, err = st.Update(r.Context(), id, history.Patch{Title: in.Title, Settings: &set})
	if err != nil {
		s.failHistory(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, c)
}

func (s *Server) deleteConversation(w http.ResponseWriter, r *http.Request) {
	st, id, ok := s.storeAndID(w, r)
	if !ok {
		return
	}
	// An answer running in the chat stops first: it must not go on into
	// a chat that is gone, holding the generation slot.
	if !s.chats.interrupt(r.Context(), id, errChatDeleted) {
		s.fail(w, r, chatBusy(id))
		return
	}
	if err := st.Delete(r.Context(), id); err != nil {
		s.failHistory(w, r, err)
		return
	}
	s.mgr.ForgetCache(chatCacheTag(id)) // its keys and values go with it
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) exportConversation(w http.ResponseWriter, r *http.Request) {
	st, id, ok := s.storeAndID(w, r)
	if !ok {
		return
	}
	format := r.URL.Query().Get("format")
	if format == "" {
		format = "md"
	}
	if format != "md" && format != "json" {
		s.fail(w, r, badRequest("format", "format must be md or json, got %q", format))
		return
	}
	e, err := st.Load(r.Context(), id)
	if err != nil {
		s.failHistory(w, r, err)
		return
	}
	w.Header().Set("Content-Disposition", attachmentDisposition(exportFileName(e.Title, id, format)))
	if format == "json" {
		w.Header().Set("Content-Type", "application/json")
		e.WriteJSON(w)
		return
	}
	w.Header().Set("Content-Type", "text/markdown; charset=utf-8")
	e.WriteMarkdown(w)
}

func (s *Server) listMessages(w http.ResponseWriter, r *http.Request) {
	st, id, ok := s.storeAndID(w, r)
	if !ok {
		return
	}
	msgs, err := st.Messages(r.Context(), id)
	if err != nil {
		s.failHistory(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"messages": msgs})
}

// sendIn is the body of POST /api/conversations/{id}/messages.
type sendIn struct {
	// Content is the user's message (not with regenerate).
	Content string `json:"content"`
	// Edit, when set, sends Content as a new version of that user
	// message (the old one and what followed it stay, as its other
	// version).
	Edit int64 `json:"edit"`
	// Regenerate answers the last user message again; the new answer
	// is a version beside the earlier ones.
	Regenerate bool `json:"regenerate"`
	// Model overrides the model to ask (default: the one the server runs).
	Model string `json:"model"`
}

// sendMessage is POST /api/conversations/{id}/messages: it stores the
// user's message and streams the answer as server-sent events, storing
// each piece before it is sent:
//
//	event: user     data: the stored user message
//	event: start    data: the stored (empty, cut) answer
//	event: thinking data: {"text": "..."} (a reasoning model's <think> text)
//	event: token    data: {"text": "..."}
//	event: done     data: the finished answer, with its stats
//	event: error    data: {"message": "...", "answer": the cut answer or null}
func (s *Server) sendMessage(w http.ResponseWriter, r *http.Request) {
	st, id, ok := s.storeAndID(w, r)
	if !ok {
		return
	}
	// A place in the queue once the body is here, before anything is stored:
	// a full queue is a 429 that changed nothing.
	ticket, body, ok := s.admit(w, r)
	if !ok {
		return
	}
	defer ticket.Release()
	var in sendIn
	if err := unmarshalBody(body, &in); err != nil {
		s.fail(w, r, err)
		return
	}
	// One answer at a time per chat (chatwriter.go): an edit or a
	// regenerate stops the running one and waits for it to end; a new
	// message while it runs is 409.
	if in.Edit != 0 || in.Regenerate {
		if !s.chats.interrupt(r.Context(), id, errChatChanged) {
			s.fail(w, r, chatBusy(id))
			return
		}
	}
	writer := s.chats.begin(id)
	if writer == nil {
		s.fail(w, r, chatBusy(id))
		return
	}
	defer s.chats.end(id, writer)
	ctx := r.Context()
	// Stored writes go on when the client leaves: what it was sent stays.
	keep := context.WithoutCancel(ctx)
	conv, err := st.Get(ctx, id)
	if err != nil {
		s.failHistory(w, r, err)
		return
	}
	turn, err := s.turn(keep, st, id, in)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	req, err := s.chatRequest(conv, turn.Path, in.Model)
	if err != nil {
		s.fail(w, r, s.undoTurn(keep, st, id, in, turn, err))
		return
	}
	ans, err := st.Answer(keep, turn, req.Model)
	if err != nil {
		s.fail(w, r, s.undoTurn(keep, st, id, in, turn, historyError(err)))
		return
	}
	user := turn.Question
	out := &conversationWriter{out: s.newSSE(w), st: st, keep: keep, conv: id, ans: ans.ID, classify: s.classify}
	if out.out.event("user", user) != nil || out.out.event("start", ans) != nil {
		st.CutAnswer(keep, ans.ID, history.CutStopped, history.Stats{Model: req.Model})
		return
	}
	gopts := service.GenerateOptions{Ticket: ticket}
	a := newAnswer("conv-", req.Model, time.Now())
	s.drive(w, r, a, &call{req: req, opts: gopts, out: out, split: true, stop: writer.ctx, observe: &observer{
		// Stored before it is sent: whatever the page showed is on disk.
		piece: out.store,
		end: func(a *answer) {
			out.stats = s.answerStats(a)
			switch {
			case a.Err == nil:
				out.endErr = st.FinishAnswer(keep, ans.ID, out.stats)
			case a.Pieces == 0 && ctx.Err() == nil:
				// Nothing was said: keep the question, drop the empty answer.
				st.Truncate(keep, id, ans.ID)
				out.dropped = true
			case ctx.Err() != nil, errors.Is(a.Err, errChatChanged), errors.Is(a.Err, errChatDeleted):
				st.CutAnswer(keep, ans.ID, history.CutStopped, out.stats)
			case errors.Is(a.Err, errShuttingDown):
				st.CutAnswer(keep, ans.ID, history.CutInterrupted, out.stats)
			case !s.mgr.Status().Enabled:
				// Stop switches the model off before it cancels the answer.
				st.CutAnswer(keep, ans.ID, history.CutSwitchedOff, out.stats)
			default:
				st.CutAnswer(keep, ans.ID, history.CutFailed, out.stats)
			}
		},
	}})
}

// undoTurn takes back what turn stored (a new message, or a new version
// of one; a regenerate stores nothing) when its answer could not be
// started, so that the history and the client agree: on a full disk the
// message was stored and the client got an error, and the page, which
// keeps a refused message in its box, sent it twice. The error says the
// message was not sent; when taking it back fails too, it says the
// message is in the chat.
func (s *Server) undoTurn(ctx context.Context, st *history.Store, id int64, in sendIn, turn *history.Turn, err error) error {
	ae := *s.classify(err)
	if in.Regenerate {
		return &ae
	}
	what := "message"
	if in.Edit != 0 {
		what = "edit"
	}
	cause := sentenceOf(ae.msg)
	if ae.code == "disk_full" {
		cause = "The disk is full, so the chat history cannot store an answer."
	}
	if uerr := st.Truncate(ctx, id, turn.Question.ID); uerr != nil {
		s.log.Warn("take back a message whose answer could not start", "conversation", id, "message", turn.Question.ID, "err", uerr)
		ae.msg = fmt.Sprintf("%s Your %s is stored in the chat but has no answer: press Answer under it to try again.", cause, what)
		return &ae
	}
	ae.msg = fmt.Sprintf("%s Your %s was not sent.", cause, what)
	if ae.code == "disk_full" {
		ae.msg += " Free some space, then send it again."
	}
	return &ae
}

// sentenceOf ends s with a full stop unless it ends a sentence already.
func sentenceOf(s string) string {
	s = strings.TrimSpace(s)
	if s == "" || strings.HasSuffix(s, ".") || strings.HasSuffix(s, "!") || strings.HasSuffix(s, "?") {
		return s
	}
	return s + "."
}

// turn stores what the request asks for (a new message, an edit, or
// nothing for a regenerate) and returns the question to answer; every
// earlier version stays in the history.
func (s *Server) turn(ctx context.Context, st *history.Store, id int64, in sendIn) (*history.Turn, error) {
	var t *history.Turn
	var err error
	switch {
	case in.Regenerate:
		if in.Content != "" || in.Edit != 0 {
			return nil, badRequest("regenerate", "regenerate takes no content or edit")
		}
		t, err = st.Regenerate(ctx, id)
	case in.Edit != 0:
		if strings.TrimSpace(in.Content) == "" {
			return nil, badRequest("content", "the edited message is empty")
		}
		t, err = st.Edit(ctx, id, in.Edit, in.Content)
		if errors.Is(err, history.ErrNotFound) {
			return nil, &apiError{http.StatusNotFound, "not_found", fmt.Sprintf("conversation %d has no user message %d to edit", id, in.Edit), "edit"}
		}
	default:
		t, err = st.Ask(ctx, id, in.Content)
	}
	if err != nil {
		if errors.Is(err, history.ErrInvalid) && in.Regenerate {
			return nil, badRequest("regenerate", "%s", strings.TrimPrefix(err.Error(), "invalid: "))
		}
		return nil, historyError(err)
	}
	return t, nil
}

// selectIn is the body of PUT /api/conversations/{id}/current.
type selectIn struct {
	// MessageID is the version to show: the chat then shows the path
	// through it and the newest messages after it.
	MessageID int64 `json:"message_id"`
}

// selectVersion is PUT /api/conversations/{id}/current: it shows another
// version of a message (‹ 2/3 › under it) and answers with the
// conversation as GET /api/conversations/{id} does.
func (s *Server) selectVersion(w http.ResponseWriter, r *http.Request) {
	st, id, ok := s.storeAndID(w, r)
	if !ok {
		return
	}
	var in selectIn
	if err := s.decode(w, r, maxSmallBody, &in); err != nil {
		s.fail(w, r, err)
		return
	}
	writer := s.chats.begin(id)
	if writer == nil {
		s.fail(w, r, chatBusy(id))
		return
	}
	defer s.chats.end(id, writer)
	if in.MessageID <= 0 {
		s.fail(w, r, badRequest("message_id", "message_id must name a message of the conversation"))
		return
	}
	if err := st.Select(r.Context(), id, in.MessageID); err != nil {
		s.failHistory(w, r, err)
		return
	}
	e, err := st.Load(r.Context(), id)
	if err != nil {
		s.failHistory(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, e)
}

// ceilMillis is d in whole milliseconds, rounded up: a first token under
// a millisecond (a prompt from the KV cache on a small model) shows as
// 1 ms, not as 0, which the page reads as "not measured".
func ceilMillis(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Millisecond - 1) / time.Millisecond)
}

// answerStats are what the page shows under an answer.
func (s *Server) answerStats(a *answer) history.Stats {
	st := history.Stats{Model: a.Model, Engine: string(a.Backend), Fallback: a.Fallback, FinishReason: a.Result.FinishReason,
		PromptTokens: a.Result.PromptTokens, CompletionTokens: a.Result.CompletionTokens,
		TTFTMillis: ceilMillis(a.FirstToken), TokensPerSecond: a.TokensPerSecond(),
		CachedTokens: a.Result.CachedTokens, OmittedMessages: a.Result.OmittedMessages,
		DraftTokens: a.Result.DraftTokens, DraftAccepted: a.Result.DraftAccepted}
	if st.CompletionTokens == 0 {
		st.CompletionTokens = a.Pieces
	}
	if st.TokensPerSecond == 0 && a.Pieces > 1 {
		if d := a.Total - a.FirstToken; d > 0 {
			st.TokensPerSecond = float64(a.Pieces-1) / d.Seconds()
		}
	}
	if st.ContextLength = a.Result.ContextLength; st.ContextLength == 0 { // the chat's own, clamped, or the loaded one
		if info := s.mgr.Status().Info; info != nil {
			st.ContextLength = info.ContextLength
		}
	}
	return st
}

// conversationWriter writes a conversation answer as the events
// sendMessage documents.
type conversationWriter struct {
	out      *sse
	st       *history.Store
	keep     context.Context
	conv     int64
	ans      int64
	classify func(error) *apiError
	stats    history.Stats
	endErr   error // storing the finished answer failed
	dropped  bool  // the empty answer was removed
}

// store stores a piece's thinking (a reasoning model's <think> text,
// which the driver splits out) and its text, before piece sends them.
func (c *conversationWriter) store(a *answer, t backend.Token) error {
	if err := c.st.AppendThinking(c.keep, c.ans, t.Thinking); err != nil {
		return historyError(err)
	}
	if err := c.st.AppendText(c.keep, c.ans, t.Text); err != nil {
		return historyError(err)
	}
	return nil
}

func (c *conversationWriter) piece(a *answer, t backend.Token) error {
	if t.Thinking != "" {
		if err := c.out.event("thinking", map[string]string{"text": t.Thinking}); err != nil {
			return err
		}
	}
	if t.Text == "" {
		return nil
	}
	return c.out.event("token", map[string]string{"text": t.Text})
}

func (c *conversationWriter) finish(a *answer) error {
	if c.endErr != nil {
		return c.out.event("error", map[string]any{"message": historyError(c.endErr).Error(), "answer": nil})
	}
	done, err := c.st.Message(c.keep, c.ans)
	if err != nil {
		return c.out.event("error", map[string]any{"message": historyError(err).Error(), "answer": nil})
	}
	return c.out.event("done", done)
}

func (c *conversationWriter) fail(a *answer, ae *apiError) {
	msg := ae.msg
	if errors.Is(a.Err, history.ErrLocked) || errors.Is(a.Err, history.ErrClosed) {
		msg = historyError(a.Err).Error()
	}
	var cut *history.Message
	if !c.dropped {
		cut, _ = c.st.Message(c.keep, c.ans)
	}
	c.out.event("error", map[string]any{"message": msg, "answer": cut})
}

// chatCacheTag labels a chat's kept keys and values, so that they are
// deleted with it.
func chatCacheTag(id int64) string { return fmt.Sprintf("chat-%d", id) }

// chatRequest builds the generation request for a conversation: its
// system prompt, its messages and its settings over the defaults.
func (s *Server) chatRequest(conv *history.Conversation, msgs []history.Message, model string) (*backend.Request, error) {
	req := &backend.Request{Model: trimModel(model), Think: conv.Thinking, CacheTag: chatCacheTag(conv.ID)}
	if req.Model == "" {
		req.Model = s.mgr.Status().Model
	}
	if req.Model == "" {
		req.Model = config.DefaultModel
	}
	if conv.SystemPrompt != "" {
		req.Messages = append(req.Messages, backend.Message{Role: "system", Content: conv.SystemPrompt})
	}
	for _, m := range msgs {
		if m.Role == "assistant" && m.Content == "" {
			continue
		}
		req.Messages = append(req.Messages, backend.Message{Role: m.Role, Content: m.Content})
	}
	d := s.chatDefaults()
	temp, topP := conv.Temperature, conv.TopP
	if temp == nil {
		temp = d.Temperature
	}
	if topP == nil {
		topP = d.TopP
	}
	var err error
	req.Sampling, err = samplingParams{Temperature: temp, TopP: topP}.toSampling(nil)
	if err != nil {
		return nil, err
	}
	if conv.ContextLength != nil {
		req.ContextLength = *conv.ContextLength
	}
	switch {
	case conv.MaxTokens != nil:
		req.MaxTokens = *conv.MaxTokens
	case d.MaxTokens != nil:
		req.MaxTokens = *d.MaxTokens
	}
	return req, nil
}
