package backend

import (
	"errors"
	"strings"
	"testing"
)

// words counts a message as its words plus 2 markers; a prompt as the
// sum.
func words(m Message) int { return 2 + len(strings.Fields(m.Content)) }

func countWords(ms []Message) (int, error) {
	n := 0
	for _, m := range ms {
		n += words(m)
	}
	return n, nil
}

func chatOf(roles ...string) []Message {
	var ms []Message
	for i, r := range roles {
		ms = append(ms, Message{Role: r, Content: strings.Repeat("w ", 8) + string(rune('a'+i))})
	}
	return ms
}

func TestFitMessages(t *testing.T) {
	// every message is 11 "tokens"
	for _, c := range []struct {
		name    string
		msgs    []Message
		limit   int
		room    int
		omitted int
		err     string
	}{
		{"fits", chatOf("system", "user", "assistant", "user"), 45, 0, 0, ""},
		{"room counts", chatOf("system", "user", "assistant", "user"), 45, 2, 2, ""},
		{"whole turns from the oldest", chatOf("system", "user", "assistant", "user", "assistant", "user", "assistant", "user"), 50, 0, 4, ""},
		{"no system prompt", chatOf("user", "assistant", "user", "assistant", "user"), 30, 0, 4, ""},
		{"tool turns go whole", chatOf("system", "user", "assistant", "tool", "assistant", "user"), 30, 0, 4, ""},
		{"the last turn stays whole", chatOf("system", "user", "assistant", "user", "assistant", "tool"), 45, 0, 2, ""},
		{"room is dropped for the last turn", chatOf("system", "user", "assistant", "user"), 23, 10, 2, ""},
		{"the last message alone is too long", chatOf("system", "user", "assistant", "user"), 22, 0, 0, "the last message and the system prompt take 22 tokens (the system prompt 11 of them), more than the context holds (22 tokens)"},
		{"without a system prompt", chatOf("user"), 5, 0, 0, "the last message takes 11 tokens, more than the context holds (5 tokens)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			fit, err := FitMessages(c.msgs, c.limit, c.room, countWords, words)
			if c.err != "" {
				if !errors.Is(err, ErrPromptTooLong) || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("err = %v, want ErrPromptTooLong saying %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if fit.Omitted != c.omitted {
				t.Errorf("left out %d messages, want %d", fit.Omitted, c.omitted)
			}
			sys := 0
			if c.msgs[0].Role == "system" {
				sys = 1
				if fit.Messages[0].Content != c.msgs[0].Content {
					t.Error("the system prompt was left out")
				}
			}
			if len(fit.Messages) != len(c.msgs)-fit.Omitted || fit.Messages[sys].Content != c.msgs[sys+fit.Omitted].Content ||
				fit.Messages[len(fit.Messages)-1].Content != c.msgs[len(c.msgs)-1].Content {
				t.Errorf("kept %d messages, not the chat without its %d oldest after the system prompt", len(fit.Messages), fit.Omitted)
			}
			if n, _ := countWords(fit.Messages); n != fit.Tokens || n > c.limit {
				t.Errorf("Tokens %d, the kept messages count %d (limit %d)", fit.Tokens, n, c.limit)
			}
		})
	}
}

// TestFitMessagesCutIsStable: as a chat grows turn by turn past its
// context, the place where it is cut moves in steps of about a quarter
// of the context, not at every turn.
func TestFitMessagesCutIsStable(t *testing.T) {
	msgs := chatOf("system")
	moves, last := 0, -1
	for turn := range 60 {
		msgs = append(msgs, chatOf("user", "assistant")...)
		msgs[len(msgs)-1].Role = "assistant"
		ask := append(append([]Message(nil), msgs...), Message{Role: "user", Content: "q"})
		fit, err := FitMessages(ask, 400, 50, countWords, words)
		if err != nil {
			t.Fatalf("turn %d: %v", turn, err)
		}
		if fit.Omitted != last && last >= 0 {
			moves++
		}
		last = fit.Omitted
	}
	// 60 turns of 22 tokens over a 400-token context: about 1,000 tokens
	// left out, in steps of 100 (a quarter): about 10 moves, not 45.
	if moves > 15 || last == 0 {
		t.Errorf("the cut moved %d times in 60 turns (now %d left out)", moves, last)
	}
}
