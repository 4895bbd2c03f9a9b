package secret

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
)

// TestNeverWhole: every way a Secret is printed, logged or marshalled
// shows its Masked form, never the value.
func TestNeverWhole(t *testing.T) {
	for _, tc := range []struct{ in, masked string }{
		{"", ""},
		{"short", "…"},
		{"medium12", "…12"},
		{"hf_abcdefghijklmn1234", "hf_…1234"},
	} {
		s := Secret(tc.in)
		if s.Masked() != tc.masked || s.Reveal() != tc.in {
			t.Errorf("%q: masked %q reveal %q", tc.in, s.Masked(), s.Reveal())
		}
		js, _ := json.Marshal(struct{ T Secret }{s})
		var log bytes.Buffer
		slog.New(slog.NewTextHandler(&log, nil)).Info("x", "token", s)
		for _, shown := range []string{fmt.Sprint(s), fmt.Sprintf("%#v", s), string(js), log.String()} {
			if len(tc.in) >= 8 && strings.Contains(shown, tc.in) {
				t.Errorf("%q shown whole: %s", tc.in, shown)
			}
		}
	}
}
