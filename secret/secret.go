// Package secret is a string that is never shown or logged whole: the
// Hugging Face token, an MCP server's bearer token, the API key. Printed
// with fmt (%v, %s, %#v), logged with slog or marshalled to JSON it is
// its Masked form; Reveal is the value itself, for the one place that
// sends it (an Authorization header). A leaf package, so that config and
// mcphost share one type without importing each other.
package secret

import (
	"log/slog"
	"strconv"
)

// Secret is a value that is never shown or logged whole.
type Secret string

// Reveal is the secret itself.
func (s Secret) Reveal() string { return string(s) }

// Masked shows enough of a secret to recognize it and not enough to use
// it: the first three characters and the last four ("hf_…1234") of a
// long one, "…" and the last two of a medium one, "…" for a short one,
// "" for none.
func (s Secret) Masked() string {
	r := []rune(string(s))
	switch {
	case len(r) == 0:
		return ""
	case len(r) >= 16:
		return string(r[:3]) + "…" + string(r[len(r)-4:])
	case len(r) >= 8:
		return "…" + string(r[len(r)-2:])
	}
	return "…"
}

func (s Secret) String() string       { return s.Masked() }
func (s Secret) GoString() string     { return strconv.Quote(s.Masked()) }
func (s Secret) LogValue() slog.Value { return slog.StringValue(s.Masked()) }

// MarshalJSON writes the masked form: a secret never leaves in JSON.
func (s Secret) MarshalJSON() ([]byte, error) { return []byte(strconv.Quote(s.Masked())), nil }
