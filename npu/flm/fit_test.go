//go:build linux

package flm

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/npuchat/npuchat/engine/testmodel"
	"github.com/npuchat/npuchat/service/backend"
	"github.com/npuchat/npuchat/service/cpu"
)

// TestLongChatFitsFLM: on the NPU engine a chat longer than FLM's
// context is sent without its oldest turns, counted with the model's own
// tokenizer (its folder's, as FLM reads it), and answered where FLM
// would refuse it whole; a request's own smaller context leaves out more;
// a last message that alone does not fit is refused with the sizes
// before FLM hears of it.
func TestLongChatFitsFLM(t *testing.T) {
	w, err := testmodel.Random(7, testmodel.MiniCPM5Small())
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "MiniCPM5-2B-NPU2")
	if err := testmodel.WriteFLM(dir, w, testmodel.FLMOptions{ReplicateKV: 4, InjectUnitQKNorm: true}); err != nil {
		t.Fatal(err)
	}
	count, err := cpu.PromptCounter(dir)
	if err != nil {
		t.Fatal(err)
	}
	s := newSetup(t, "normal")
	s.opts.ContextLength, s.opts.Count = 512, count
	b := s.start(t)
	if got := b.Info().ContextLength; got != 512 {
		t.Fatalf("context %d, want 512", got)
	}

	req := &backend.Request{Messages: []backend.Message{{Role: "system", Content: "Be brief."}}, MaxTokens: 8}
	for i := range 20 {
		req.Messages = append(req.Messages,
			backend.Message{Role: "user", Content: fmt.Sprintf("question %d %s", i, strings.Repeat("about the cat and the dog ", 6))},
			backend.Message{Role: "assistant", Content: fmt.Sprintf("answer %d", i)})
	}
	req.Messages = append(req.Messages, backend.Message{Role: "user", Content: "the last one"})
	if n, _ := count(req.Messages); n < 1000 {
		t.Fatalf("the test chat is %d tokens: too short to need a cut", n)
	}
	text, res, err := generate(b, req)
	if err != nil {
		t.Fatalf("a long chat: %v\nlog:\n%s", err, s.log)
	}
	if text != "Fake FLM heard: the last one" || res.OmittedMessages == 0 || res.OmittedMessages%2 != 0 || res.ContextLength != 512 {
		t.Fatalf("a long chat: %q, %d left out, context %d", text, res.OmittedMessages, res.ContextLength)
	}
	kept := append(append([]backend.Message(nil), req.Messages[:1]...), req.Messages[1+res.OmittedMessages:]...)
	if n, _ := count(kept); n+8 > 512 {
		t.Errorf("sent %d tokens with room for 8 into 512", n)
	}

	small := *req
	small.ContextLength = 256
	_, res2, err := generate(b, &small)
	if err != nil || res2.OmittedMessages <= res.OmittedMessages || res2.ContextLength != 256 {
		t.Errorf("a context of 256: %v, %d left out (512: %d), context %d", err, res2.OmittedMessages, res.OmittedMessages, res2.ContextLength)
	}

	heard := strings.Count(s.log.String(), "Incoming request")
	big := &backend.Request{Messages: []backend.Message{{Role: "system", Content: "Be brief."}, {Role: "user", Content: strings.Repeat("word ", 600)}}}
	_, _, err = generate(b, big)
	if !errors.Is(err, backend.ErrPromptTooLong) || !strings.Contains(err.Error(), "more than the context holds (512 tokens)") || !strings.Contains(err.Error(), "the system prompt") {
		t.Errorf("a message larger than the context: %v", err)
	}
	if strings.Count(s.log.String(), "Incoming request") != heard {
		t.Error("FLM heard the message larger than the context")
	}
}
