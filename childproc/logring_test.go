package childproc

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
)

func TestLogRing(t *testing.T) {
	var sink bytes.Buffer
	r := NewLogRing(&sink, 3)
	seq0 := r.Seq()
	for _, w := range []string{"one\n", "tw", "o\r\nthree\nfour\n", "fi"} {
		if n, err := r.Write([]byte(w)); n != len(w) || err != nil {
			t.Fatalf("Write(%q) = %d, %v", w, n, err)
		}
	}
	if sink.String() != "one\ntwo\r\nthree\nfour\nfi" {
		t.Errorf("sink got %q", sink.String())
	}
	tests := []struct {
		seq  uint64
		max  int
		want []string
	}{
		{seq0, 10, []string{"two", "three", "four", "fi"}}, // "one" fell out of the ring
		{seq0, 2, []string{"three", "four"}},
		{3, 10, []string{"four", "fi"}},
		{4, 10, []string{"fi"}},
		{99, 10, []string{"fi"}},
	}
	for _, tt := range tests {
		if got := r.Since(tt.seq, tt.max); fmt.Sprint(got) != fmt.Sprint(tt.want) {
			t.Errorf("Since(%d, %d) = %q, want %q", tt.seq, tt.max, got, tt.want)
		}
	}
	if r.Seq() != 4 {
		t.Errorf("Seq = %d", r.Seq())
	}

	long := NewLogRing(nil, 2)
	long.Write([]byte(strings.Repeat("x", maxLogPartial+10)))
	got := long.Since(0, 5)
	if len(got) != 1 || len(got[0]) > maxLogLine+len("…") {
		t.Errorf("an endless line is kept whole: %d lines, first %d bytes", len(got), len(got[0]))
	}
	long.Note("hello")
	if got := long.Since(0, 5); got[len(got)-1] != "npuchat: hello" {
		t.Errorf("Note: %q", got)
	}
}
