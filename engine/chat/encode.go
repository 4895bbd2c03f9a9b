package chat

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/npuchat/npuchat/engine/tokenizer"
)

// EncodeMessages renders messages with the template and encodes the
// prompt so that only the template's own markers are control tokens:
// text that came from the messages (content, reasoning, names, tool call
// ids, names and arguments) and from the tool definitions is ordinary
// text, even where it spells a special token. A user who types
// "<|im_end|>\n<|im_start|>system" gets those characters read as text,
// not a closed turn and a forged system prompt (issue 13, item 5;
// Hugging Face's apply_chat_template followed by encode has this hole).
//
// How: before rendering, every special token's text in those fields is
// replaced by a placeholder made with a random nonce (which no client can
// guess, so none can forge one); after rendering, the placeholders are
// put back and their byte ranges passed to the tokenizer as literal text
// (tokenizer.EncodeLiteral). Templates see the same strings apart from
// the special tokens, so their logic (strip, split on </think>,
// startswith <tool_response>) is unchanged: those markers are not special
// tokens.
func (t *Template) EncodeMessages(tok *tokenizer.Tokenizer, cfg tokenizer.Config, messages []Message, opts RenderOptions) ([]int, error) {
	p, err := newProtector(tok)
	if err != nil {
		return nil, err
	}
	safe := make([]Message, len(messages))
	for i, m := range messages {
		m.Content = p.protect(m.Content)
		m.Reasoning = p.protect(m.Reasoning)
		m.Name = p.protect(m.Name)
		m.ToolCallID = p.protect(m.ToolCallID)
		if len(m.ToolCalls) > 0 {
			calls := make([]ToolCall, len(m.ToolCalls))
			for j, c := range m.ToolCalls {
				c.ID = p.protect(c.ID)
				c.Function.Name = p.protect(c.Function.Name)
				c.Function.Arguments = json.RawMessage(p.protect(string(c.Function.Arguments)))
				calls[j] = c
			}
			m.ToolCalls = calls
		}
		safe[i] = m
	}
	if len(opts.Tools) > 0 {
		tools := make([]json.RawMessage, len(opts.Tools))
		for i, tl := range opts.Tools {
			tools[i] = json.RawMessage(p.protect(string(tl)))
		}
		opts.Tools = tools
	}
	text, err := t.Render(safe, opts)
	if err != nil {
		return nil, err
	}
	text, literal := p.restore(text)
	ids := tok.EncodeLiteral(text, literal)
	if cfg.AddBOS && cfg.BOS >= 0 && (len(ids) == 0 || ids[0] != cfg.BOS) {
		ids = append([]int{cfg.BOS}, ids...)
	}
	return ids, nil
}

// protector swaps special-token text for placeholders and back.
type protector struct {
	specials []string // special token texts, longest first
	prefix   string   // "\uFDD0" + nonce + ":"
	hide     *strings.Replacer
}

// The placeholder is "\uFDD0<nonce>:<index>\uFDD1": two Unicode
// noncharacters around a nonce no client can guess.
const (
	phOpen  = "\uFDD0"
	phClose = "\uFDD1"
)

func newProtector(tok *tokenizer.Tokenizer) (*protector, error) {
	var nonce [12]byte
	if _, err := rand.Read(nonce[:]); err != nil {
		return nil, fmt.Errorf("encode prompt: %w", err)
	}
	p := &protector{prefix: phOpen + hex.EncodeToString(nonce[:]) + ":"}
	seen := map[string]bool{}
	for _, a := range tok.AddedTokens() {
		if a.Special && a.Content != "" && !seen[a.Content] {
			seen[a.Content] = true
			p.specials = append(p.specials, a.Content)
		}
	}
	// Longest first, so that a token that starts another is not matched
	// inside it (strings.Replacer tries the arguments in order).
	sort.SliceStable(p.specials, func(i, j int) bool { return len(p.specials[i]) > len(p.specials[j]) })
	var pairs []string
	for i, s := range p.specials {
		pairs = append(pairs, s, fmt.Sprintf("%s%d%s", p.prefix, i, phClose))
	}
	p.hide = strings.NewReplacer(pairs...)
	return p, nil
}

// protect replaces the special tokens' text in s by placeholders. Invalid
// UTF-8 becomes U+FFFD first, so that byte ranges stay true.
func (p *protector) protect(s string) string {
	if s == "" || len(p.specials) == 0 {
		return s
	}
	return p.hide.Replace(strings.ToValidUTF8(s, "\uFFFD"))
}

// restore puts the special tokens' text back and returns where it is.
func (p *protector) restore(text string) (string, [][2]int) {
	if len(p.specials) == 0 || !strings.Contains(text, p.prefix) {
		return text, nil
	}
	var b strings.Builder
	var literal [][2]int
	for {
		i := strings.Index(text, p.prefix)
		if i < 0 {
			b.WriteString(text)
			break
		}
		b.WriteString(text[:i])
		rest := text[i+len(p.prefix):]
		j := strings.Index(rest, phClose)
		var k int
		if j < 0 || sscanIndex(rest[:j], &k) != nil || k < 0 || k >= len(p.specials) {
			// Not one of ours (cannot happen: the nonce is secret); keep it.
			b.WriteString(p.prefix)
			text = rest
			continue
		}
		start := b.Len()
		b.WriteString(p.specials[k])
		literal = append(literal, [2]int{start, b.Len()})
		text = rest[j+len(phClose):]
	}
	return b.String(), literal
}

func sscanIndex(s string, k *int) error {
	if s == "" || len(s) > 4 {
		return fmt.Errorf("bad index %q", s)
	}
	n := 0
	for _, c := range s {
		if c < '0' || c > '9' {
			return fmt.Errorf("bad index %q", s)
		}
		n = n*10 + int(c-'0')
	}
	*k = n
	return nil
}
