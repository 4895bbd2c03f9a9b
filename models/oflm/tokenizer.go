package oflm

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/npuchat/npuchat/jsonedit"
)

// oflm's tokenizer setup (automodel.cpp, AutoModel::_shared_setup_tokenizer)
// exits unless tokenizer_config.json has a string eos_token and a list
// eos_token_id, and wants an integer bos_token_id whenever bos_token is
// set. Generation stops only at an id in eos_token_id (stop strings are
// not read), so the list must hold the chat turn's end (<|im_end|>,
// 130073 for MiniCPM5) as well as the model's own EOS (config.json's
// eos_token_id, 1): [1, 130073].

// tokenIDs reads the special tokens of a tokenizer.json (added_tokens,
// then the model's vocabulary when it is a map).
func tokenIDs(path string) (map[string]int, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var t struct {
		Added []struct {
			ID      int    `json:"id"`
			Content string `json:"content"`
		} `json:"added_tokens"`
		Model struct {
			Vocab json.RawMessage `json:"vocab"`
		} `json:"model"`
	}
	if err := json.Unmarshal(raw, &t); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	ids := map[string]int{}
	var vocab map[string]int
	if json.Unmarshal(t.Model.Vocab, &vocab) == nil {
		for k, v := range vocab {
			ids[k] = v
		}
	}
	for _, a := range t.Added {
		ids[a.Content] = a.ID
	}
	return ids, nil
}

// tokenText reads a special token field: a string, or an object with a
// "content" string (Hugging Face's AddedToken form). "" when absent or
// null.
func tokenText(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var o struct {
		Content *string `json:"content"`
	}
	if json.Unmarshal(raw, &o) == nil && o.Content != nil {
		return *o.Content, nil
	}
	return "", fmt.Errorf("%s is neither a string nor a token object", raw)
}

// tokenizerConfig returns the output's tokenizer_config.json: the source
// file with eos_token a plain string, eos_token_id the list of every end
// id the source names (its own list, config.json's eos_token_id, and the
// id of eos_token itself), and bos_token_id the id of bos_token when
// that is set. Every other key is kept as it was.
func tokenizerConfig(srcDir string, configEOS []int) ([]byte, error) {
	path := filepath.Join(srcDir, "tokenizer_config.json")
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	o, err := jsonedit.ParseObject(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	ids, err := tokenIDs(filepath.Join(srcDir, "tokenizer.json"))
	if err != nil {
		return nil, err
	}
	field := func(k string) json.RawMessage { v, _ := o.Get(k); return v }

	eos, err := tokenText(field("eos_token"))
	if err != nil {
		return nil, fmt.Errorf("%s: eos_token: %w", path, err)
	}
	if eos == "" {
		return nil, fmt.Errorf("%s has no eos_token: oflm needs one (a string)", path)
	}
	eosID, ok := ids[eos]
	if !ok {
		return nil, fmt.Errorf("%s: eos_token %q is not a token of tokenizer.json", path, eos)
	}
	listed, err := intOrList(field("eos_token_id"))
	if err != nil {
		return nil, fmt.Errorf("%s: eos_token_id: %w", path, err)
	}
	var eosIDs []int
	for _, id := range slices.Concat(listed, configEOS, []int{eosID}) {
		if !slices.Contains(eosIDs, id) {
			eosIDs = append(eosIDs, id)
		}
	}
	if err := o.SetValue("eos_token", eos); err != nil {
		return nil, err
	}
	if err := o.SetValue("eos_token_id", eosIDs); err != nil {
		return nil, err
	}

	bos, err := tokenText(field("bos_token"))
	if err != nil {
		return nil, fmt.Errorf("%s: bos_token: %w", path, err)
	}
	if bos != "" {
		id, ok := ids[bos]
		if !ok {
			return nil, fmt.Errorf("%s: bos_token %q is not a token of tokenizer.json", path, bos)
		}
		if err := o.SetValue("bos_token", bos); err != nil {
			return nil, err
		}
		if err := o.SetValue("bos_token_id", id); err != nil {
			return nil, err
		}
	}
	return o.Format(jsonedit.DetectIndent(raw)), nil
}

// hasChatTemplate reports whether oflm will find a chat template: a
// chat_template.jinja beside the config, or tokenizer_config.json's
// chat_template (it exits with neither).
func hasChatTemplate(srcDir string, tokenizerConfig []byte) bool {
	if _, err := os.Stat(filepath.Join(srcDir, "chat_template.jinja")); err == nil {
		return true
	}
	var t struct {
		Template json.RawMessage `json:"chat_template"`
	}
	return json.Unmarshal(tokenizerConfig, &t) == nil && len(t.Template) > 0 && string(t.Template) != "null"
}
