package mcphost

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestCheck: every kind of bad server is refused with the field to fix
// and words that say what to write; good ones pass.
func TestCheck(t *testing.T) {
	bin := t.TempDir()
	prog := filepath.Join(bin, "mcp-files")
	if runtime.GOOS == "windows" {
		prog += ".exe"
	}
	if err := os.WriteFile(prog, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin)
	dir := t.TempDir()
	stdio := func(name string, cmd ...string) Server { return Server{Name: name, Command: cmd, Enabled: true} }
	web := func(name, url string) Server { return Server{Name: name, URL: url} }
	cases := []struct {
		name    string
		servers []Server
		field   string // "" for no error
		words   string
	}{
		{"a program on PATH", []Server{stdio("files", "mcp-files", "/notes")}, "", ""},
		{"a whole path, env and dir", []Server{{Name: "files_2", Command: []string{prog}, Env: map[string]string{"ROOT": dir}, Dir: dir}}, "", ""},
		{"https with a token", []Server{{Name: "web", URL: "https://mcp.example.com/mcp", Token: "tok-0123456789abcdef"}}, "", ""},
		{"http to this computer with a token", []Server{{Name: "local", URL: "http://127.0.0.1:3000/mcp", Token: "tok"}}, "", ""},
		{"no name", []Server{stdio("", "mcp-files")}, "mcp_servers[0].name", "give the server a name"},
		{"a space in the name", []Server{stdio("my files", "mcp-files")}, "mcp_servers[0].name", "only letters, digits"},
		{"a long name", []Server{stdio(strings.Repeat("a", 65), "mcp-files")}, "mcp_servers[0].name", "at most 64"},
		{"the same name twice", []Server{stdio("files", "mcp-files"), stdio("Files", "mcp-files")}, "mcp_servers[1].name", "server 1 is already named \"files\""},
		{"both command and url", []Server{{Name: "x", Command: []string{"mcp-files"}, URL: "https://a.example"}}, "mcp_servers[0].url", "not both"},
		{"neither command nor url", []Server{{Name: "x"}}, "mcp_servers[0].command", "write the program to run"},
		{"an empty program", []Server{stdio("x", " ")}, "mcp_servers[0].command", "it is empty"},
		{"a relative path", []Server{stdio("x", "bin/mcp-files")}, "mcp_servers[0].command", "whole path"},
		{"not on PATH", []Server{stdio("x", "no-such-mcp-server")}, "mcp_servers[0].command", "is not on PATH"},
		{"a whole path to nothing", []Server{stdio("x", filepath.Join(bin, "gone"))}, "mcp_servers[0].command", "there is no program at"},
		{"a folder as the program", []Server{stdio("x", bin)}, "mcp_servers[0].command", "is a folder"},
		{"a relative dir", []Server{{Name: "x", Command: []string{"mcp-files"}, Dir: "notes"}}, "mcp_servers[0].dir", "whole path of a folder"},
		{"a dir that is not there", []Server{{Name: "x", Command: []string{"mcp-files"}, Dir: filepath.Join(dir, "gone")}}, "mcp_servers[0].dir", "there is no folder"},
		{"an env name with =", []Server{{Name: "x", Command: []string{"mcp-files"}, Env: map[string]string{"A=B": "c"}}}, "mcp_servers[0].env", "cannot hold ="},
		{"a token for a program", []Server{{Name: "x", Command: []string{"mcp-files"}, Token: "tok"}}, "mcp_servers[0].token", "give a program its token in env"},
		{"a url that is not http", []Server{web("x", "ftp://example.com/mcp")}, "mcp_servers[0].url", "starting with https://"},
		{"a url without a host", []Server{web("x", "https:///mcp")}, "mcp_servers[0].url", "starting with https://"},
		{"a url with a password", []Server{web("x", "https://me:pw@example.com/mcp")}, "mcp_servers[0].url", "put the token in the token field"},
		{"a token over plain http", []Server{{Name: "x", URL: "http://example.com/mcp", Token: "tok"}}, "mcp_servers[0].token", "only over https://"},
		{"a token with a space", []Server{{Name: "x", URL: "https://example.com/mcp", Token: "Bearer tok"}}, "mcp_servers[0].token", "no spaces"},
		{"env for a url", []Server{{Name: "x", URL: "https://example.com/mcp", Env: map[string]string{"A": "b"}}}, "mcp_servers[0].env", "clear them"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := Check(c.servers)
			if c.field == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var fe *FieldError
			if !errors.As(err, &fe) || fe.Field != c.field || !strings.Contains(fe.Message, c.words) {
				t.Fatalf("got %v, want %s: …%s…", err, c.field, c.words)
			}
			_, err = New(c.servers, Options{})
			files := strings.Contains(c.words, "PATH") || strings.Contains(c.words, "there is no") || strings.Contains(c.words, "is a folder")
			if files && err != nil {
				t.Errorf("New refused what depends on this computer's files: %v", err)
			}
			if !files && err == nil {
				t.Error("New took it")
			}
		})
	}
}

// TestCheckReportsEveryProblem: all the problems of a list come back at
// once, so a person fixes them in one go.
func TestCheckReportsEveryProblem(t *testing.T) {
	err := Check([]Server{{Name: ""}, {Name: "b", URL: "nope"}})
	var fields []string
	for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
		fields = append(fields, e.(*FieldError).Field)
	}
	want := "mcp_servers[0].name mcp_servers[0].command mcp_servers[1].url"
	if strings.Join(fields, " ") != want {
		t.Errorf("fields %v, want %s", fields, want)
	}
}

// TestTokenMasked: a server's token never shows whole when the server is
// printed, logged or marshalled, and is not in its settings JSON at all.
func TestTokenMasked(t *testing.T) {
	const tok = "sk-live-0123456789abcdef"
	s := Server{Name: "web", URL: "https://mcp.example.com/mcp", Token: tok, Enabled: true}
	var logged bytes.Buffer
	slog.New(slog.NewJSONHandler(&logged, nil)).Info("server", "server", s, "token", s.Token)
	settings, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	secretJSON, _ := json.Marshal(s.Token)
	outputs := map[string]string{
		"%v": fmt.Sprintf("%v", s), "%+v": fmt.Sprintf("%+v", s), "%s": fmt.Sprintf("%s", s),
		"%#v of the token": fmt.Sprintf("%#v", s.Token), "slog": logged.String(),
		"settings JSON": string(settings), "the token's JSON": string(secretJSON),
	}
	for how, out := range outputs {
		if strings.Contains(out, "0123456789") {
			t.Errorf("%s shows the token: %s", how, out)
		}
	}
	if !strings.Contains(outputs["%v"], "sk-…cdef") || string(secretJSON) != `"sk-…cdef"` {
		t.Errorf("masked forms %q %s", outputs["%v"], secretJSON)
	}
	if strings.Contains(string(settings), "token") || strings.Contains(string(settings), "sk-") {
		t.Errorf("settings JSON carries the token: %s", settings)
	}
	for _, c := range []struct{ tok, want string }{{"", ""}, {"abc", "…"}, {"abcdefgh12", "…12"}} {
		if got := Secret(c.tok).Masked(); got != c.want {
			t.Errorf("Masked(%q) = %q, want %q", c.tok, got, c.want)
		}
	}
}

// TestTokenFile: tokens go to a 0600 file beside the settings, by server
// name, and come back into the URL servers only; no tokens, no file; a
// damaged file is an error that does not quote it.
func TestTokenFile(t *testing.T) {
	dir := t.TempDir()
	path := TokenPath(filepath.Join(dir, "settings.json"))
	if filepath.Dir(path) != dir || filepath.Base(path) != TokenFileName {
		t.Fatalf("token path %s", path)
	}
	servers := []Server{
		{Name: "web", URL: "https://a.example/mcp", Token: "tok-web-0123456789"},
		{Name: "open", URL: "https://b.example/mcp"},
		{Name: "files", Command: []string{"mcp-files"}},
	}
	if err := WriteTokens(path, Tokens(servers)); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if runtime.GOOS != "windows" && fi.Mode().Perm() != 0o600 {
		t.Errorf("token file mode %v, want 0600", fi.Mode().Perm())
	}
	tokens, err := ReadTokens(path)
	if err != nil {
		t.Fatal(err)
	}
	tokens["files"] = "a token in the file for a program" // never given to it
	loaded := WithTokens([]Server{{Name: "web", URL: "https://a.example/mcp"}, {Name: "open", URL: "https://b.example/mcp"}, {Name: "files", Command: []string{"mcp-files"}}}, tokens)
	if loaded[0].Token != "tok-web-0123456789" || loaded[1].Token != "" || loaded[2].Token != "" {
		t.Errorf("loaded tokens %q %q %q", loaded[0].Token.Reveal(), loaded[1].Token.Reveal(), loaded[2].Token.Reveal())
	}
	if err := WriteTokens(path, Tokens(servers[1:])); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("no tokens left, but the file is there: %v", err)
	}
	if tokens, err := ReadTokens(path); err != nil || len(tokens) != 0 {
		t.Errorf("no file: %v %v", tokens, err)
	}
	os.WriteFile(path, []byte(`{"web": "tok-secret-0123456789",`), 0o600)
	if _, err := ReadTokens(path); err == nil || strings.Contains(err.Error(), "tok-secret") || !strings.Contains(err.Error(), "fix or delete it") {
		t.Errorf("damaged file: %v", err)
	}
	os.Remove(path)
	os.Mkdir(path, 0o700)
	if _, err := ReadTokens(path); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("a folder at the token path: %v", err)
	}
}
