package config

import (
	"errors"
	"fmt"
	"maps"
	"reflect"
	"regexp"
	"strconv"
	"strings"

	"github.com/npuchat/npuchat/mcphost"
)

// The MCP servers (Settings.MCPServers, "mcp_servers" in the settings
// file) are checked by mcphost.Check and kept as docs/mcp.md says: the
// list in the settings file, each URL server's bearer token in
// mcphost's token file beside it (mcphost.TokenPath, 0600), as the
// Hugging Face token is kept in hf_token.

// readMCPTokens puts the token file's tokens into the URL servers of
// the settings read from the settings file at settingsPath.
func readMCPTokens(settingsPath string, servers []mcphost.Server) ([]mcphost.Server, error) {
	if len(servers) == 0 {
		return servers, nil
	}
	tokens, err := mcphost.ReadTokens(mcphost.TokenPath(settingsPath))
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	return mcphost.WithTokens(servers, tokens), nil
}

// mcpTokensChanged reports whether a change of the servers changes the
// token file.
func mcpTokensChanged(before, after []mcphost.Server) bool {
	return !maps.Equal(mcphost.Tokens(before), mcphost.Tokens(after))
}

// writeMCPTokens replaces the token file beside the settings file at
// settingsPath with the URL servers' tokens (none: it is removed).
func writeMCPTokens(settingsPath string, servers []mcphost.Server) error {
	if err := mcphost.WriteTokens(mcphost.TokenPath(settingsPath), mcphost.Tokens(servers)); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	return nil
}

// checkMCP checks the MCP servers when they changed (a program removed
// from PATH since they were saved is that server's error when it starts,
// not a reason to refuse saving another setting), each problem a
// *FieldError whose Field is the key's place ("mcp_servers[1].url") and
// whose Message names the server and the field in words.
func checkMCP(before, after []mcphost.Server) error {
	if reflect.DeepEqual(before, after) {
		return nil
	}
	err := mcphost.Check(after)
	if err == nil {
		return nil
	}
	var errs []error
	for _, e := range unjoin(err) {
		var fe *mcphost.FieldError
		if !errors.As(e, &fe) {
			errs = append(errs, fmt.Errorf("MCP servers: %w", e))
			continue
		}
		errs = append(errs, &FieldError{Field: fe.Field, Message: mcpFieldWords(fe.Field, after) + ": " + fe.Message})
	}
	return errors.Join(errs...)
}

// unjoin lists the errors an errors.Join holds (err alone otherwise).
func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

// mcpLabels are the words the Settings page uses for each field of a
// server.
var mcpLabels = map[string]string{
	"name":    "name",
	"command": "command line",
	"env":     "environment",
	"dir":     "working folder",
	"url":     "address",
	"token":   "bearer token",
}

var mcpFieldRE = regexp.MustCompile(`^mcp_servers\[(\d+)\]\.(\w+)$`)

// mcpFieldWords names a server field for a person: `MCP server 2
// ("files"), address` for "mcp_servers[1].url".
func mcpFieldWords(field string, servers []mcphost.Server) string {
	m := mcpFieldRE.FindStringSubmatch(field)
	if m == nil {
		return "MCP servers"
	}
	i, _ := strconv.Atoi(m[1])
	label := mcpLabels[m[2]]
	if label == "" {
		label = m[2]
	}
	who := "MCP server " + strconv.Itoa(i+1)
	if i < len(servers) && servers[i].Name != "" && len(servers[i].Name) <= mcphost.MaxNameLen {
		who += " (" + strconv.Quote(servers[i].Name) + ")"
	}
	return who + ", " + label
}

// normalizeMCP trims what a person may have typed around the values of
// the servers.
func normalizeMCP(servers []mcphost.Server) {
	for i := range servers {
		s := &servers[i]
		s.Name = strings.TrimSpace(s.Name)
		s.URL = strings.TrimSpace(s.URL)
		s.Dir = strings.TrimSpace(s.Dir)
		s.Token = mcphost.Secret(strings.TrimSpace(s.Token.Reveal()))
		if len(s.Env) == 0 {
			s.Env = nil
		}
		if len(s.Command) == 0 {
			s.Command = nil
		}
	}
}

// cloneMCP copies servers deeply (their commands and environments are
// not shared).
func cloneMCP(servers []mcphost.Server) []mcphost.Server {
	if servers == nil {
		return nil
	}
	out := make([]mcphost.Server, len(servers))
	for i, s := range servers {
		s.Command = append([]string(nil), s.Command...)
		if s.Env != nil {
			s.Env = maps.Clone(s.Env)
		}
		out[i] = s
	}
	return out
}
