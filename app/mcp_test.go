package app

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/npuchat/npuchat/config"
	"github.com/npuchat/npuchat/mcphost"
)

// TestMCPHostFollowsSettings: the app's MCP host runs the servers of
// the settings: one added in Settings lists its tools (a real
// streamable HTTP server of the SDK), one removed is gone from the
// host's status, and Shutdown closes the host.
func TestMCPHostFollowsSettings(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "app-test", Version: "1"}, nil)
	type in struct {
		Text string `json:"text"`
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "echo", Description: "Says the text back"}, func(ctx context.Context, req *mcp.CallToolRequest, in in) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Text}}}, nil, nil
	})
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(hs.Close)

	a := newApp(t, testEnv(t), Flags{})
	ctx := context.Background()
	if _, err := a.mcp.ListTools(ctx, "web"); !errors.Is(err, mcphost.ErrUnknownServer) {
		t.Fatalf("a server not in the settings: %v", err)
	}
	if _, err := a.UpdateSettings(ctx, func(s *config.Settings) error {
		s.MCPServers = []mcphost.Server{{Name: "web", URL: hs.URL, Enabled: true}}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	tools, err := a.mcp.ListTools(ctx, "web")
	if err != nil || len(tools) != 1 || tools[0].Name != "echo" {
		t.Fatalf("tools %+v, %v", tools, err)
	}
	if st := a.mcp.Status(); len(st) != 1 || !st[0].Running || len(st[0].Tools) != 1 {
		t.Errorf("status %+v", st)
	}
	if _, err := a.UpdateSettings(ctx, func(s *config.Settings) error { s.MCPServers[0].Enabled = false; return nil }); err != nil {
		t.Fatal(err)
	}
	if st := a.mcp.Status(); len(st) != 1 || st[0].Running || st[0].Enabled {
		t.Errorf("after turning it off: %+v", st)
	}
	if _, err := a.UpdateSettings(ctx, func(s *config.Settings) error { s.MCPServers = nil; return nil }); err != nil {
		t.Fatal(err)
	}
	if st := a.mcp.Status(); len(st) != 0 {
		t.Errorf("after removing it: %+v", st)
	}
	if err := a.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := a.mcp.ListTools(ctx, "web"); !errors.Is(err, mcphost.ErrClosed) {
		t.Errorf("after Shutdown: %v, want ErrClosed", err)
	}
}

// TestOpenSettingsLandsOnTheSettingsView: the tray's "Edit in the chat
// page's Settings" opens a one-time link that starts the session and
// goes on to the page at #settings.
func TestOpenSettingsLandsOnTheSettingsView(t *testing.T) {
	a := newApp(t, testEnv(t), Flags{})
	var opened []string
	a.opts.OpenURL = func(u string) error { opened = append(opened, u); return nil }
	running(t, a, RunOptions{})
	if err := a.OpenSettings(); err != nil {
		t.Fatal(err)
	}
	if len(opened) != 1 {
		t.Fatalf("opened %q", opened)
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Get(opened[0])
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if loc := resp.Header.Get("Location"); resp.StatusCode != http.StatusSeeOther || loc != "/#settings" || len(resp.Cookies()) != 1 {
		t.Errorf("the link answered %d, Location %q, cookies %v", resp.StatusCode, loc, resp.Cookies())
	}
}
