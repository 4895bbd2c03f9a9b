package app

import "testing"

// TestChatURLOpensInABrowser: the chat page's URL is one a browser can
// open. A server listening on every interface (0.0.0.0, [::], or a bare
// ":port", which Go reports as [::]) is reached through loopback:
// browsers refuse to navigate to the unspecified address (Chrome's
// ERR_ADDRESS_INVALID on Windows), so "Open chat" and a second launch
// would open a page that never loads.
func TestChatURLOpensInABrowser(t *testing.T) {
	tests := []struct{ addr, want string }{
		{"127.0.0.1:8001", "http://127.0.0.1:8001/"},
		{"localhost:8001", "http://localhost:8001/"},
		{"192.168.1.5:8001", "http://192.168.1.5:8001/"},
		{"[::1]:8001", "http://[::1]:8001/"},
		{"0.0.0.0:8001", "http://127.0.0.1:8001/"},
		{"[::]:8001", "http://[::1]:8001/"},
		{":8001", "http://127.0.0.1:8001/"},
		{"[::ffff:0.0.0.0]:8001", "http://127.0.0.1:8001/"},
	}
	for _, tt := range tests {
		if got := chatURL(tt.addr); got != tt.want {
			t.Errorf("chatURL(%q) = %q, want %q", tt.addr, got, tt.want)
		}
	}
}
