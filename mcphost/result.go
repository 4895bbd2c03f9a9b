package mcphost

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Result is what a tool call gave, as plain text.
type Result struct {
	// Parts are the result's content items in order, each as text.
	Parts []Part `json:"parts"`
	// IsError is set when the tool said the call failed (its text says
	// why; a model can read it and try again).
	IsError bool `json:"is_error,omitempty"`
	// Cut is how many bytes of text were left out to keep the result
	// within Options.MaxResultBytes (0: nothing was cut).
	Cut int `json:"cut,omitempty"`
}

// Part is one content item of a result.
type Part struct {
	// Kind is what the server sent: "text", "image", "audio",
	// "resource_link", "resource" or "structured".
	Kind string `json:"kind"`
	// Text is the item's text, or for anything else its description
	// ("[image: image/png, 12.5 KiB, not shown]").
	Text string `json:"text"`
}

// Text is the whole result as one text: its parts separated by blank
// lines.
func (r Result) Text() string {
	texts := make([]string, len(r.Parts))
	for i, p := range r.Parts {
		texts[i] = p.Text
	}
	return strings.Join(texts, "\n\n")
}

// toResult turns a tool's content into plain text parts, at most limit
// bytes of text in all; the last part kept ends with a marker saying how
// much was cut.
func toResult(res *mcp.CallToolResult, limit int) Result {
	var parts []Part
	for _, c := range res.Content {
		parts = append(parts, describe(c))
	}
	if len(parts) == 0 && res.StructuredContent != nil {
		b, err := json.Marshal(res.StructuredContent)
		if err == nil {
			parts = append(parts, Part{Kind: "structured", Text: sanitize(string(b))})
		}
	}
	out := Result{IsError: res.IsError}
	left := limit
	for i, p := range parts {
		if len(p.Text) <= left {
			out.Parts = append(out.Parts, p)
			left -= len(p.Text)
			continue
		}
		// Cut on a character boundary, and count every byte left out of
		// this part and the ones after it.
		keep := left
		for keep > 0 && !utf8.RuneStart(p.Text[keep]) {
			keep--
		}
		out.Cut = len(p.Text) - keep
		for _, rest := range parts[i+1:] {
			out.Cut += len(rest.Text)
		}
		p.Text = p.Text[:keep] + fmt.Sprintf("\n[… %s more cut: the result was longer than %s]", size(out.Cut), size(limit))
		out.Parts = append(out.Parts, p)
		break
	}
	return out
}

// describe turns one content item into text: text itself (sanitized),
// anything else described in words, its bytes never passed on.
func describe(c mcp.Content) Part {
	switch c := c.(type) {
	case *mcp.TextContent:
		return Part{Kind: "text", Text: sanitize(c.Text)}
	case *mcp.ImageContent:
		return Part{Kind: "image", Text: fmt.Sprintf("[image: %s, %s, not shown]", sanitizeLine(c.MIMEType), size(len(c.Data)))}
	case *mcp.AudioContent:
		return Part{Kind: "audio", Text: fmt.Sprintf("[audio: %s, %s, not played]", sanitizeLine(c.MIMEType), size(len(c.Data)))}
	case *mcp.ResourceLink:
		return Part{Kind: "resource_link", Text: fmt.Sprintf("[link: %s %s]", sanitizeLine(c.Name), sanitizeLine(c.URI))}
	case *mcp.EmbeddedResource:
		r := c.Resource
		if r == nil {
			return Part{Kind: "resource", Text: "[an empty resource]"}
		}
		if r.Text != "" || r.Blob == nil {
			return Part{Kind: "resource", Text: fmt.Sprintf("[resource %s]\n%s", sanitizeLine(r.URI), sanitize(r.Text))}
		}
		return Part{Kind: "resource", Text: fmt.Sprintf("[resource %s: %s, %s, not shown]", sanitizeLine(r.URI), sanitizeLine(r.MIMEType), size(len(r.Blob)))}
	}
	return Part{Kind: "other", Text: fmt.Sprintf("[content of a kind NPU Chat does not show (%T)]", c)}
}

// sanitize makes untrusted text plain: invalid UTF-8 becomes U+FFFD, and
// control characters other than tab and line breaks are dropped (they
// would move a terminal's cursor, hide text, or stop a C string).
func sanitize(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	return strings.Map(func(r rune) rune {
		if r == '\n' || r == '\t' || r == '\r' {
			return r
		}
		if unicode.IsControl(r) {
			return -1
		}
		return r
	}, s)
}

// sanitizeLine is sanitize on one line, at most 200 bytes.
func sanitizeLine(s string) string {
	s = strings.Join(strings.Fields(sanitize(s)), " ")
	if len(s) > 200 {
		s = strings.ToValidUTF8(s[:200], "") + "…"
	}
	return s
}

// size says a byte count for a person: "512 bytes", "12.5 KiB", "3.0 MiB".
func size(n int) string {
	switch {
	case n < 1024:
		return fmt.Sprintf("%d bytes", n)
	case n < 1<<20:
		return fmt.Sprintf("%.1f KiB", float64(n)/1024)
	}
	return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
}
