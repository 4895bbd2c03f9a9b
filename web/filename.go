package web

import (
	"fmt"
	"strings"
	"unicode"
)

// maxFileNameRunes bounds the part of an export's file name taken from
// the chat's title (the extension and nothing else is added to it).
const maxFileNameRunes = 80

// windowsReserved are the device names Windows refuses as a file name,
// with or without an extension, in any case.
var windowsReserved = map[string]bool{
	"CON": true, "PRN": true, "AUX": true, "NUL": true,
	"COM1": true, "COM2": true, "COM3": true, "COM4": true, "COM5": true,
	"COM6": true, "COM7": true, "COM8": true, "COM9": true,
	"LPT1": true, "LPT2": true, "LPT3": true, "LPT4": true, "LPT5": true,
	"LPT6": true, "LPT7": true, "LPT8": true, "LPT9": true,
}

// exportFileName is the file name a chat's export is saved under: its
// title made safe on every system (no path separators, control
// characters or characters Windows refuses, no reserved device name, no
// leading or trailing dots and spaces, at most maxFileNameRunes
// characters), with the chat's id only when nothing of the title is
// left.
func exportFileName(title string, id int64, ext string) string {
	var b strings.Builder
	space := false
	for _, r := range title {
		switch {
		case unicode.IsControl(r), strings.ContainsRune(`/\<>:"|?*`, r), unicode.IsSpace(r):
			space = b.Len() > 0
			continue
		case !unicode.IsPrint(r):
			continue
		}
		if space {
			b.WriteRune(' ')
			space = false
		}
		b.WriteRune(r)
	}
	name := b.String()
	if rs := []rune(name); len(rs) > maxFileNameRunes {
		name = string(rs[:maxFileNameRunes])
	}
	name = strings.Trim(name, ". ")
	base, _, _ := strings.Cut(name, ".")
	if name == "" || windowsReserved[strings.ToUpper(strings.TrimSpace(base))] {
		name = fmt.Sprintf("npuchat-conversation-%d", id)
	}
	return name + "." + ext
}

// attachmentDisposition is a Content-Disposition header that saves
// under name: an ASCII filename for old clients and the whole name,
// UTF-8, in filename* (RFC 6266).
func attachmentDisposition(name string) string {
	ascii := strings.Map(func(r rune) rune {
		if r > unicode.MaxASCII || r == '"' || r == '\\' {
			return '_'
		}
		return r
	}, name)
	return `attachment; filename="` + ascii + `"; filename*=` + rfc5987(name)
}

// rfc5987 encodes s as an RFC 5987 ext-value: the charset UTF-8, an
// empty language, then every byte outside the attr-char set
// percent-encoded.
func rfc5987(s string) string {
	const attr = "!#$&+-.^_`|~"
	var b strings.Builder
	b.WriteString("UTF-8''")
	for _, c := range []byte(s) {
		if c < 0x80 && (c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte(attr, c) >= 0) {
			b.WriteByte(c)
			continue
		}
		fmt.Fprintf(&b, "%%%02X", c)
	}
	return b.String()
}
