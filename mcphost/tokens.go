package mcphost

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/npuchat/npuchat/safefile"
)

// TokenFileName is the file beside the settings file that holds the URL
// servers' bearer tokens, as a JSON object from server name to token,
// readable by this user only (0600), kept out of settings.json so that
// the settings file can be shown, shared or kept with dotfiles without
// them (as the Hugging Face token is kept in hf_token).
const TokenFileName = "mcp_tokens.json"

// TokenPath is the token file for a settings file.
func TokenPath(settingsPath string) string {
	return filepath.Join(filepath.Dir(settingsPath), TokenFileName)
}

// maxTokenFileBytes bounds the token file.
const maxTokenFileBytes = 1 << 20

// ReadTokens reads the token file at path; none is no tokens.
func ReadTokens(path string) (map[string]Secret, error) {
	fi, err := os.Stat(path)
	if errors.Is(err, os.ErrNotExist) {
		return map[string]Secret{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the MCP token file: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("read the MCP token file: %s is not a regular file (%s); delete it and set the tokens again in Settings", path, fi.Mode().Type())
	}
	if fi.Size() > maxTokenFileBytes {
		return nil, fmt.Errorf("read the MCP token file: %s is %d bytes, more than a token file can be (%d); delete it and set the tokens again in Settings", path, fi.Size(), maxTokenFileBytes)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read the MCP token file: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxTokenFileBytes))
	if err != nil {
		return nil, fmt.Errorf("read the MCP token file: %w", err)
	}
	var raw map[string]string
	if err := json.Unmarshal(b, &raw); err != nil {
		// The error of encoding/json can quote the file's bytes: say where
		// the problem is, never what is there.
		return nil, fmt.Errorf("read the MCP token file: %s is not a JSON object of server names and tokens; fix or delete it", path)
	}
	tokens := make(map[string]Secret, len(raw))
	for name, tok := range raw {
		tokens[name] = Secret(strings.TrimSpace(tok))
	}
	return tokens, nil
}

// WriteTokens replaces the token file at path with tokens (empty ones
// left out), atomically and readable by this user only (0600), or
// removes it when there are none.
func WriteTokens(path string, tokens map[string]Secret) error {
	raw := map[string]string{}
	for name, tok := range tokens {
		if tok != "" {
			raw[name] = tok.Reveal()
		}
	}
	if len(raw) == 0 {
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("remove the MCP token file: %w", err)
		}
		return nil
	}
	b, err := json.MarshalIndent(raw, "", "  ")
	if err != nil {
		return fmt.Errorf("save the MCP tokens: %w", err)
	}
	if err := safefile.WriteAtomic(path, append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("save the MCP tokens: %w", err)
	}
	return nil
}

// WithTokens returns a copy of servers with each URL server's Token taken
// from tokens by name (what ReadTokens gave).
func WithTokens(servers []Server, tokens map[string]Secret) []Server {
	out := make([]Server, len(servers))
	for i, s := range servers {
		s = s.clone()
		s.Token = ""
		if !s.Stdio() {
			s.Token = tokens[s.Name]
		}
		out[i] = s
	}
	return out
}

// Tokens is the token file's content for servers: each URL server's
// token by name (for WriteTokens after a change in Settings).
func Tokens(servers []Server) map[string]Secret {
	tokens := map[string]Secret{}
	for _, s := range servers {
		if !s.Stdio() && s.Token != "" {
			tokens[s.Name] = s.Token
		}
	}
	return tokens
}
