package mcphost

import (
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestToResult: content becomes plain text parts within the limit; what
// is cut is counted and said; what is not text is described.
func TestToResult(t *testing.T) {
	text := func(s string) mcp.Content { return &mcp.TextContent{Text: s} }
	cases := []struct {
		name    string
		res     *mcp.CallToolResult
		limit   int
		parts   []Part
		cut     int
		isError bool
	}{
		{"text", &mcp.CallToolResult{Content: []mcp.Content{text("hello")}}, 100,
			[]Part{{"text", "hello"}}, 0, false},
		{"exactly the limit", &mcp.CallToolResult{Content: []mcp.Content{text("12345")}}, 5,
			[]Part{{"text", "12345"}}, 0, false},
		{"cut in the second part, the third dropped", &mcp.CallToolResult{Content: []mcp.Content{text("abc"), text("defgh"), text("ij")}}, 5,
			[]Part{{"text", "abc"}, {"text", "de\n[… 5 bytes more cut: the result was longer than 5 bytes]"}}, 5, false},
		{"cut inside a character", &mcp.CallToolResult{Content: []mcp.Content{text("aéé")}}, 2,
			[]Part{{"text", "a\n[… 4 bytes more cut: the result was longer than 2 bytes]"}}, 4, false},
		{"control characters and bad UTF-8", &mcp.CallToolResult{Content: []mcp.Content{text("a\x1b[2Jb\x00c\td\r\n\xffe\u0085")}}, 100,
			[]Part{{"text", "a[2Jbc\td\r\n\uFFFDe"}}, 0, false},
		{"a tool's failure", &mcp.CallToolResult{IsError: true, Content: []mcp.Content{text("no such file")}}, 100,
			[]Part{{"text", "no such file"}}, 0, true},
		{"audio", &mcp.CallToolResult{Content: []mcp.Content{&mcp.AudioContent{MIMEType: "audio/wav", Data: make([]byte, 2<<20)}}}, 100,
			[]Part{{"audio", "[audio: audio/wav, 2.0 MiB, not played]"}}, 0, false},
		{"a link", &mcp.CallToolResult{Content: []mcp.Content{&mcp.ResourceLink{Name: "notes\n<b>", URI: "file:///notes.md"}}}, 100,
			[]Part{{"resource_link", "[link: notes <b> file:///notes.md]"}}, 0, false},
		{"an embedded text resource", &mcp.CallToolResult{Content: []mcp.Content{&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: "file:///a.txt", Text: "contents"}}}}, 100,
			[]Part{{"resource", "[resource file:///a.txt]\ncontents"}}, 0, false},
		{"an embedded blob", &mcp.CallToolResult{Content: []mcp.Content{&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: "file:///a.bin", MIMEType: "application/zip", Blob: make([]byte, 10)}}}}, 100,
			[]Part{{"resource", "[resource file:///a.bin: application/zip, 10 bytes, not shown]"}}, 0, false},
		{"structured content only", &mcp.CallToolResult{StructuredContent: map[string]any{"temp": 21}}, 100,
			[]Part{{"structured", `{"temp":21}`}}, 0, false},
		{"nothing", &mcp.CallToolResult{}, 100, nil, 0, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := toResult(c.res, c.limit)
			if !slices.Equal(got.Parts, c.parts) || got.Cut != c.cut || got.IsError != c.isError {
				t.Errorf("got %q cut %d error %v\nwant %q cut %d error %v", got.Parts, got.Cut, got.IsError, c.parts, c.cut, c.isError)
			}
		})
	}
}

// TestStderrTail: a server's standard error keeps its last lines, made
// safe to quote.
func TestStderrTail(t *testing.T) {
	tl := &tail{max: 64}
	tl.Write([]byte(strings.Repeat("x", 100) + "\nfirst\n\nsecond\x1b[0m\n"))
	tl.Write([]byte("third\nfourth\n"))
	if got, want := tl.lastLines(), "second[0m / third / fourth"; got != want {
		t.Errorf("lastLines %q, want %q", got, want)
	}
}
