package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/npuchat/npuchat/config"
	"github.com/npuchat/npuchat/mcphost"
	"github.com/npuchat/npuchat/service"
	"github.com/npuchat/npuchat/service/backend/fake"
	"github.com/npuchat/npuchat/web"
)

// mcpRoleEnv makes the test binary an MCP server (stdio) instead of
// running the tests: the web tests' real MCP server.
const mcpRoleEnv = "NPUCHAT_WEB_TEST_MCP"

func TestMain(m *testing.M) {
	switch os.Getenv(mcpRoleEnv) {
	case "server":
		os.Exit(serveMCP())
	case "crash":
		fmt.Fprintln(os.Stderr, "crash: the config file /nowhere is missing")
		os.Exit(3)
	}
	os.Exit(m.Run())
}

// serveMCP is a stdio MCP server with two tools; it writes the file
// NPUCHAT_WEB_TEST_MCP_MARK (when set) as it starts, so that a test sees
// whether it was started.
func serveMCP() int {
	if mark := os.Getenv(mcpRoleEnv + "_MARK"); mark != "" {
		os.WriteFile(mark, []byte("started\n"), 0o600)
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "web-test", Version: "1"}, nil)
	type echoIn struct {
		Text string `json:"text"`
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "echo", Description: "Says the text back"}, func(ctx context.Context, req *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Text}}}, nil, nil
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "shout", Description: "<b>Says</b> it louder"}, func(ctx context.Context, req *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.ToUpper(in.Text)}}}, nil, nil
	})
	if err := srv.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		fmt.Fprintln(os.Stderr, "serve:", err)
		return 1
	}
	return 0
}

// hostSettings is the settings store with an MCP host that follows
// each change, as the app wires them.
type hostSettings struct {
	*config.Store
	host *mcphost.Host
}

func (s hostSettings) Update(ctx context.Context, change func(*config.Settings) error) (config.Settings, error) {
	out, err := s.Store.Update(ctx, change)
	if err == nil {
		err = s.host.Update(out.MCPServers)
	}
	return out, err
}

// mcpServerJSON is the page's JSON of a stdio server that is this test
// binary, marking mark when it starts.
func mcpServerJSON(t *testing.T, name string, enabled bool, mark string) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(map[string]any{"name": name, "command": []string{exe, "-test.run=^$"}, "enabled": enabled,
		"env": map[string]string{mcpRoleEnv: "server", mcpRoleEnv + "_MARK": mark}})
	return string(b)
}

// TestMCPSettingsRoutes: servers are added through PUT /api/settings,
// listed with their state by GET /api/settings/mcp, and a configured,
// enabled server's tools are listed (starting it) by GET
// /api/settings/mcp/{name}/tools; a disabled server or a name not in
// the settings starts nothing; a token is never sent back, and a PUT
// without it keeps it; without the session every route is refused.
func TestMCPSettingsRoutes(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "settings.json")
	cfg, err := config.Load(config.MapEnv(map[string]string{"NPUCHAT_CONFIG": path, "HOME": dir}), "linux")
	if err != nil {
		t.Fatal(err)
	}
	host, err := mcphost.New(nil, mcphost.Options{Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { host.Close() })
	store := config.NewStore(cfg)
	t.Cleanup(store.Close)
	s := startServer(t, fake.Options{}, web.Options{Settings: hostSettings{store, host}, MCP: host}, service.Options{})

	onMark, offMark := filepath.Join(dir, "on.started"), filepath.Join(dir, "off.started")
	const tok = "tok_verysecretvalue_9876"
	put := `{"mcp_servers": [` + mcpServerJSON(t, "tools", true, onMark) + `, ` + mcpServerJSON(t, "off", false, offMark) +
		`, {"name": "remote", "url": "https://mcp.example.com/mcp", "enabled": false, "token": "` + tok + `"}]}`
	resp, body := do(t, "PUT", s.URL+"/api/settings", put)
	if resp.StatusCode != 200 {
		t.Fatalf("put: %d %s", resp.StatusCode, body)
	}
	if strings.Contains(body, "verysecret") {
		t.Errorf("the PUT's answer holds the token: %s", body)
	}
	var file map[string]json.RawMessage
	if b, _ := os.ReadFile(path); json.Unmarshal(b, &file) != nil || len(file) != 1 || file["mcp_servers"] == nil {
		t.Errorf("a PUT of the servers alone wrote more: %s", b)
	}
	got := decodeJSON[web.PageSettings](t, body)
	if got.MCPServers == nil || len(*got.MCPServers) != 3 || !(*got.MCPServers)[2].TokenSet || (*got.MCPServers)[2].Token != nil || (*got.MCPServers)[0].TokenSet {
		t.Fatalf("servers after the PUT: %s", body)
	}
	for _, route := range []string{"/api/settings", "/api/settings/mcp"} {
		if _, body := do(t, "GET", s.URL+route, ""); strings.Contains(body, "verysecret") || !strings.Contains(body, `"token_set":true`) {
			t.Errorf("GET %s shows the token or no token_set flag: %s", route, body)
		}
	}
	// A PUT that leaves the token out keeps it, also for a renamed server.
	keep := `{"mcp_servers": [` + mcpServerJSON(t, "tools", true, onMark) + `, ` + mcpServerJSON(t, "off", false, offMark) +
		`, {"name": "remote2", "was": "remote", "url": "https://mcp.example.com/mcp", "enabled": false}], "keep_alive": "1h"}`
	if resp, body := do(t, "PUT", s.URL+"/api/settings", keep); resp.StatusCode != 200 {
		t.Fatalf("put without token: %d %s", resp.StatusCode, body)
	}
	if srv := store.Get().MCPServers; len(srv) != 3 || srv[2].Token.Reveal() != tok {
		t.Errorf("a PUT without the token lost it: %+v", srv)
	}
	if b, _ := os.ReadFile(path); strings.Contains(string(b), "verysecret") {
		t.Errorf("the token is in settings.json: %s", b)
	}

	// Nothing started yet.
	var list struct {
		Servers   []web.MCPServerState `json:"servers"`
		Available bool                 `json:"available"`
	}
	_, body = do(t, "GET", s.URL+"/api/settings/mcp", "")
	if err := json.Unmarshal([]byte(body), &list); err != nil || !list.Available || len(list.Servers) != 3 || list.Servers[0].Running || list.Servers[0].Tools != nil {
		t.Fatalf("status before any use: %s", body)
	}

	// Listing the tools of the enabled server starts it.
	resp, body = do(t, "GET", s.URL+"/api/settings/mcp/tools/tools", "")
	if resp.StatusCode != 200 {
		t.Fatalf("tools: %d %s", resp.StatusCode, body)
	}
	tools := decodeJSON[struct{ Tools []mcphost.Tool }](t, body).Tools
	if len(tools) != 2 || tools[0].Name != "echo" || tools[0].Description != "Says the text back" || tools[1].Name != "shout" {
		t.Errorf("tools: %s", body)
	}
	if _, err := os.Stat(onMark); err != nil {
		t.Errorf("the server did not start: %v", err)
	}
	_, body = do(t, "GET", s.URL+"/api/settings/mcp", "")
	json.Unmarshal([]byte(body), &list)
	if st := list.Servers[0]; !st.Running || st.PID == 0 || len(st.Tools) != 2 || st.LastError != "" {
		t.Errorf("status after listing tools: %s", body)
	}

	// Refused, starting nothing.
	for _, tt := range []struct {
		path   string
		status int
		want   string
	}{
		{"/api/settings/mcp/off/tools", 409, "turned off"},
		{"/api/settings/mcp/ghost/tools", 404, "no MCP server named"},
		{"/api/settings/mcp/remote/tools", 404, "no MCP server named"}, // renamed
	} {
		resp, body := do(t, "GET", s.URL+tt.path, "")
		if resp.StatusCode != tt.status || !strings.Contains(body, tt.want) {
			t.Errorf("%s: %d %s, want %d %q", tt.path, resp.StatusCode, body, tt.status, tt.want)
		}
	}
	if _, err := os.Stat(offMark); !os.IsNotExist(err) {
		t.Errorf("a disabled server was started: %v", err)
	}

	// A server that crashes: a clear error with its last words, kept
	// in its state; NPU Chat goes on.
	crash := strings.Replace(mcpServerJSON(t, "crashy", true, ""), `"server"`, `"crash"`, 1)
	all := `{"mcp_servers": [` + mcpServerJSON(t, "tools", true, onMark) + `, ` + mcpServerJSON(t, "off", false, offMark) +
		`, {"name": "remote2", "url": "https://mcp.example.com/mcp"}, ` + crash + `]}`
	if resp, body := do(t, "PUT", s.URL+"/api/settings", all); resp.StatusCode != 200 {
		t.Fatalf("put crashy: %d %s", resp.StatusCode, body)
	}
	resp, body = do(t, "GET", s.URL+"/api/settings/mcp/crashy/tools", "")
	if resp.StatusCode != 502 || !strings.Contains(body, "config file /nowhere is missing") {
		t.Errorf("tools of a crashing server: %d %s", resp.StatusCode, body)
	}
	_, body = do(t, "GET", s.URL+"/api/settings/mcp", "")
	json.Unmarshal([]byte(body), &list)
	if st := list.Servers[3]; st.Name != "crashy" || st.Running || !strings.Contains(st.LastError, "/nowhere") || st.LastErrorAt == "" {
		t.Errorf("state of the crashed server: %+v", st)
	}
	if st := list.Servers[0]; !st.Running {
		t.Errorf("the other server stopped: %+v", st)
	}
	if toks, _ := mcphost.ReadTokens(mcphost.TokenPath(path)); toks["remote2"].Reveal() != tok {
		t.Errorf("the token did not stay with its server: %v", toks)
	}

	// A bad server is refused at its field, in words, and changes nothing.
	resp, body = do(t, "PUT", s.URL+"/api/settings", `{"mcp_servers": [{"name": "bad name", "url": "https://x.example/mcp"}]}`)
	if resp.StatusCode != 400 || !strings.Contains(body, `"param":"mcp_servers[0].name"`) || !strings.Contains(body, "MCP server 1") {
		t.Errorf("bad server: %d %s", resp.StatusCode, body)
	}
	if len(store.Get().MCPServers) != 4 {
		t.Errorf("a refused PUT changed the servers: %+v", store.Get().MCPServers)
	}

	// Without the session, nothing.
	for _, r := range []struct{ method, path, body string }{
		{"GET", "/api/settings/mcp", ""}, {"GET", "/api/settings/mcp/tools/tools", ""}, {"PUT", "/api/settings", put},
	} {
		if resp, body := do(t, r.method, s.URL+r.path, r.body, "Cookie", ""); resp.StatusCode != 401 {
			t.Errorf("%s %s without a session: %d %s", r.method, r.path, resp.StatusCode, body)
		}
	}

	// Removing a server stops it.
	if resp, body := do(t, "PUT", s.URL+"/api/settings", `{"mcp_servers": []}`); resp.StatusCode != 200 {
		t.Fatalf("remove all: %d %s", resp.StatusCode, body)
	}
	if st := host.Status(); len(st) != 0 {
		t.Errorf("the host still runs %+v", st)
	}
}
