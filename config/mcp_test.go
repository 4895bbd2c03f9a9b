package config

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/npuchat/npuchat/mcphost"
)

// TestMCPServersRoundTrip: servers saved through the store are in the
// settings file as docs/mcp.md's schema says, without the token, which
// is in the 0600 token file beside it; Load reads both back into the
// same servers; removing the last token removes the file, and removing
// the servers removes the key.
func TestMCPServersRoundTrip(t *testing.T) {
	s, path := newStore(t, "{\"engine\": \"cpu\", \"unknown_key\": 7}\n", Settings{Engine: "cpu"})
	dir := t.TempDir()
	const tok = "tok_secretsecretsecret4321"
	servers := []mcphost.Server{
		{Name: "files", Command: []string{os.Args[0], "-x", "a b"}, Env: map[string]string{"K": "v"}, Dir: dir, Enabled: true},
		{Name: "search", URL: "https://mcp.example.com/mcp", Token: " " + tok + "\n", Trusted: true},
	}
	if _, err := s.Update(context.Background(), func(c *Settings) error { c.MCPServers = servers; return nil }); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	file := string(b)
	for _, want := range []string{`"mcp_servers"`, `"name": "files"`, `"command"`, `"a b"`, `"env"`, `"dir"`, `"url": "https://mcp.example.com/mcp"`, `"trusted": true`, `"unknown_key": 7`} {
		if !strings.Contains(file, want) {
			t.Errorf("settings file lacks %s:\n%s", want, file)
		}
	}
	if strings.Contains(file, "secret") || strings.Contains(file, "token") {
		t.Errorf("the token is in settings.json:\n%s", file)
	}
	fi, err := os.Stat(mcphost.TokenPath(path))
	if err != nil {
		t.Fatal(err)
	}
	if runtime.GOOS != "windows" && fi.Mode().Perm() != 0o600 {
		t.Errorf("token file mode %v, want 0600", fi.Mode().Perm())
	}
	cfg, err := Load(MapEnv(map[string]string{"NPUCHAT_CONFIG": path, "HOME": t.TempDir()}), "linux")
	if err != nil {
		t.Fatal(err)
	}
	got := cfg.Settings.MCPServers
	if len(got) != 2 || got[0].Name != "files" || len(got[0].Command) != 3 || got[0].Command[2] != "a b" || got[0].Env["K"] != "v" || got[0].Dir != dir ||
		!got[0].Enabled || got[0].Trusted || got[0].Token != "" {
		t.Errorf("loaded program server %+v", got)
	}
	if len(got) == 2 && (got[1].URL != "https://mcp.example.com/mcp" || got[1].Token.Reveal() != tok || got[1].Enabled || !got[1].Trusted) {
		t.Errorf("loaded URL server %+v (token %s)", got[1], got[1].Token.Masked())
	}
	// Printed, the settings never show the token.
	if out := fmt.Sprintf("%v %+v %#v", cfg.Settings, cfg.Settings, cfg.Settings.MCPServers); strings.Contains(out, "secret") {
		t.Errorf("printed settings show the token: %s", out)
	}

	// A change of anything else keeps the token.
	if _, err := s.Update(context.Background(), func(c *Settings) error { c.MCPServers[1].Enabled = true; return nil }); err != nil {
		t.Fatal(err)
	}
	if toks, err := mcphost.ReadTokens(mcphost.TokenPath(path)); err != nil || toks["search"].Reveal() != tok {
		t.Errorf("after another change the token file holds %v (%v)", toks, err)
	}
	if _, err := s.Update(context.Background(), func(c *Settings) error { c.MCPServers[1].Token = ""; return nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(mcphost.TokenPath(path)); !os.IsNotExist(err) {
		t.Errorf("with no token left the token file is still there: %v", err)
	}
	if _, err := s.Update(context.Background(), func(c *Settings) error { c.MCPServers = []mcphost.Server{}; return nil }); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path); strings.Contains(string(b), "mcp_servers") || !strings.Contains(string(b), "unknown_key") {
		t.Errorf("after removing every server the file is:\n%s", b)
	}
}

// TestMCPServersRefusedAtTheirField: a bad server is refused with a
// *FieldError at the key's place whose message names the server and the
// field in words, and nothing is saved; a server that was saved when
// its program existed does not stop another setting from being saved.
func TestMCPServersRefusedAtTheirField(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "gone")
	tests := []struct {
		name    string
		servers []mcphost.Server
		field   string
		words   string
	}{
		{"no name", []mcphost.Server{{Command: []string{os.Args[0]}}}, "mcp_servers[0].name", "MCP server 1, name: "},
		{"bad url", []mcphost.Server{{Name: "a", Command: []string{os.Args[0]}}, {Name: "web", URL: "ftp://x"}}, "mcp_servers[1].url", `MCP server 2 ("web"), address: `},
		{"missing program", []mcphost.Server{{Name: "p", Command: []string{missing}}}, "mcp_servers[0].command", `MCP server 1 ("p"), command line: `},
		{"token over plain http", []mcphost.Server{{Name: "h", URL: "http://example.com/mcp", Token: "abcdefgh12345678"}}, "mcp_servers[0].token", `MCP server 1 ("h"), bearer token: `},
		{"duplicate", []mcphost.Server{{Name: "a", URL: "https://a.example/mcp"}, {Name: "A", URL: "https://b.example/mcp"}}, "mcp_servers[1].name", `MCP server 2 ("A"), name: `},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, path := newStore(t, "{}\n", Settings{})
			_, err := s.Update(context.Background(), func(c *Settings) error { c.MCPServers = tt.servers; return nil })
			var fe *FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("err %v, want a *FieldError", err)
			}
			if fe.Field != tt.field || !strings.HasPrefix(fe.Message, tt.words) {
				t.Errorf("field %q message %q, want %q starting %q", fe.Field, fe.Message, tt.field, tt.words)
			}
			if strings.Contains(fe.Message, "abcdefgh") {
				t.Errorf("the message quotes the token: %s", fe.Message)
			}
			if b, _ := os.ReadFile(path); string(b) != "{}\n" {
				t.Errorf("a refused change was saved: %s", b)
			}
			if len(s.Get().MCPServers) != 0 {
				t.Errorf("a refused change is in the store: %+v", s.Get().MCPServers)
			}
		})
	}

	// Saved while the program was there; then it went: another setting
	// still saves.
	prog := filepath.Join(t.TempDir(), "server")
	if err := os.WriteFile(prog, []byte("#!/bin/sh\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	s, _ := newStore(t, "{}\n", Settings{})
	if _, err := s.Update(context.Background(), func(c *Settings) error {
		c.MCPServers = []mcphost.Server{{Name: "p", Command: []string{prog}}}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	os.Remove(prog)
	if _, err := s.Update(context.Background(), func(c *Settings) error { c.KeepAlive = "1h"; return nil }); err != nil {
		t.Errorf("another setting refused for a server left as it was: %v", err)
	}
}

// TestStoreCopiesMCPServers: what Get returns and what a change edits
// are copies: editing them does not change the store.
func TestStoreCopiesMCPServers(t *testing.T) {
	s, _ := newStore(t, "{}\n", Settings{MCPServers: []mcphost.Server{{Name: "a", Command: []string{"x", "y"}, Env: map[string]string{"K": "v"}}}})
	got := s.Get()
	got.MCPServers[0].Command[1] = "changed"
	got.MCPServers[0].Env["K"] = "changed"
	if now := s.Get().MCPServers[0]; now.Command[1] != "y" || now.Env["K"] != "v" {
		t.Errorf("editing Get's copy changed the store: %+v", now)
	}
}
