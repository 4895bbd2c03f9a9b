// Package pages holds the chat page's templ components: Layout, the
// Sidebar with its ConversationList, the StatusBar with the model
// switch, the MessageList of Message components, the Composer, and the
// setup views (Install, Check, Settings, Logs). Handlers in package web
// fill a Page and render it; the script in web/static/app.js drives the
// page from there over the JSON and SSE API.
//
// templ (github.com/a-h/templ v0.3.1118, pinned in go.mod's tool line)
// escapes every value it writes, so titles and message text from the
// history are text, never markup. Messages are rendered as their plain
// text inside a data-md element; the browser turns that text into
// Markdown with md.js, which builds elements with createElement and
// textContent only (see that file), so model output cannot become HTML.
//
// Regenerate the _templ.go files with `go generate ./web/pages` (run
// through `go tool templ`); `make test` fails when they are stale.
package pages

//go:generate go tool templ generate -path .
