package web

import (
	"context"
	"errors"
	"net/http"
	"slices"

	"github.com/npuchat/npuchat/config"
	"github.com/npuchat/npuchat/mcphost"
)

// SettingsPath is the chat page opened at its Settings view (the tray's
// "MCP servers" button goes there through the one-time link's next).
const SettingsPath = "/#settings"

// MCPHost is what the page's routes use of the app's MCP servers (the
// app's *mcphost.Host): their state for Settings, and their tools. It
// runs only the servers of the settings (the app gives it each change):
// no route can add or start a server that is not in them. The chat's
// tool loop will add CallTool here.
type MCPHost interface {
	Status() []mcphost.Status
	ListTools(ctx context.Context, server string) ([]mcphost.Tool, error)
}

// PageMCPServer is one MCP server as the Settings page reads and writes
// it (in PageSettings.MCPServers): the settings' fields, its bearer
// token write-only.
type PageMCPServer struct {
	Name    string            `json:"name"`
	Command []string          `json:"command,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	Dir     string            `json:"dir,omitempty"`
	URL     string            `json:"url,omitempty"`
	Enabled bool              `json:"enabled"`
	Trusted bool              `json:"trusted"`
	// Token: in a GET, absent always (never sent); in a PUT, a new
	// token, "" to remove it, absent to keep the one it has.
	Token *string `json:"token,omitempty"`
	// TokenSet says a token is kept for it; TokenMasked shows it masked.
	TokenSet    bool   `json:"token_set"`
	TokenMasked string `json:"token_masked,omitempty"`
	// Was, in a PUT, is the name the server had before (its token goes
	// with it when it is renamed).
	Was string `json:"was,omitempty"`
}

// pageMCPServers is the page's view of the servers: tokens masked.
func pageMCPServers(servers []mcphost.Server) []PageMCPServer {
	out := make([]PageMCPServer, 0, len(servers))
	for _, s := range servers {
		out = append(out, PageMCPServer{Name: s.Name, Command: slices.Clone(s.Command), Env: s.Env, Dir: s.Dir, URL: s.URL,
			Enabled: s.Enabled, Trusted: s.Trusted, TokenSet: s.Token != "", TokenMasked: s.Token.Masked()})
	}
	return out
}

// mcpServersFrom makes the settings' servers from the page's: a token
// absent keeps the one the server had (by its name before, Was, or
// now), "" removes it.
func mcpServersFrom(in []PageMCPServer, cur []mcphost.Server) []mcphost.Server {
	had := map[string]mcphost.Secret{}
	for _, s := range cur {
		had[s.Name] = s.Token
	}
	out := make([]mcphost.Server, 0, len(in))
	for _, p := range in {
		s := mcphost.Server{Name: p.Name, Command: slices.Clone(p.Command), Env: p.Env, Dir: p.Dir, URL: p.URL, Enabled: p.Enabled, Trusted: p.Trusted}
		switch {
		case p.Token != nil:
			s.Token = mcphost.Secret(*p.Token)
		case p.Was != "":
			s.Token = had[p.Was]
		default:
			s.Token = had[p.Name]
		}
		if s.Stdio() {
			s.Token = "" // a program gets its token in env
		}
		out = append(out, s)
	}
	return out
}

// MCPServerState is one server of GET /api/settings/mcp: its settings
// (token masked) and what the host knows of it.
type MCPServerState struct {
	PageMCPServer
	Running bool `json:"running"`
	PID     int  `json:"pid,omitempty"`
	// Tools are the tools it listed last (nil: never listed).
	Tools       []mcphost.Tool `json:"tools"`
	LastError   string         `json:"last_error,omitempty"`
	LastErrorAt string         `json:"last_error_at,omitempty"`
}

// mcpServers is GET /api/settings/mcp: every configured server with its
// state (running, its tools, its last error).
func (s *Server) mcpServers(w http.ResponseWriter, r *http.Request) {
	if s.opts.Settings == nil {
		writeError(w, r, http.StatusNotFound, "not_found", "this server has no settings to change")
		return
	}
	status := map[string]mcphost.Status{}
	if s.opts.MCP != nil {
		for _, st := range s.opts.MCP.Status() {
			status[st.Name] = st
		}
	}
	out := []MCPServerState{}
	for _, p := range pageMCPServers(s.opts.Settings.Get().MCPServers) {
		st := MCPServerState{PageMCPServer: p}
		if h, ok := status[p.Name]; ok {
			st.Running, st.PID, st.Tools, st.LastError = h.Running, h.PID, h.Tools, h.LastError
			if !h.LastErrorAt.IsZero() {
				st.LastErrorAt = h.LastErrorAt.UTC().Format("2006-01-02T15:04:05Z")
			}
		}
		out = append(out, st)
	}
	writeJSON(w, http.StatusOK, map[string]any{"servers": out, "available": s.opts.MCP != nil})
}

// mcpTools is GET /api/settings/mcp/{name}/tools: the tools of a
// configured, enabled server, which starts it when it is not running
// (the person asked to see them). A name not in the settings is a 404
// and starts nothing.
func (s *Server) mcpTools(w http.ResponseWriter, r *http.Request) {
	if s.opts.Settings == nil || s.opts.MCP == nil {
		writeError(w, r, http.StatusNotFound, "not_found", "this server runs no MCP servers")
		return
	}
	name := r.PathValue("name")
	if !slices.ContainsFunc(s.opts.Settings.Get().MCPServers, func(m mcphost.Server) bool { return m.Name == name }) {
		writeError(w, r, http.StatusNotFound, "not_found", "no MCP server named "+quoteClip(name)+" in Settings: add it there first")
		return
	}
	tools, err := s.opts.MCP.ListTools(r.Context(), name)
	switch {
	case errors.Is(err, mcphost.ErrDisabled):
		writeError(w, r, http.StatusConflict, "mcp_disabled", "the MCP server "+quoteClip(name)+" is turned off: turn it on in Settings to see its tools")
		return
	case errors.Is(err, mcphost.ErrUnknownServer):
		writeError(w, r, http.StatusNotFound, "not_found", "no MCP server named "+quoteClip(name)+" is running yet: save Settings and try again")
		return
	case errors.Is(err, mcphost.ErrClosed):
		writeError(w, r, http.StatusServiceUnavailable, "shutting_down", err.Error())
		return
	case err != nil:
		// The server's own failure, in words (mcphost cleans its text).
		writeError(w, r, http.StatusBadGateway, "mcp_server_failed", err.Error())
		return
	}
	if tools == nil {
		tools = []mcphost.Tool{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"server": name, "tools": tools})
}

// quoteClip quotes a name from a request, cut to a length worth showing.
func quoteClip(name string) string { return "\"" + clip(name, 100) + "\"" }

// mcpSettingsOf is the settings' servers for the page's view.
func mcpSettingsOf(c config.Settings) *[]PageMCPServer {
	p := pageMCPServers(c.MCPServers)
	return &p
}
