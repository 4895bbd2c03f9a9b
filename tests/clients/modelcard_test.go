package clients

import (
	"bufio"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/npuchat/npuchat/web/webtest"
)

// The model card's examples, byte for byte as curl and PowerShell send
// them (the Python example is TestOpenAIGoChat and the Node test's first
// case). Host is the card's 127.0.0.1:8001: the server must accept it.
var modelCardRequests = []struct {
	name, raw, wantContent string
}{
	{
		name: "curl",
		raw: "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:8001\r\nUser-Agent: curl/8.5.0\r\nAccept: */*\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" +
			`{
    "model": "minicpm5:2b",
    "messages": [
      {"role": "user", "content": "Explain quantum superposition in simple terms with an analogy."}
    ],
    "max_tokens": 150,
    "temperature": 0.2
  }`,
		wantContent: "echo: Explain quantum superposition in simple terms with an analogy.",
	},
	{
		// Windows PowerShell 5.1: ConvertTo-Json of the card's hashtable,
		// sent by Invoke-RestMethod.
		name: "powershell",
		raw: "POST /v1/chat/completions HTTP/1.1\r\nUser-Agent: Mozilla/5.0 (Windows NT; Windows NT 10.0; en-US) WindowsPowerShell/5.1.26100.1\r\nContent-Type: application/json\r\nHost: 127.0.0.1:8001\r\nContent-Length: %d\r\nConnection: Keep-Alive\r\n\r\n" +
			"{\r\n    \"messages\":  [\r\n                     {\r\n                         \"content\":  \"Write a Python function to compute Fibonacci with memoization.\",\r\n                         \"role\":  \"user\"\r\n                     }\r\n                 ],\r\n    \"temperature\":  0.1,\r\n    \"model\":  \"minicpm5:2b\",\r\n    \"max_tokens\":  200\r\n}",
		wantContent: "echo: Write a Python function to compute Fibonacci with memoization.",
	},
}

func TestModelCardExamples(t *testing.T) {
	srv := webtest.Start(t, webtest.Config{})
	addr := strings.TrimPrefix(srv.URL, "http://")
	for _, c := range modelCardRequests {
		t.Run(c.name, func(t *testing.T) {
			head, body, _ := strings.Cut(c.raw, "\r\n\r\n")
			raw := strings.Replace(head, "%d", itoa(len(body)), 1) + "\r\n\r\n" + body
			// the card's port is 8001; the client sends the port it
			// connects to, and the server takes only its own
			raw = strings.Replace(raw, "Host: 127.0.0.1:8001", "Host: "+addr, 1)
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			if _, err := io.WriteString(conn, raw); err != nil {
				t.Fatal(err)
			}
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var out struct {
				Choices []struct {
					Message struct{ Role, Content string } `json:"message"`
				} `json:"choices"`
			}
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != 200 || json.Unmarshal(b, &out) != nil || len(out.Choices) != 1 {
				t.Fatalf("%d %s", resp.StatusCode, b)
			}
			// PowerShell's "Select-Object -ExpandProperty choices | Select-Object
			// -ExpandProperty message" needs exactly this shape.
			if m := out.Choices[0].Message; m.Role != "assistant" || m.Content != c.wantContent {
				t.Fatalf("message %+v", m)
			}
		})
	}
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}
