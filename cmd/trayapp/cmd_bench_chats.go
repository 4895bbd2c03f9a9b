package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/npuchat/npuchat/engine"
	"github.com/npuchat/npuchat/engine/sample"
)

// chatsResult is `npuchat bench --chats N`: N chats of --chat-tokens
// tokens visited in turn twice through one session of one KV cache, as
// the CPU backend serves them. The first round computes each chat and
// answers it; the second comes back to each with its answer and a new
// message, and should compute only that message.
type chatsResult struct {
	Model        string       `json:"model"`
	Threads      int          `json:"threads"`
	SIMD         string       `json:"simd"`
	KVType       string       `json:"kv_type"`
	Chats        int          `json:"chats"`
	ChatTokens   int          `json:"chat_tokens"`
	AnswerTokens int          `json:"answer_tokens"`
	NewTokens    int          `json:"new_tokens"`
	KVBudget     int64        `json:"kv_budget"`
	Visits       []chatsVisit `json:"visits"`
}

// chatsVisit is one visit to one chat.
type chatsVisit struct {
	Round             int     `json:"round"` // 1 or 2
	Chat              int     `json:"chat"`  // 0..Chats-1
	PromptTokens      int     `json:"prompt_tokens"`
	CachedTokens      int     `json:"cached_tokens"`    // taken from the KV cache
	PrefilledTokens   int     `json:"prefilled_tokens"` // computed before the first token
	FirstTokenSeconds float64 `json:"first_token_s"`
}

// benchChats runs the visits: round 1 prefills chat i (chatTokens
// tokens, each chat its own from the first token) and decodes
// answerTokens greedily; round 2 prompts chat i, its answer and
// newTokens more. The KV budget holds every chat with room to spare, so
// nothing is evicted: the second round's prefill is what the cache did
// not hold.
func benchChats(ctx context.Context, path string, opts engine.LoadOptions, chats, chatTokens, answerTokens, newTokens int) (*chatsResult, error) {
	m, err := engine.Load(path, opts)
	if err != nil {
		return nil, err
	}
	defer m.Close()
	cfg := m.Config()
	longest := chatTokens + answerTokens + newTokens + 1
	budget := m.KVBytes(longest+512) * int64(chats+1)
	res := &chatsResult{Model: path, Threads: m.Threads(), SIMD: m.SIMD(), KVType: m.KVType(), Chats: chats, ChatTokens: chatTokens,
		AnswerTokens: answerTokens, NewTokens: newTokens, KVBudget: budget}
	c := m.NewKVCache(engine.KVCacheOptions{Budget: budget})
	s := c.NewSession(longest + 64)
	if s.MaxContext() < longest {
		return nil, fmt.Errorf("a chat of %d tokens does not fit the model's context (%d)", longest, s.MaxContext())
	}
	prompts := make([][]int, chats)
	for i := range prompts {
		p := make([]int, chatTokens)
		for j := range p {
			p[j] = (j*7919 + i*104729 + 13) % cfg.VocabSize
		}
		prompts[i] = p
	}
	for round := 1; round <= 2; round++ {
		for i, prompt := range prompts {
			start := time.Now()
			n, err := s.Resume("", prompt)
			if err != nil {
				return nil, err
			}
			logits, err := s.PrefillContext(ctx, prompt[n:])
			if err != nil {
				return nil, err
			}
			next := sample.Argmax(logits)
			res.Visits = append(res.Visits, chatsVisit{Round: round, Chat: i, PromptTokens: len(prompt), CachedTokens: n,
				PrefilledTokens: len(prompt) - n, FirstTokenSeconds: time.Since(start).Seconds()})
			// the answer, kept with the chat as the backend keeps it
			answer := []int{next}
			for len(answer) < answerTokens {
				logits, err := s.Forward(answer[len(answer)-1])
				if err != nil {
					return nil, err
				}
				answer = append(answer, sample.Argmax(logits))
			}
			if _, err := s.Forward(answer[len(answer)-1]); err != nil {
				return nil, err
			}
			s.Keep()
			// the next visit: the chat, its answer and a new message
			more := make([]int, newTokens)
			for j := range more {
				more[j] = (j*31 + i*7 + round*1009 + 1) % cfg.VocabSize
			}
			prompts[i] = append(append(append([]int(nil), prompt...), answer...), more...)
		}
	}
	return res, nil
}

// printChats writes the visits as a table.
func printChats(w io.Writer, r *chatsResult) {
	fmt.Fprintf(w, "model    %s\nthreads  %d, SIMD %s, KV %s (budget %.0f MB)\nchats    %d of %d tokens, answers of %d, then %d new tokens each\n",
		r.Model, r.Threads, r.SIMD, r.KVType, float64(r.KVBudget)/(1<<20), r.Chats, r.ChatTokens, r.AnswerTokens, r.NewTokens)
	fmt.Fprintf(w, "%-6s %-5s %8s %8s %10s %14s\n", "round", "chat", "prompt", "cached", "prefilled", "first token s")
	for _, v := range r.Visits {
		fmt.Fprintf(w, "%-6d %-5d %8d %8d %10d %14.3f\n", v.Round, v.Chat, v.PromptTokens, v.CachedTokens, v.PrefilledTokens, v.FirstTokenSeconds)
	}
}
