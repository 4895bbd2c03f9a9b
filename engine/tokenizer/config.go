package tokenizer

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
)

// Config is what a model folder says about its special tokens and prompt
// format, read by [LoadConfig] from tokenizer_config.json, config.json and
// generation_config.json. Ids are -1 when absent.
type Config struct {
	BOS int   // beginning of sequence (MiniCPM5: 0, <|im_start|>)
	EOS []int // every id that ends generation (MiniCPM5: 1 and 130073)
	Pad int
	Unk int
	// BOSToken and EOSToken are the tokens' text, for chat templates that
	// use bos_token and eos_token ("" when absent).
	BOSToken, EOSToken string
	// AddBOS and AddEOS say whether encoding a prompt adds BOS in front or
	// EOS behind (add_bos_token / add_eos_token; false for Qwen2Tokenizer).
	AddBOS, AddEOS bool
	// ChatTemplate is the Jinja chat template ("" when the model has none).
	ChatTemplate string
}

// IsEOS reports whether id ends generation.
func (c Config) IsEOS(id int) bool { return containsInt(c.EOS, id) }

// LoadConfig reads the special tokens and chat template in a model folder.
// tokenizer_config.json is required: its bos/eos/pad/unk tokens (text,
// resolved with tok) and any bos_token_id, eos_token_id (an integer or a
// list) and pad_token_id it has; config.json and generation_config.json
// add their ids when present. The EOS set is the union of all; BOS and pad
// come from the first source that names them.
func LoadConfig(dir string, tok *Tokenizer) (Config, error) {
	c := Config{BOS: -1, Pad: -1, Unk: -1}
	data, err := readConfigFile(filepath.Join(dir, "tokenizer_config.json"))
	if err != nil {
		return c, fmt.Errorf("load tokenizer config: %w", err)
	}
	if err := c.parseTokenizerConfig(data, tok); err != nil {
		return c, fmt.Errorf("load tokenizer config %s: %w", filepath.Join(dir, "tokenizer_config.json"), err)
	}
	// Some files (MiniCPM5's, fixed for FastFlowLM) also give the ids.
	if err := c.parseModelConfig(data); err != nil {
		return c, fmt.Errorf("load tokenizer config %s: %w", filepath.Join(dir, "tokenizer_config.json"), err)
	}
	for _, name := range []string{"config.json", "generation_config.json"} {
		data, err := readConfigFile(filepath.Join(dir, name))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return c, fmt.Errorf("load tokenizer config: %w", err)
		}
		if err := c.parseModelConfig(data); err != nil {
			return c, fmt.Errorf("load tokenizer config %s: %w", filepath.Join(dir, name), err)
		}
	}
	if c.ChatTemplate, err = ChatTemplateSource(dir); err != nil {
		return c, err
	}
	return c, nil
}

// ChatTemplateSource returns a model folder's chat template:
// chat_template.jinja when present, else tokenizer_config.json's
// chat_template (a string, or a list of {name, template} of which
// "default" is taken). It returns "" when the model has none.
func ChatTemplateSource(dir string) (string, error) {
	data, err := readConfigFile(filepath.Join(dir, "chat_template.jinja"))
	if err == nil {
		return string(data), nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("read chat template: %w", err)
	}
	data, err = readConfigFile(filepath.Join(dir, "tokenizer_config.json"))
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read chat template: %w", err)
	}
	var j struct {
		ChatTemplate json.RawMessage `json:"chat_template"`
	}
	if err := json.Unmarshal(data, &j); err != nil {
		return "", fmt.Errorf("read chat template: %s: %w", filepath.Join(dir, "tokenizer_config.json"), err)
	}
	src, err := chatTemplateField(j.ChatTemplate)
	if err != nil {
		return "", fmt.Errorf("read chat template: %s: %w", filepath.Join(dir, "tokenizer_config.json"), err)
	}
	return src, nil
}

func chatTemplateField(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, nil
	}
	var named []struct {
		Name     string `json:"name"`
		Template string `json:"template"`
	}
	if err := json.Unmarshal(raw, &named); err != nil {
		return "", errors.New("chat_template is neither a string nor a list of {name, template}")
	}
	for _, n := range named {
		if n.Name == "default" {
			return n.Template, nil
		}
	}
	return "", errors.New("chat_template lists templates but none is named \"default\"")
}

func (c *Config) parseTokenizerConfig(data []byte, tok *Tokenizer) error {
	var j struct {
		BOS    json.RawMessage `json:"bos_token"`
		EOS    json.RawMessage `json:"eos_token"`
		Pad    json.RawMessage `json:"pad_token"`
		Unk    json.RawMessage `json:"unk_token"`
		AddBOS *bool           `json:"add_bos_token"`
		AddEOS *bool           `json:"add_eos_token"`
	}
	if err := json.Unmarshal(data, &j); err != nil {
		return err
	}
	var err error
	resolve := func(field string, raw json.RawMessage) (string, int) {
		if err != nil {
			return "", -1
		}
		var text string
		text, err = tokenText(raw)
		if err != nil {
			err = fmt.Errorf("%s: %w", field, err)
			return "", -1
		}
		if text == "" {
			return "", -1
		}
		id, ok := tok.ID(text)
		if !ok {
			err = fmt.Errorf("%s %q is not in the vocabulary", field, text)
			return "", -1
		}
		return text, id
	}
	c.BOSToken, c.BOS = resolve("bos_token", j.BOS)
	var eos int
	c.EOSToken, eos = resolve("eos_token", j.EOS)
	_, c.Pad = resolve("pad_token", j.Pad)
	_, c.Unk = resolve("unk_token", j.Unk)
	if err != nil {
		return err
	}
	if eos >= 0 {
		c.EOS = append(c.EOS, eos)
	}
	if j.AddBOS != nil {
		c.AddBOS = *j.AddBOS
	}
	if j.AddEOS != nil {
		c.AddEOS = *j.AddEOS
	}
	return nil
}

// tokenText reads a token given as "text", {"content": "text", ...} or null.
func tokenText(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, nil
	}
	var obj struct {
		Content *string `json:"content"`
	}
	if err := json.Unmarshal(raw, &obj); err != nil || obj.Content == nil {
		return "", fmt.Errorf("%s is neither a string nor an object with content", raw)
	}
	return *obj.Content, nil
}

// parseModelConfig adds the ids of config.json or generation_config.json.
func (c *Config) parseModelConfig(data []byte) error {
	var j struct {
		BOS json.RawMessage `json:"bos_token_id"`
		EOS json.RawMessage `json:"eos_token_id"`
		Pad json.RawMessage `json:"pad_token_id"`
	}
	if err := json.Unmarshal(data, &j); err != nil {
		return err
	}
	bos, err := idList("bos_token_id", j.BOS)
	if err != nil {
		return err
	}
	if len(bos) > 0 && c.BOS < 0 {
		c.BOS = bos[0]
	}
	eos, err := idList("eos_token_id", j.EOS)
	if err != nil {
		return err
	}
	for _, id := range eos {
		if !containsInt(c.EOS, id) {
			c.EOS = append(c.EOS, id)
		}
	}
	pad, err := idList("pad_token_id", j.Pad)
	if err != nil {
		return err
	}
	if len(pad) > 0 && c.Pad < 0 {
		c.Pad = pad[0]
	}
	return nil
}

// idList reads an id given as a number, a list of numbers, or null.
func idList(field string, raw json.RawMessage) ([]int, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var one int
	if err := json.Unmarshal(raw, &one); err == nil {
		return []int{one}, nil
	}
	var many []int
	if err := json.Unmarshal(raw, &many); err != nil {
		return nil, fmt.Errorf("%s %s is neither an integer nor a list of integers", field, raw)
	}
	return many, nil
}
