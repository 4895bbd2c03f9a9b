package web_test

import (
	"fmt"
	"mime"
	"strings"
	"testing"

	"github.com/npuchat/npuchat/history"
	"github.com/npuchat/npuchat/service/backend/fake"
)

// TestExportIsSavedUnderTheTitle: the export's Content-Disposition
// names the chat's title (UTF-8 in filename*, an ASCII fallback).
func TestExportIsSavedUnderTheTitle(t *testing.T) {
	url, _ := startChat(t, fake.Options{})
	api := url + "/api/conversations"
	for _, c := range []struct{ title, format, want string }{
		{"Tiles: the kitchen/floor", "md", "Tiles the kitchen floor.md"},
		{"Café 日本", "json", "Café 日本.json"},
	} {
		resp, body := do(t, "POST", api, fmt.Sprintf(`{"title": %q}`, c.title))
		if resp.StatusCode != 201 {
			t.Fatalf("create: %d %s", resp.StatusCode, body)
		}
		conv := decodeJSON[history.Conversation](t, body)
		resp, body = do(t, "GET", fmt.Sprintf("%s/%d/export?format=%s", api, conv.ID, c.format), "")
		if resp.StatusCode != 200 {
			t.Fatalf("export: %d %s", resp.StatusCode, body)
		}
		disp := resp.Header.Get("Content-Disposition")
		kind, params, err := mime.ParseMediaType(disp)
		if err != nil || kind != "attachment" {
			t.Fatalf("Content-Disposition %q: %v", disp, err)
		}
		// Go's parser prefers filename* as browsers do.
		if params["filename"] != c.want {
			t.Errorf("%q: saved as %q (header %q), want %q", c.title, params["filename"], disp, c.want)
		}
		if strings.ContainsAny(disp, "\n\r") {
			t.Errorf("header holds a line break: %q", disp)
		}
	}
}
