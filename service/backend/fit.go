package backend

import "fmt"

// Fit is how a chat was fitted into a model's context.
type Fit struct {
	// Messages are the messages to render: the chat, or the chat without
	// its oldest turns.
	Messages []Message
	// Omitted is how many messages were left out (the oldest after the
	// system prompt).
	Omitted int
	// Tokens is the rendered prompt's length.
	Tokens int
}

// ContextFor is the context req may use in a backend whose loaded
// context is loaded tokens: req.ContextLength when it is set and
// smaller, else loaded (a longer one is clamped: the keys and values of
// more tokens than the model was loaded with have no room). loaded <= 0
// (unknown) gives req.ContextLength.
func ContextFor(req *Request, loaded int) int {
	if req.ContextLength > 0 && (loaded <= 0 || req.ContextLength < loaded) {
		return req.ContextLength
	}
	return loaded
}

// AnswerRoom is the room FitMessages keeps for a request's answer in a
// context of limit tokens: its max tokens, else an eighth of the context.
func AnswerRoom(req *Request, limit int) int {
	if req.MaxTokens > 0 {
		return req.MaxTokens
	}
	return limit / 8
}

// FitMessages leaves out the oldest turns of a chat that does not fit a
// context of limit tokens with room for an answer, as Ollama and LM
// Studio keep a long chat going: the system messages at its start and
// the turn of the last user message (that message and what follows it)
// are always kept; whole turns (a user message and the answers and tool
// results after it) are left out from the oldest. count renders
// messages and returns the prompt's length in tokens; size estimates one
// message's tokens (its text alone) for choosing where to cut.
//
// room is the tokens kept free for the answer (at most half the context).
// The cut is stable: it is the first turn boundary past a multiple of a
// quarter of the context of left-out text, the smallest multiple that
// fits; so as the chat grows it stays at the same place for about a
// quarter of a context, and the prompt keeps its prefix (and the KV
// cache its use) between turns instead of moving every turn.
//
// When even the system prompt and the last turn do not fit the context
// (without the room, with one token for an answer), the error wraps ErrPromptTooLong and names the
// sizes; nothing has been computed.
func FitMessages(msgs []Message, limit, room int, count func([]Message) (int, error), size func(Message) int) (Fit, error) {
	room = min(max(room, 1), max(limit/2, 1)) // at least one token for the answer
	n, err := count(msgs)
	if err != nil {
		return Fit{}, err
	}
	if n+room <= limit {
		return Fit{Messages: msgs, Tokens: n}, nil
	}
	sys := 0
	for sys < len(msgs) && msgs[sys].Role == "system" {
		sys++
	}
	last := len(msgs) - 1 // the last user message starts the turn that stays
	for last > sys && msgs[last].Role != "user" {
		last--
	}
	// turn boundaries after the system prompt, with the text left out
	// before each
	type cut struct{ at, dropped int }
	var cuts []cut
	dropped := 0
	for i := sys; i < last; i++ {
		dropped += size(msgs[i])
		if msgs[i+1].Role == "user" {
			cuts = append(cuts, cut{i + 1, dropped})
		}
	}
	if len(cuts) == 0 || cuts[len(cuts)-1].at != last {
		cuts = append(cuts, cut{last, dropped})
	}
	without := func(at int) []Message {
		out := make([]Message, 0, sys+len(msgs)-at)
		out = append(out, msgs[:sys]...)
		return append(out, msgs[at:]...)
	}
	step := max(limit/4, 1)
	tried := -1
	for k := 1; ; k++ {
		// the first boundary past k quarters of left-out text
		i := 0
		for i < len(cuts)-1 && cuts[i].dropped < k*step {
			i++
		}
		if i == tried {
			if i == len(cuts)-1 {
				break
			}
			continue
		}
		tried = i
		kept := without(cuts[i].at)
		n, err := count(kept)
		if err != nil {
			return Fit{}, err
		}
		if n+room <= limit || (i == len(cuts)-1 && n < limit) {
			return Fit{Messages: kept, Omitted: cuts[i].at - sys, Tokens: n}, nil
		}
		if i == len(cuts)-1 {
			sysTokens := 0
			if sys > 0 {
				if sysTokens, err = count(msgs[:sys]); err != nil {
					return Fit{}, err
				}
			}
			what := "the last message"
			if len(msgs)-last > 1 {
				what = fmt.Sprintf("the last %d messages", len(msgs)-last)
			}
			if sys > 0 {
				return Fit{}, fmt.Errorf("%s and the system prompt take %d tokens (the system prompt %d of them), more than the context holds (%d tokens): shorten them, or raise the context length: %w",
					what, n, sysTokens, limit, ErrPromptTooLong)
			}
			return Fit{}, fmt.Errorf("%s takes %d tokens, more than the context holds (%d tokens): shorten it, or raise the context length: %w",
				what, n, limit, ErrPromptTooLong)
		}
	}
	return Fit{}, fmt.Errorf("%d prompt tokens, the context holds %d: %w", n, limit, ErrPromptTooLong)
}
