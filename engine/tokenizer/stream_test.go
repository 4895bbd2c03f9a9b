package tokenizer

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// feed runs ids through a stream one at a time and returns all its text.
func feed(s *Stream, ids []int) (text string, stopped bool) {
	var sb strings.Builder
	for _, id := range ids {
		t, st := s.Add(id)
		sb.WriteString(t)
		if st {
			return sb.String(), true
		}
	}
	sb.WriteString(s.Flush())
	return sb.String(), false
}

// randomIDs mixes single-byte tokens (which split UTF-8 characters),
// ordinary tokens and added tokens.
func randomIDs(r *rand.Rand, tok *Tokenizer, n int) []int {
	ids := make([]int, n)
	for i := range ids {
		switch x := r.IntN(10); {
		case x < 4:
			ids[i] = r.IntN(256)
		case x < 9:
			ids[i] = r.IntN(151643)
		default:
			ids[i] = 151643 + r.IntN(tok.Size()-151643)
		}
	}
	return ids
}

// Feeding ids one at a time gives exactly the full decode.
func TestStreamEqualsDecode(t *testing.T) {
	tok := qwen3(t)
	r := rand.New(rand.NewPCG(1, 2))
	// Multi-byte characters cut into single-byte tokens.
	bytesOf := func(s string) []int {
		var ids []int
		table := byteToRune()
		for i := 0; i < len(s); i++ {
			id, _ := tok.ID(string(table[s[i]]))
			ids = append(ids, id)
		}
		return ids
	}
	cases := [][]int{bytesOf("héllo 世界 👍🏽"), bytesOf("\xe4\xb8"), bytesOf("a\xffb\xe4\xb8\x96"), tok.Encode("plain text, 世界 and 👨‍👩‍👧")}
	for i := 0; i < 500; i++ {
		cases = append(cases, randomIDs(r, tok, 1+r.IntN(20)))
	}
	for _, ids := range cases {
		for _, show := range []bool{true, false} {
			var want []int
			for _, id := range ids {
				if show || !tok.IsSpecial(id) {
					want = append(want, id)
				}
			}
			full, err := tok.Decode(want)
			if err != nil {
				t.Fatal(err)
			}
			s := NewStream(tok, nil)
			s.ShowSpecial = show
			got, stopped := feed(s, ids)
			if got != full || stopped {
				t.Fatalf("ids %v (special shown %v): stream gave %q, decode %q", ids, show, got, full)
			}
		}
	}
}

// With stop strings, the stream gives the decode up to the first stop
// string, never more and never less, and text comes out as soon as it
// cannot be part of a stop string.
func TestStreamStops(t *testing.T) {
	tok := qwen3(t)
	tests := []struct {
		name   string
		text   string
		stops  []string
		want   string
		stop   bool
		chunks []string // what each Add returned, when checked
	}{
		{name: "no stop", text: "Hello world", stops: []string{"STOP"}, want: "Hello world"},
		{name: "stop in middle", text: "Hello STOP world", stops: []string{"STOP"}, want: "Hello ", stop: true},
		{name: "stop across tokens", text: "abc\n\nUser: hi", stops: []string{"\n\nUser:"}, want: "abc", stop: true},
		{name: "partial stop at end is flushed", text: "the end\n\nUse", stops: []string{"\n\nUser:"}, want: "the end\n\nUse"},
		{name: "earliest of two stops", text: "one two three", stops: []string{"three", "two"}, want: "one ", stop: true},
		{name: "overlapping prefix", text: "aab", stops: []string{"ab"}, want: "a", stop: true},
		{name: "stop is a special token text", text: "answer<|im_end|>more", stops: []string{"<|im_end|>"}, want: "answer", stop: true},
		{name: "multibyte stop", text: "一二三四", stops: []string{"三"}, want: "一二", stop: true},
		{name: "empty stop ignored", text: "abc", stops: []string{""}, want: "abc"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := NewStream(tok, tc.stops)
			s.ShowSpecial = true
			got, stopped := feed(s, tok.Encode(tc.text))
			if got != tc.want || stopped != tc.stop {
				t.Errorf("got %q stopped=%v, want %q stopped=%v", got, stopped, tc.want, tc.stop)
			}
			if tc.stop {
				if x, st := s.Add(9707); x != "" || !st {
					t.Errorf("Add after stop = %q, %v", x, st)
				}
			}
		})
	}
}

// Text that cannot start a stop string is not held back.
func TestStreamHoldsOnlyPossibleStops(t *testing.T) {
	tok := qwen3(t)
	s := NewStream(tok, []string{"</answer>"})
	var got []string
	for _, id := range tok.Encode("ok </ans nope") {
		x, _ := s.Add(id)
		got = append(got, x)
	}
	joined := strings.Join(got, "")
	if joined != "ok </ans nope" {
		t.Errorf("before Flush got %q; text that is no stop string was held back", joined)
	}
	s3 := NewStream(tok, []string{"</answer>"})
	var early strings.Builder
	for _, id := range tok.Encode("x </ans") {
		x, _ := s3.Add(id)
		early.WriteString(x)
	}
	if early.String() != "x " {
		t.Errorf("got %q before Flush, want %q (the rest could start </answer>)", early.String(), "x ")
	}
	if rest := s3.Flush(); rest != "</ans" {
		t.Errorf("Flush = %q, want %q", rest, "</ans")
	}
}

// Random ids and random stop strings: the output is the decode cut at the
// earliest stop string.
func TestStreamStopsRandom(t *testing.T) {
	tok := qwen3(t)
	r := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < 400; i++ {
		ids := randomIDs(r, tok, 1+r.IntN(16))
		var plain []int
		for _, id := range ids {
			if !tok.IsSpecial(id) {
				plain = append(plain, id)
			}
		}
		full, _ := tok.Decode(plain)
		// A stop string taken from inside the text, so that it often hits.
		var stops []string
		if rs := []rune(full); len(rs) > 2 {
			a := r.IntN(len(rs) - 1)
			b := a + 1 + r.IntN(min(4, len(rs)-a-1))
			stops = append(stops, string(rs[a:b]))
		}
		stops = append(stops, "zz\n")
		want, wantStop := full, false
		best := -1
		for _, x := range stops {
			if j := strings.Index(full, x); j >= 0 && (best < 0 || j < best) {
				best = j
			}
		}
		if best >= 0 {
			want, wantStop = full[:best], true
		}
		got, stopped := feed(NewStream(tok, stops), ids)
		if got != want || stopped != wantStop {
			t.Fatalf("ids %v stops %q: got %q (stopped %v), want %q (stopped %v)", ids, stops, got, stopped, want, wantStop)
		}
	}
}
