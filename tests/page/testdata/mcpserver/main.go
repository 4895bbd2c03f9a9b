// Command mcpserver is the page tests' stdio MCP server (the SDK's own
// server side). Its tools' descriptions say what it was started with,
// so that a test sees the command line and environment the Settings
// page saved arrive: "args" lists its arguments, "greet" the
// environment variable GREETING, and "markup" is text that must stay
// text on the page.
package main

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type in struct {
	Text string `json:"text"`
}

func main() {
	srv := mcp.NewServer(&mcp.Implementation{Name: "page-test", Version: "1"}, nil)
	echo := func(ctx context.Context, req *mcp.CallToolRequest, in in) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Text}}}, nil, nil
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "args", Description: "Started with " + strings.Join(os.Args[1:], "|")}, echo)
	mcp.AddTool(srv, &mcp.Tool{Name: "greet", Description: "Says " + os.Getenv("GREETING")}, echo)
	mcp.AddTool(srv, &mcp.Tool{Name: "markup", Description: `<img src=x onerror="window.pwned=1"><b>not bold</b>`}, echo)
	if err := srv.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		fmt.Fprintln(os.Stderr, "serve:", err)
		os.Exit(1)
	}
}
