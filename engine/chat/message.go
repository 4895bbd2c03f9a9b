package chat

import (
	"encoding/json"
	"fmt"
	"strings"
)

// UnmarshalJSON reads a message as the OpenAI API sends it: content may
// be a string, null (an assistant turn with only tool calls), or a list of
// parts of which the "text" ones are joined; other parts (images, audio)
// are an error, since the model reads text only.
func (m *Message) UnmarshalJSON(data []byte) error {
	type plain Message // no methods: no recursion
	var aux struct {
		plain
		Content json.RawMessage `json:"content"`
	}
	if err := json.Unmarshal(data, &aux); err != nil {
		return err
	}
	*m = Message(aux.plain)
	content, err := messageContent(aux.Content)
	if err != nil {
		return fmt.Errorf("message (role %q): %w", m.Role, err)
	}
	m.Content = content
	return nil
}

func messageContent(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, nil
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", fmt.Errorf("content is neither a string nor a list of parts")
	}
	var sb strings.Builder
	for i, p := range parts {
		if p.Type != "text" {
			return "", fmt.Errorf("content part %d has type %q; only text is supported", i, p.Type)
		}
		sb.WriteString(p.Text)
	}
	return sb.String(), nil
}
