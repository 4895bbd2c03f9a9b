package mcphost

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"unicode"

	"github.com/npuchat/npuchat/secret"
)

// Server is one MCP server as the settings file keeps it (one element of
// "mcp_servers"): a program to run (Command, with Env and Dir) or the
// address of a streamable HTTP server (URL, with Token), never both.
type Server struct {
	// Name identifies the server in Settings, in chats and in the
	// history: letters, digits, "-" and "_", unique in the list.
	Name string `json:"name"`
	// Command is the program and its arguments, one element each (no
	// shell): ["npx", "-y", "@modelcontextprotocol/server-filesystem",
	// "/home/me/notes"]. The program is a whole path or a name on PATH.
	Command []string `json:"command,omitempty"`
	// Env is added to the program's environment (it wins over NPU Chat's
	// own for the same name).
	Env map[string]string `json:"env,omitempty"`
	// Dir is the program's working folder (a whole path); empty is NPU
	// Chat's own.
	Dir string `json:"dir,omitempty"`
	// URL is a streamable HTTP server's endpoint (http:// or https://).
	URL string `json:"url,omitempty"`
	// Enabled servers' tools are offered to chats; a disabled server is
	// never started.
	Enabled bool `json:"enabled"`
	// Trusted servers' calls run without asking the person first.
	Trusted bool `json:"trusted"`
	// Token is the bearer token sent to a URL server. It is never in the
	// settings file (json "-"): it lives in the token file beside it
	// (ReadTokens, WriteTokens, WithTokens).
	Token Secret `json:"-"`
}

// Stdio reports whether the server is a program (stdio transport) rather
// than a URL.
func (s Server) Stdio() bool { return len(s.Command) > 0 }

// String names the server and what it runs, with its token masked.
func (s Server) String() string {
	var b strings.Builder
	b.WriteString(s.Name)
	if s.Stdio() {
		fmt.Fprintf(&b, " (command %q)", s.Command)
	} else {
		fmt.Fprintf(&b, " (url %s", s.URL)
		if s.Token != "" {
			fmt.Fprintf(&b, ", token %s", s.Token.Masked())
		}
		b.WriteString(")")
	}
	return b.String()
}

// clone copies a server deeply, so that a Host's copy is its own.
func (s Server) clone() Server {
	s.Command = append([]string(nil), s.Command...)
	if s.Env != nil {
		env := make(map[string]string, len(s.Env))
		for k, v := range s.Env {
			env[k] = v
		}
		s.Env = env
	}
	return s
}

// equal reports whether two servers would run the same way (Enabled and
// Trusted aside).
func (s Server) sameRun(o Server) bool {
	if s.Name != o.Name || s.Dir != o.Dir || s.URL != o.URL || s.Token != o.Token ||
		len(s.Command) != len(o.Command) || len(s.Env) != len(o.Env) {
		return false
	}
	for i := range s.Command {
		if s.Command[i] != o.Command[i] {
			return false
		}
	}
	for k, v := range s.Env {
		if ov, ok := o.Env[k]; !ok || ov != v {
			return false
		}
	}
	return true
}

// Secret is a value that is never shown or logged whole (package secret).
type Secret = secret.Secret

// FieldError is a setting a person has to fix: Field is where it is in
// the settings ("mcp_servers[2].url"), Message what is wrong and what to
// write instead.
type FieldError struct {
	Field   string
	Message string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Message }

// MaxNameLen bounds a server's name.
const MaxNameLen = 64

// maxTokenLen bounds a bearer token.
const maxTokenLen = 4096

// Check validates a list of servers as the settings would keep it: every
// problem found, each a *FieldError (errors.Join; nil when all is well).
// A program named without a path must be on PATH now, one given by path
// must exist, and so must the working folder: Check is for saving the
// settings, when the person is there to fix them.
func Check(servers []Server) error { return check(servers, true) }

// check is Check; without files it leaves out what depends on this
// computer's files and PATH (a Host started from a desktop session may
// see another PATH than the Settings page did: a missing program is then
// that server's error when it starts, not a reason to run no server).
func check(servers []Server, files bool) error {
	var errs []error
	seen := map[string]int{}
	for i, s := range servers {
		field := func(name string) string { return fmt.Sprintf("mcp_servers[%d].%s", i, name) }
		bad := func(name, format string, args ...any) {
			errs = append(errs, &FieldError{Field: field(name), Message: fmt.Sprintf(format, args...)})
		}
		if msg := checkName(s.Name); msg != "" {
			bad("name", "%s", msg)
		} else if j, dup := seen[strings.ToLower(s.Name)]; dup {
			bad("name", "server %d is already named %q: give each server its own name", j+1, servers[j].Name)
		} else {
			seen[strings.ToLower(s.Name)] = i
		}
		switch {
		case len(s.Command) > 0 && s.URL != "":
			bad("url", "a server is either a program to run (command) or an address (url), not both: clear one")
			continue
		case len(s.Command) == 0 && s.URL == "":
			bad("command", "write the program to run (command), or the server's address (url)")
			continue
		}
		if s.Stdio() {
			if msg := checkCommand(s.Command, files); msg != "" {
				bad("command", "%s", msg)
			}
			if msg := checkEnv(s.Env); msg != "" {
				bad("env", "%s", msg)
			}
			if msg := checkDir(s.Dir, files); msg != "" {
				bad("dir", "%s", msg)
			}
			if s.Token != "" {
				bad("token", "a token is sent to servers reached by address (url); give a program its token in env instead")
			}
			continue
		}
		if len(s.Env) > 0 || s.Dir != "" {
			bad("env", "env and dir are for a program (command); a server reached by address (url) runs elsewhere: clear them")
		}
		if msg := checkURL(s.URL); msg != "" {
			bad("url", "%s", msg)
		} else if msg := checkToken(s.Token, s.URL); msg != "" {
			bad("token", "%s", msg)
		}
	}
	return errors.Join(errs...)
}

// checkName refuses a name that is empty, long, or has characters other
// than ASCII letters, digits, "-" and "_" (the chat builds tool names a
// model calls from it, and those allow no others).
func checkName(name string) string {
	switch {
	case name == "":
		return "give the server a name (letters, digits, - and _), such as files or web-search"
	case len(name) > MaxNameLen:
		return fmt.Sprintf("a name is at most %d characters; this one is %d", MaxNameLen, len(name))
	}
	for _, r := range name {
		if !(r < unicode.MaxASCII && (unicode.IsLetter(r) || unicode.IsDigit(r)) || r == '-' || r == '_') {
			return fmt.Sprintf("a name has only letters, digits, - and _ (no spaces), got %q", name)
		}
	}
	return ""
}

// checkCommand refuses a program that cannot be run: an empty one, a
// relative path (it would depend on NPU Chat's working folder), and with
// files, a name not on PATH or a path that is not a file.
func checkCommand(cmd []string, files bool) string {
	prog := cmd[0]
	for _, a := range cmd {
		if strings.ContainsRune(a, 0) {
			return "an argument holds a NUL character, which no program can receive: remove it"
		}
	}
	switch {
	case strings.TrimSpace(prog) == "":
		return "the first element of command is the program to run; it is empty"
	case filepath.IsAbs(prog) && !files:
		return ""
	case filepath.IsAbs(prog):
		fi, err := os.Stat(prog)
		switch {
		case err != nil:
			return fmt.Sprintf("there is no program at %s: install it or correct the path", prog)
		case fi.IsDir():
			return fmt.Sprintf("%s is a folder, not a program", prog)
		}
		return ""
	case strings.ContainsAny(prog, `/\`):
		return fmt.Sprintf("write the whole path of the program (starting with / or a drive letter), or a name on PATH, got %q", prog)
	case !files:
		return ""
	}
	if _, err := exec.LookPath(prog); err != nil {
		return fmt.Sprintf("the program %q is not on PATH (%s): install it, or write its whole path", prog, os.Getenv("PATH"))
	}
	return ""
}

// checkEnv refuses environment names a process cannot have.
func checkEnv(env map[string]string) string {
	for k, v := range env {
		switch {
		case k == "":
			return "an environment variable has no name"
		case strings.ContainsAny(k, "=\x00"):
			return fmt.Sprintf("an environment variable's name cannot hold = or NUL, got %q", k)
		case strings.ContainsRune(v, 0):
			return fmt.Sprintf("the value of %s holds a NUL character: remove it", k)
		}
	}
	return ""
}

// checkDir refuses a working folder that is not a whole path (with
// files: to a folder).
func checkDir(dir string, files bool) string {
	if dir == "" {
		return ""
	}
	if !filepath.IsAbs(dir) {
		return fmt.Sprintf("write the whole path of a folder (starting with / or a drive letter), got %q", dir)
	}
	if !files {
		return ""
	}
	fi, err := os.Stat(dir)
	switch {
	case err != nil:
		return fmt.Sprintf("there is no folder %s: create it or correct the path", dir)
	case !fi.IsDir():
		return fmt.Sprintf("%s is a file, not a folder", dir)
	}
	return ""
}

// checkURL refuses an address that is not an http(s) URL of a server.
func checkURL(s string) string {
	u, err := url.Parse(s)
	switch {
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		return fmt.Sprintf("write the server's address starting with https:// or http:// (for example https://mcp.example.com/mcp), got %q", s)
	case u.User != nil:
		return "the address holds a user name or password: put the token in the token field instead"
	case u.Fragment != "":
		return fmt.Sprintf("write the address without #fragment, got %q", s)
	}
	return ""
}

// checkToken refuses a token that cannot be one (never quoting it), and
// one that would cross the network in the clear.
func checkToken(tok Secret, rawURL string) string {
	s := tok.Reveal()
	if s == "" {
		return ""
	}
	if len(s) > maxTokenLen {
		return fmt.Sprintf("a token is at most %d characters; this is %d: paste the token alone", maxTokenLen, len(s))
	}
	for _, r := range s {
		if unicode.IsSpace(r) || unicode.IsControl(r) || r > unicode.MaxASCII {
			return "a token has no spaces, line breaks or accented letters: paste the token alone (without \"Bearer\")"
		}
	}
	u, _ := url.Parse(rawURL)
	if u.Scheme == "http" && !loopbackHost(u.Hostname()) {
		return "a token is sent only over https:// (or to this computer): plain http would show it to the network; use the server's https:// address"
	}
	return ""
}

// loopbackHost reports whether host names this computer.
func loopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
