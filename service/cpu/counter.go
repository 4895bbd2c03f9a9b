package cpu

import (
	"fmt"

	"github.com/npuchat/npuchat/engine/chat"
	"github.com/npuchat/npuchat/engine/tokenizer"
	"github.com/npuchat/npuchat/service/backend"
)

// PromptCounter reads the tokenizer and chat template of the model in
// folder dir (tokenizer.json, tokenizer_config.json, the template) and
// returns what counts a chat's prompt in that model's tokens, rendered
// as this engine renders it: for a backend that runs the model elsewhere
// (FastFlowLM on the NPU reads the same files) to fit a long chat into
// its context without loading the weights.
func PromptCounter(dir string) (func([]backend.Message) (int, error), error) {
	tok, err := tokenizer.Load(dir)
	if err != nil {
		return nil, fmt.Errorf("count tokens for %s: tokenizer: %w", dir, err)
	}
	cfg, err := tokenizer.LoadConfig(dir, tok)
	if err != nil {
		return nil, fmt.Errorf("count tokens for %s: %w", dir, err)
	}
	tmpl, err := chat.LoadTemplate(dir)
	if err != nil {
		return nil, fmt.Errorf("count tokens for %s: chat template: %w", dir, err)
	}
	opts := chat.RenderOptions{AddGenerationPrompt: true, BOSToken: cfg.BOSToken, EOSToken: cfg.EOSToken}
	return func(msgs []backend.Message) (int, error) {
		ids, err := tmpl.EncodeMessages(tok, cfg, chatMessages(msgs), opts)
		if err != nil {
			return 0, fmt.Errorf("chat template: %v: %w", err, backend.ErrBadRequest)
		}
		return len(ids), nil
	}, nil
}
