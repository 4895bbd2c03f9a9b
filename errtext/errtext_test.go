package errtext

import "testing"

func TestLastPartAsSentence(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"", ""},
		{"disk full", "Disk full."},
		{"load model: open /m/x.gguf: permission denied", "Permission denied."},
		{"install: get https://hf.co/x (status 404: not found): giving up now", "Giving up now."},
		{"read header: bad magic", "Read header: bad magic."},
		{"Is it running?", "Is it running?"},
	} {
		if got := Sentence(LastPart(c.in)); got != c.want {
			t.Errorf("Sentence(LastPart(%q)) = %q, want %q", c.in, got, c.want)
		}
	}
}
